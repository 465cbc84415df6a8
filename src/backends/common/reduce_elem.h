// The reduction element functions, shared by the CPU backend's loops (src/backends/cpu/reduce.cc) and the GPU
// kernels: per element type, add/mul/max/min/div with braid's semantics (cpu/reduce.h states them), and the three
// element steps of an operation (Combine, PreMul, PostDiv).
//
// Floating-point contraction. Every step rounds on its own: PreMulSum's x * scalar + y must never become one fused
// multiply-add, or results stop being the same bits on the host and the device. The host builds with
// -ffp-contract=off (CMakeLists.txt; GCC contracts across statements by default). nvcc fuses by default
// (--fmad=true), so the device branch below uses the explicitly rounded intrinsics (__fadd_rn, __fmul_rn, ...),
// which are never contracted whatever --fmad says; kernels are built with --fmad=false as well. Never fast-math.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/common/coll_types.h"
#include "src/common/dtype.h"
#include "src/common/host_device.h"

namespace braid {
namespace reduce_elem {

// Correctly rounded float and double arithmetic, never fused.
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float fpAdd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float fpMul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float fpDiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE double fpAdd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE double fpMul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE double fpDiv(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// ---- Arithmetic per element type. Each traits class has storage type S, divisor type D and add/mul/max/min/div. ----

template <typename T>
struct IntTraits {
  using S = T;
  using D = T;
  // Wrap-around arithmetic in an unsigned type at least as wide as unsigned int (no promotion to signed int).
  using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S add(S a, S b) {
    return static_cast<S>(static_cast<W>(a) + static_cast<W>(b));
  }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S mul(S a, S b) {
    return static_cast<S>(static_cast<W>(a) * static_cast<W>(b));
  }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S max(S a, S b) { return a < b ? b : a; }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S min(S a, S b) { return b < a ? b : a; }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S div(S a, D d) {
    return static_cast<S>(a / d);
  }  // d >= 1, so no INT_MIN / -1
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE D divisor(int n) { return static_cast<D>(n); }
};

template <typename T>
struct FloatTraits {
  using S = T;
  using D = T;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S add(S a, S b) { return fpAdd(a, b); }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S mul(S a, S b) { return fpMul(a, b); }
  // fmax/fmin semantics (a NaN operand loses unless both are NaN), written so GCC vectorizes it.
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S max(S a, S b) { return (b > a || a != a) ? b : a; }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S min(S a, S b) { return (b < a || a != a) ? b : a; }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S div(S a, D d) { return fpDiv(a, d); }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE D divisor(int n) { return static_cast<D>(n); }
};

// Narrow floats: widen to float, operate, round back (RNE) after every step. For half/bf16/fp8 a float operation
// followed by that rounding equals the correctly rounded narrow operation (float has >= 2p+2 bits for each).
template <typename T, float (*kToF)(T), T (*kFromF)(float)>
struct NarrowTraits {
  using S = T;
  using D = float;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S add(S a, S b) { return kFromF(fpAdd(kToF(a), kToF(b))); }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S mul(S a, S b) { return kFromF(fpMul(kToF(a), kToF(b))); }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S max(S a, S b) {
    const float fa = kToF(a), fb = kToF(b);
    return (fb > fa || fa != fa) ? b : a;
  }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S min(S a, S b) {
    const float fa = kToF(a), fb = kToF(b);
    return (fb < fa || fa != fa) ? b : a;
  }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S div(S a, D d) { return kFromF(fpDiv(kToF(a), d)); }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE D divisor(int n) { return static_cast<D>(n); }
};

using HalfTraits = NarrowTraits<uint16_t, halfToFloat, floatToHalf>;
using Bf16Traits = NarrowTraits<uint16_t, bf16ToFloat, floatToBf16>;
using E4m3Traits = NarrowTraits<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3>;
using E5m2Traits = NarrowTraits<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2>;

template <class Tr>
struct Params {
  typename Tr::S scalar;
  typename Tr::D divisor;
};

template <class Tr>
BRAID_HOST_DEVICE Params<Tr> makeParams(const ReduceOp& op) {
  Params<Tr> p;
  // Low bytes on a little-endian host; a device scalar is read here, when the work runs.
  memcpy(&p.scalar, op.scalarPtr != nullptr ? op.scalarPtr : static_cast<const void*>(&op.scalar), sizeof(p.scalar));
  p.divisor = Tr::divisor(op.nranks < 1 ? 1 : op.nranks);
  return p;
}

// ---- Element functions. ----

// The binary step: peer (op) pre(local), then the optional post-op.
template <class Tr, OpKind kKind, bool kPost>
struct Combine {
  using S = typename Tr::S;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S apply(S p, S l, const Params<Tr>& prm) {
    S r;
    if constexpr (kKind == OpKind::kProd) {
      r = Tr::mul(p, l);
    } else if constexpr (kKind == OpKind::kMax) {
      r = Tr::max(p, l);
    } else if constexpr (kKind == OpKind::kMin) {
      r = Tr::min(p, l);
    } else if constexpr (kKind == OpKind::kPreMulSum) {
      r = Tr::add(p, Tr::mul(l, prm.scalar));
    } else {  // kSum, kAvg
      r = Tr::add(p, l);
    }
    if constexpr (kPost) r = Tr::div(r, prm.divisor);
    return r;
  }
};

// The unary steps.
template <class Tr>
struct PreMul {
  using S = typename Tr::S;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S apply(S x, const Params<Tr>& prm) { return Tr::mul(x, prm.scalar); }
};
template <class Tr>
struct PostDiv {
  using S = typename Tr::S;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S apply(S x, const Params<Tr>& prm) { return Tr::div(x, prm.divisor); }
};

}  // namespace reduce_elem
}  // namespace braid
