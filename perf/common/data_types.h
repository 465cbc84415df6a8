// Datatypes and reduction ops known to the perf tools (nccl-tests' names), and the verifiable data generator.
//
// Verification is bitwise (0 ULP) for every datatype and every op, avg included. Inputs are small integers (or, for
// prod, +-1 and +-2) chosen per (seed, rank, element) so that every partial result of any reduction order is exactly
// representable in the datatype; the expected result is then computed exactly on the host (64-bit integers or
// double) and stored once into the datatype:
//   sum, avg  at most W ranks contribute a non-zero value to an element (a window of ranks that slides with the
//             element index, W = min(nranks, largest exact integer of the type)), each in [-V, V] with V*W within
//             the exact range (e.g. f8e5m2: W = 8, |sum| <= 8; f8e4m3: 16; bfloat16: 256; half: 2048).
//   avg       expected = the exact sum divided by nranks and rounded once to the type (round to nearest even) for
//             floating types, C++ integer division (truncation toward zero) for integer types.
//   prod      at most P ranks (P = the largest k with 2^k finite in the type) contribute +-2, the rest +-1 (+1 only
//             for unsigned types), so every partial product is +-2^j, exact.
//   max, min  every rank contributes a value from the whole exact range.
// No input is -0 or NaN, so the sign of zero and NaN payloads never depend on the order of operations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace braid::perf {

enum class TypeKind { kSigned, kUnsigned, kFloat };

struct TypeInfo {
  const char* name;  // nccl-tests' name: "int8", "float", "bfloat16", "f8e4m3", ...
  ncclDataType_t type;
  size_t size;
  TypeKind kind;
  // Every integer in [-maxExactInt, maxExactInt] ([0, maxExactInt] when unsigned) is exactly representable.
  uint64_t maxExactInt;
  // 2^maxPow2 (and its negative when signed) is exactly representable and finite.
  int maxPow2;
  // For narrow floating types: exponent and mantissa bits, and whether the all-ones exponent is inf/NaN (IEEE-like)
  // or the format has no infinity (e4m3 "fn": only S.1111.111 is NaN).
  int expBits;
  int mantBits;
  bool ieeeLike;
};

struct OpInfo {
  const char* name;  // "sum", "prod", "max", "min", "avg", "mulsum"
  ncclRedOp_t op;    // kMulSumOp for mulsum: the library creates the real op per call
};

// nccl-tests' "mulsum": a sum with each rank's input pre-multiplied by premulScalar(rank), through
// ncclRedOpCreatePreMulSum. Inputs use half the exact range so every scaled partial sum stays exact.
constexpr ncclRedOp_t kMulSumOp = ncclNumOps;
int premulScalar(int rank);  // 1 or 2: a power of two, so scaling is exact in every type

// Writes the integer `value` as one element of `type` (the pre-multiplication scalar's representation).
void storeScalar(const TypeInfo& type, int64_t value, void* out);

// All datatypes in nccl-tests' "all" order; nullptr when the name is unknown.
const TypeInfo* allTypes(size_t* count);
const TypeInfo* findType(const char* name);
const OpInfo* allOps(size_t* count);
const OpInfo* findOp(const char* name);

// Rounds x once to the narrow floating format described by `type` (half, bfloat16, f8e4m3, f8e5m2), to nearest,
// ties to even, with subnormals; returns the bit pattern. Exposed for tests of the generator.
uint32_t encodeNarrowFloat(const TypeInfo& type, double x);

// What the generator needs to know to produce one rank's input or the expected result.
struct DataSpec {
  const TypeInfo* type = nullptr;
  ncclRedOp_t op = ncclSum;  // selects the value pattern; data-movement collectives pass ncclSum
  int nranks = 1;
  uint64_t seed = 0;
};

// Writes elements [first, first + count) of `rank`'s input into buf[0, count).
void fillInput(const DataSpec& spec, int rank, size_t first, size_t count, void* buf);

// Writes elements [first, first + count) of the exact reduction (spec.op) over all ranks' inputs into buf.
void fillReduced(const DataSpec& spec, size_t first, size_t count, void* buf);

// Number of elements whose bit patterns differ.
size_t countMismatches(const TypeInfo& type, const void* got, const void* expected, size_t count);

// Fills `bytes` bytes with a pattern that is no plausible result (so an operation that writes nothing is caught).
void poison(void* buf, size_t bytes);

}  // namespace braid::perf
