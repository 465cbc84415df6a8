// Every inline-PTX helper of the kernels, in one file (nvcc only). The shared layer (src/backends/common) stays
// free of inline assembly; what it needs from the hardware comes through the CTA (device_cta.cuh).
#pragma once

#include <cstdint>

namespace braid {
namespace ptx {

// The GPU's global timer in nanoseconds (%globaltimer: a 64-bit nanosecond counter, updated every microsecond or
// so). Deadlines only need it to be monotonic and in nanoseconds.
__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace ptx
}  // namespace braid
