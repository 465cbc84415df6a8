// Block conversions between the narrow float formats (half, bf16, fp8) and float, for the reduction kernels: the
// same results as dtype.h's element conversions (tests compare them), as fast as the CPU allows. Half uses the
// F16C instructions when the CPU has them (checked once at run time); bf16 uses its shift-and-round form; fp8
// widens through a 256-entry table. With the default MXCSR (no FTZ/DAZ), as everywhere in the host backend.
#pragma once

#include <cstddef>

#include "src/common/dtype.h"

namespace braid {

// dst[i] = src[i] as a float (exact). t is a narrow float type.
void widenBlock(DType t, float* dst, const unsigned char* src, size_t n);
// dst[i] = src[i] rounded to t (nearest even; t's overflow and NaN rules).
void narrowBlock(DType t, unsigned char* dst, const float* src, size_t n);
// Whether t is half, bf16 or one of the fp8 formats.
bool isNarrowFloatType(DType t);
// Whether half conversions use F16C on this CPU (for benchmarks and logs).
bool halfUsesF16c();

}  // namespace braid
