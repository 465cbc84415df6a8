// Data movement for a CTA of several threads: the element functions of reduce_elem.h in loops strided over the
// CTA's threads (thread t takes elements t, t + nthreads, ...). This is the form a GPU kernel and the CTA emulator
// run; the CPU backend keeps its own SIMD block loops (src/backends/cpu/reduce.cc) over the same element functions,
// and tests compare the two bitwise.
//
// Semantics are cpu/reduce.h's: dst may be exactly peer and/or local (src for the copies), never a partial
// overlap; each element is read and written by one thread, so the exact aliasing is safe without barriers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/backends/common/reduce_elem.h"
#include "src/common/coll_types.h"
#include "src/common/dtype.h"
#include "src/common/host_device.h"

namespace braid {
namespace cta_detail {

using namespace reduce_elem;

template <typename S>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE S loadElem(const void* p, size_t i) {
  S v;
  memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(S), sizeof(S));
  return v;
}
template <typename S>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE void storeElem(void* p, size_t i, S v) {
  memcpy(static_cast<unsigned char*>(p) + i * sizeof(S), &v, sizeof(S));
}

template <class Tr, OpKind kKind, bool kPost, class Cta>
BRAID_HOST_DEVICE void binary(const Cta& cta, void* dst, const void* peer, const void* local, size_t n,
                              const Params<Tr>& prm) {
  using S = typename Tr::S;
  for (size_t i = static_cast<size_t>(cta.tid()); i < n; i += static_cast<size_t>(cta.nthreads())) {
    storeElem<S>(dst, i, Combine<Tr, kKind, kPost>::apply(loadElem<S>(peer, i), loadElem<S>(local, i), prm));
  }
}

template <class Tr, class Cta>
BRAID_HOST_DEVICE void reduceT(const Cta& cta, const ReduceOp& op, void* dst, const void* peer, const void* local,
                               size_t n, bool post) {
  const Params<Tr> prm = makeParams<Tr>(op);
  switch (op.kind) {
    case OpKind::kProd:
      return binary<Tr, OpKind::kProd, false>(cta, dst, peer, local, n, prm);
    case OpKind::kMax:
      return binary<Tr, OpKind::kMax, false>(cta, dst, peer, local, n, prm);
    case OpKind::kMin:
      return binary<Tr, OpKind::kMin, false>(cta, dst, peer, local, n, prm);
    case OpKind::kPreMulSum:
      return binary<Tr, OpKind::kPreMulSum, false>(cta, dst, peer, local, n, prm);
    case OpKind::kAvg:
      if (post && op.nranks > 1) return binary<Tr, OpKind::kAvg, true>(cta, dst, peer, local, n, prm);
      return binary<Tr, OpKind::kSum, false>(cta, dst, peer, local, n, prm);
    default:
      return binary<Tr, OpKind::kSum, false>(cta, dst, peer, local, n, prm);
  }
}

// dst = pre(src), then post if asked.
template <class Tr, class Cta>
BRAID_HOST_DEVICE void copyLocalT(const Cta& cta, const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
  using S = typename Tr::S;
  const Params<Tr> prm = makeParams<Tr>(op);
  const bool pre = op.kind == OpKind::kPreMulSum;
  const bool div = !pre && post && op.kind == OpKind::kAvg && op.nranks > 1;
  for (size_t i = static_cast<size_t>(cta.tid()); i < n; i += static_cast<size_t>(cta.nthreads())) {
    S x = loadElem<S>(src, i);
    if (pre) x = PreMul<Tr>::apply(x, prm);
    if (div) x = PostDiv<Tr>::apply(x, prm);
    storeElem<S>(dst, i, x);
  }
}

// Calls F::template run<Traits>(args...) for the dtype.
template <class F, class... A>
BRAID_HOST_DEVICE void dispatchDtype(DType t, A&&... a) {
  switch (t) {
    case DType::kInt8:
      return F::template run<IntTraits<int8_t>>(a...);
    case DType::kUint8:
      return F::template run<IntTraits<uint8_t>>(a...);
    case DType::kInt32:
      return F::template run<IntTraits<int32_t>>(a...);
    case DType::kUint32:
      return F::template run<IntTraits<uint32_t>>(a...);
    case DType::kInt64:
      return F::template run<IntTraits<int64_t>>(a...);
    case DType::kUint64:
      return F::template run<IntTraits<uint64_t>>(a...);
    case DType::kFloat16:
      return F::template run<HalfTraits>(a...);
    case DType::kFloat32:
      return F::template run<FloatTraits<float>>(a...);
    case DType::kFloat64:
      return F::template run<FloatTraits<double>>(a...);
    case DType::kBfloat16:
      return F::template run<Bf16Traits>(a...);
    case DType::kFp8E4M3:
      return F::template run<E4m3Traits>(a...);
    case DType::kFp8E5M2:
      return F::template run<E5m2Traits>(a...);
    default:
      return;  // callers validate the dtype
  }
}

struct ReduceFn {
  template <class Tr, class Cta>
  BRAID_HOST_DEVICE static void run(const Cta& cta, const ReduceOp& op, void* dst, const void* peer, const void* local,
                                    size_t n, bool post) {
    reduceT<Tr>(cta, op, dst, peer, local, n, post);
  }
};
struct CopyLocalFn {
  template <class Tr, class Cta>
  BRAID_HOST_DEVICE static void run(const Cta& cta, const ReduceOp& op, void* dst, const void* src, size_t n,
                                    bool post) {
    copyLocalT<Tr>(cta, op, dst, src, n, post);
  }
};

// How a multi-source reduction accumulates: narrow floats (half, bf16, fp8) in float, rounded once at the end;
// every other type in itself (Same), where one pass gives the bits a chain of binary steps gives.
template <class Tr>
struct Same {
  using AT = Tr;
  using S = typename Tr::S;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S widen(S x) { return x; }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE S narrow(S a) { return a; }
};
template <class Tr>
struct Wide : Same<Tr> {};
template <class T, float (*kToF)(T), T (*kFromF)(float)>
struct Wide<NarrowTraits<T, kToF, kFromF>> {
  using AT = FloatTraits<float>;
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE float widen(T x) { return kToF(x); }
  BRAID_HOST_DEVICE static BRAID_FORCE_INLINE T narrow(float a) { return kFromF(a); }
};

template <class AT, OpKind kKind>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE typename AT::S combineAcc(typename AT::S acc, typename AT::S x) {
  if constexpr (kKind == OpKind::kProd) {
    return AT::mul(acc, x);
  } else if constexpr (kKind == OpKind::kMax) {
    return AT::max(acc, x);
  } else if constexpr (kKind == OpKind::kMin) {
    return AT::min(acc, x);
  } else {
    return AT::add(acc, x);
  }
}

// One pass over every source per element (the acc never goes to memory between ranks).
template <class Tr, OpKind kKind, class Acc, class Cta>
BRAID_HOST_DEVICE void manyT(const Cta& cta, const ReduceOp* ops, void* dst, const char* const* srcs, size_t at,
                             int nsrc, size_t n, bool post) {
  using S = typename Tr::S;
  using AT = typename Acc::AT;
  using A = typename AT::S;
  const bool div = post && kKind == OpKind::kAvg && ops[0].nranks > 1;
  const auto divisor = static_cast<typename AT::D>(makeParams<Tr>(ops[0]).divisor);
  for (size_t i = static_cast<size_t>(cta.tid()); i < n; i += static_cast<size_t>(cta.nthreads())) {
    A acc{};
    for (int p = 0; p < nsrc; ++p) {
      S x = loadElem<S>(srcs[p] + at, i);
      // Pre-multiplied in the type, as a staged input is (rounded there for narrow types).
      if constexpr (kKind == OpKind::kPreMulSum) x = PreMul<Tr>::apply(x, makeParams<Tr>(ops[p]));
      const A w = Acc::widen(x);
      acc = p == 0 ? w : combineAcc<AT, kKind>(acc, w);
    }
    // An average divides the sum rounded to the type, as a switch's reduction (which returns the type) is divided.
    if (div) acc = AT::div(Acc::widen(Acc::narrow(acc)), divisor);
    storeElem<S>(dst, i, Acc::narrow(acc));
  }
}

struct ManyFn {
  template <class Tr, class Cta>
  BRAID_HOST_DEVICE static void run(const Cta& cta, const ReduceOp* ops, void* dst, const char* const* srcs, size_t at,
                                    int nsrc, size_t n, bool post) {
    // Max and min return an operand's own code, so they need no widening.
    using W = Wide<Tr>;
    using M = Same<Tr>;
    switch (ops[0].kind) {
      case OpKind::kProd:
        return manyT<Tr, OpKind::kProd, W>(cta, ops, dst, srcs, at, nsrc, n, post);
      case OpKind::kMax:
        return manyT<Tr, OpKind::kMax, M>(cta, ops, dst, srcs, at, nsrc, n, post);
      case OpKind::kMin:
        return manyT<Tr, OpKind::kMin, M>(cta, ops, dst, srcs, at, nsrc, n, post);
      case OpKind::kPreMulSum:
        return manyT<Tr, OpKind::kPreMulSum, W>(cta, ops, dst, srcs, at, nsrc, n, post);
      case OpKind::kAvg:
        return manyT<Tr, OpKind::kAvg, W>(cta, ops, dst, srcs, at, nsrc, n, post);
      default:
        return manyT<Tr, OpKind::kSum, W>(cta, ops, dst, srcs, at, nsrc, n, post);
    }
  }
};

}  // namespace cta_detail

// dst[i] = peer[i] (op) pre(local[i]); if post, dst[i] = post(dst[i]).
template <class Cta>
BRAID_HOST_DEVICE void ctaReduce(const Cta& cta, const ReduceOp& op, void* dst, const void* peer, const void* local,
                                 size_t n, bool post) {
  cta_detail::dispatchDtype<cta_detail::ReduceFn>(op.dtype, cta, op, dst, peer, local, n, post);
}

// dst[i] = pre(src[i]); if post, dst[i] = post(dst[i]).
template <class Cta>
BRAID_HOST_DEVICE void ctaCopyLocal(const Cta& cta, const ReduceOp& op, void* dst, const void* src, size_t n,
                                    bool post) {
  cta_detail::dispatchDtype<cta_detail::CopyLocalFn>(op.dtype, cta, op, dst, src, n, post);
}

// dst[i] = post(pre_0(src_0[i]) (op) pre_1(src_1[i]) (op) ... (op) pre_{nsrc-1}(src_{nsrc-1}[i])), src_p = srcs[p] + at
// bytes, in rank order, each element in one pass. ops[p] is source p's op (PreMulSum: its scalar; pre-multiplied in
// the type). Narrow floats accumulate sums and products in float and round once at the end (NCCL's symmetric
// kernels and a switch's .acc::f32 do the same; an average's sum is rounded, then divided, as the switch path
// divides what the switch returns); every other type combines in itself, bitwise what a
// chain of ctaCopyLocal and ctaReduce gives. cpu/reduce.h's reduceMany has the same semantics. dst may be exactly
// the first source's range and must not overlap another.
template <class Cta>
BRAID_HOST_DEVICE void ctaReduceMany(const Cta& cta, const ReduceOp* ops, void* dst, const char* const* srcs, size_t at,
                                     int nsrc, size_t n, bool post) {
  cta_detail::dispatchDtype<cta_detail::ManyFn>(ops[0].dtype, cta, ops, dst, srcs, at, nsrc, n, post);
}

// A plain copy, in 8-byte words where both ends allow it.
template <class Cta>
BRAID_HOST_DEVICE void ctaCopy(const Cta& cta, void* dst, const void* src, size_t bytes) {
  if (dst == src) return;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const size_t t = static_cast<size_t>(cta.tid()), nt = static_cast<size_t>(cta.nthreads());
  size_t head = 0;
  if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 7) == 0) {
    const size_t words = bytes / 8;
    for (size_t i = t; i < words; i += nt) {
      uint64_t v;
      memcpy(&v, s + i * 8, 8);
      memcpy(d + i * 8, &v, 8);
    }
    head = words * 8;
  }
  for (size_t i = head + t; i < bytes; i += nt) d[i] = s[i];
}

}  // namespace braid
