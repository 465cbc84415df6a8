#include "src/backends/cpu/reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "src/backends/common/reduce_copy.h"
#include "src/backends/common/reduce_elem.h"
#include "src/backends/cpu/host_cta.h"
#include "src/backends/cpu/narrow_convert.h"
#include "src/common/host_device.h"

// Every step rounds on its own: the whole build uses -ffp-contract=off (CMakeLists.txt; reduce_elem.h says why).

namespace braid {
namespace {

using namespace reduce_elem;  // the element functions: src/backends/common/reduce_elem.h

// ---- Loops. Byte pointers plus memcpy loads/stores: any alignment, and GCC still vectorizes them. ----

template <typename S>
BRAID_FORCE_INLINE S load(const unsigned char* p, size_t i) {
  S v;
  std::memcpy(&v, p + i * sizeof(S), sizeof(S));
  return v;
}
template <typename S>
BRAID_FORCE_INLINE void store(unsigned char* p, size_t i, S v) {
  std::memcpy(p + i * sizeof(S), &v, sizeof(S));
}

// Large operands are read in kStripes interleaved streams: the loop walks kStripes equal parts of the range a
// piece at a time, round robin, so the core's prefetchers keep that many streams from memory in flight, where one
// sequential stream leaves part of a core's memory bandwidth unused (docs/perf.md, night of 2026-12-07: a rank's
// reads of its vector into a slot 16-23 % faster, a 2-process heap all-reduce's medians 2-6 %). Elements are
// independent, so the order changes no result; loops whose buffers may partially overlap keep their forward order
// and are not striped. Below kStripeMinBytes (reduce.h) the operands are likely cached, and the pieces would only
// cost. The narrow floats' block loops below are bound by their conversions, not by memory, and are not striped.
constexpr size_t kStripes = 4;
constexpr size_t kStripePieceBytes = 256;

// Calls run(first, count) over [0, n) elements of kSize bytes: whole below kStripeMinBytes, else striped.
template <size_t kSize, class Run>
BRAID_FORCE_INLINE void striped(size_t n, Run&& run) {
  static_assert(kSize <= kStripePieceBytes && kStripePieceBytes % kSize == 0, "pieces of whole elements");
  if (n * kSize < kStripeMinBytes) return run(size_t{0}, n);
  constexpr size_t kPiece = kStripePieceBytes / kSize;
  const size_t seg = n / kStripes / kPiece * kPiece;
  for (size_t j = 0; j < seg; j += kPiece) {
    for (size_t k = 0; k < kStripes; ++k) run(k * seg + j, kPiece);
  }
  run(kStripes * seg, n - kStripes * seg);
}

// The loops runBinary/runUnary pick; __restrict tells the compiler the buffers do not alias, so it vectorizes.
template <class F, class Tr>
BRAID_FORCE_INLINE void binaryDistinct(unsigned char* __restrict d, const unsigned char* __restrict p,
                                       const unsigned char* __restrict l, size_t n, Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(p, i), load<S>(l, i), prm));
}
template <class F, class Tr>
BRAID_FORCE_INLINE void binaryDstIsPeer(unsigned char* __restrict d, const unsigned char* __restrict l, size_t n,
                                        Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(d, i), load<S>(l, i), prm));
}
template <class F, class Tr>
BRAID_FORCE_INLINE void binaryDstIsLocal(unsigned char* __restrict d, const unsigned char* __restrict p, size_t n,
                                         Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(p, i), load<S>(d, i), prm));
}
// All three the same buffer, or a (disallowed) partial overlap: forward element order, no aliasing assumptions.
template <class F, class Tr>
void binaryAny(unsigned char* d, const unsigned char* p, const unsigned char* l, size_t n, Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(p, i), load<S>(l, i), prm));
}

template <class F, class Tr>
BRAID_FORCE_INLINE void unaryDistinct(unsigned char* __restrict d, const unsigned char* __restrict s, size_t n,
                                      Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(s, i), prm));
}
template <class F, class Tr>
BRAID_FORCE_INLINE void unaryInPlace(unsigned char* __restrict d, size_t n, Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(d, i), prm));
}
template <class F, class Tr>
void unaryAny(unsigned char* d, const unsigned char* s, size_t n, Params<Tr> prm) {
  using S = typename Tr::S;
  for (size_t i = 0; i < n; ++i) store<S>(d, i, F::apply(load<S>(s, i), prm));
}

inline bool overlaps(const unsigned char* a, const unsigned char* b, size_t bytes) {
  return a < b + bytes && b < a + bytes;
}

template <class F, class Tr>
void runBinary(void* dst, const void* peer, const void* local, size_t n, const Params<Tr>& prm) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* p = static_cast<const unsigned char*>(peer);
  const auto* l = static_cast<const unsigned char*>(local);
  const size_t bytes = n * sizeof(typename Tr::S);
  constexpr size_t kS = sizeof(typename Tr::S);
  if (d == p && d != l && !overlaps(d, l, bytes)) {
    striped<kS>(n, [&](size_t at, size_t m) { binaryDstIsPeer<F, Tr>(d + at * kS, l + at * kS, m, prm); });
  } else if (d == l && d != p && !overlaps(d, p, bytes)) {
    striped<kS>(n, [&](size_t at, size_t m) { binaryDstIsLocal<F, Tr>(d + at * kS, p + at * kS, m, prm); });
  } else if (!overlaps(d, p, bytes) && !overlaps(d, l, bytes)) {
    // peer == local is fine here: both are only read
    striped<kS>(n, [&](size_t at, size_t m) { binaryDistinct<F, Tr>(d + at * kS, p + at * kS, l + at * kS, m, prm); });
  } else {
    binaryAny<F, Tr>(d, p, l, n, prm);
  }
}

template <class F, class Tr>
void runUnary(void* dst, const void* src, size_t n, const Params<Tr>& prm) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const size_t bytes = n * sizeof(typename Tr::S);
  constexpr size_t kS = sizeof(typename Tr::S);
  if (d == s) {
    striped<kS>(n, [&](size_t at, size_t m) { unaryInPlace<F, Tr>(d + at * kS, m, prm); });
  } else if (!overlaps(d, s, bytes)) {
    striped<kS>(n, [&](size_t at, size_t m) { unaryDistinct<F, Tr>(d + at * kS, s + at * kS, m, prm); });
  } else {
    unaryAny<F, Tr>(d, s, n, prm);
  }
}

}  // namespace

void stripedCopy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes == 0 || d == s) return;  // a null buffer with no bytes is valid, as everywhere in this file
  if (bytes < kStripeMinBytes || bytes >= kStripeMaxCopyBytes || overlaps(d, s, bytes)) {
    std::memmove(d, s, bytes);  // memmove is memcpy-speed when the buffers do not overlap
    return;
  }
  striped<1>(bytes, [&](size_t at, size_t m) { std::memcpy(d + at, s + at, m); });
}

namespace {

bool wantsPost(const ReduceOp& op, bool post) {
  return post && op.kind == OpKind::kAvg && op.nranks > 1;
}

// ---- Per-type entry points. ----

template <class Tr>
void reduceT(const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post) {
  const Params<Tr> prm = makeParams<Tr>(op);
  switch (op.kind) {
    case OpKind::kProd:
      return runBinary<Combine<Tr, OpKind::kProd, false>, Tr>(dst, peer, local, n, prm);
    case OpKind::kMax:
      return runBinary<Combine<Tr, OpKind::kMax, false>, Tr>(dst, peer, local, n, prm);
    case OpKind::kMin:
      return runBinary<Combine<Tr, OpKind::kMin, false>, Tr>(dst, peer, local, n, prm);
    case OpKind::kPreMulSum:
      return runBinary<Combine<Tr, OpKind::kPreMulSum, false>, Tr>(dst, peer, local, n, prm);
    case OpKind::kAvg:
      if (wantsPost(op, post)) return runBinary<Combine<Tr, OpKind::kAvg, true>, Tr>(dst, peer, local, n, prm);
      [[fallthrough]];
    case OpKind::kSum:
    default:
      return runBinary<Combine<Tr, OpKind::kSum, false>, Tr>(dst, peer, local, n, prm);
  }
}

template <class Tr>
void copyLocalT(const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
  if (op.kind == OpKind::kPreMulSum) return runUnary<PreMul<Tr>, Tr>(dst, src, n, makeParams<Tr>(op));
  if (wantsPost(op, post)) return runUnary<PostDiv<Tr>, Tr>(dst, src, n, makeParams<Tr>(op));
  stripedCopy(dst, src, n * sizeof(typename Tr::S));
}

template <class Tr>
void copyPostT(const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
  if (wantsPost(op, post)) return runUnary<PostDiv<Tr>, Tr>(dst, src, n, makeParams<Tr>(op));
  stripedCopy(dst, src, n * sizeof(typename Tr::S));
}

// Calls fn.template operator()<Traits>() for op's dtype.
template <class Fn>
void dispatchType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kInt8:
      return fn(IntTraits<int8_t>{});
    case DType::kUint8:
      return fn(IntTraits<uint8_t>{});
    case DType::kInt32:
      return fn(IntTraits<int32_t>{});
    case DType::kUint32:
      return fn(IntTraits<uint32_t>{});
    case DType::kInt64:
      return fn(IntTraits<int64_t>{});
    case DType::kUint64:
      return fn(IntTraits<uint64_t>{});
    case DType::kFloat16:
      return fn(HalfTraits{});
    case DType::kFloat32:
      return fn(FloatTraits<float>{});
    case DType::kFloat64:
      return fn(FloatTraits<double>{});
    case DType::kBfloat16:
      return fn(Bf16Traits{});
    case DType::kFp8E4M3:
      return fn(E4m3Traits{});
    case DType::kFp8E5M2:
      return fn(E5m2Traits{});
    default:
      return;  // callers validate the dtype; an invalid one does nothing
  }
}

// ---- Narrow floats, block by block: widen to float (narrow_convert.h), operate, round back. ----
// The element path converts each value with branch-free bit arithmetic that vectorizes poorly (half 0.5 GB/s, fp8
// 0.25 GB/s on the 2-core host); whole blocks convert with F16C, shifts or a table instead. Every step still rounds
// where the element path does (a pre-multiplied input before the sum, an average's sum before the division), so
// the results are the same bits. Max and min keep the element path: they return one operand's own code.

constexpr size_t kNarrowBlock = 512;

struct NarrowScalars {
  float scalar = 1;
  float divisor = 1;
};

NarrowScalars narrowScalars(const ReduceOp& op) {
  NarrowScalars s;
  unsigned char code[2] = {0, 0};
  std::memcpy(code, &op.scalar, dtypeSize(op.dtype));  // low bytes on a little-endian host
  widenBlock(op.dtype, &s.scalar, code, 1);
  s.divisor = static_cast<float>(op.nranks < 1 ? 1 : op.nranks);
  return s;
}

// x = round(x) to the narrow type and back, in place.
void roundTrip(DType t, float* x, size_t m) {
  unsigned char tmp[kNarrowBlock * 2];
  narrowBlock(t, tmp, x, m);
  widenBlock(t, x, tmp, m);
}

void preMul(DType t, float* x, size_t m, float scalar) {
  for (size_t j = 0; j < m; ++j) x[j] *= scalar;
  roundTrip(t, x, m);
}

void postDiv(DType t, float* x, size_t m, float divisor) {
  roundTrip(t, x, m);
  for (size_t j = 0; j < m; ++j) x[j] /= divisor;
}

bool narrowBlockOp(const ReduceOp& op) {
  return isNarrowFloatType(op.dtype) && op.kind != OpKind::kMax && op.kind != OpKind::kMin;
}

void narrowReduce(const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post) {
  const DType t = op.dtype;
  const size_t es = dtypeSize(t);
  const NarrowScalars s = narrowScalars(op);
  const bool div = wantsPost(op, post);
  float a[kNarrowBlock], b[kNarrowBlock];
  for (size_t i = 0; i < n; i += kNarrowBlock) {
    const size_t m = std::min(kNarrowBlock, n - i);
    // Both operands are read before the block is written: dst may be peer or local.
    widenBlock(t, a, static_cast<const unsigned char*>(peer) + i * es, m);
    widenBlock(t, b, static_cast<const unsigned char*>(local) + i * es, m);
    if (op.kind == OpKind::kPreMulSum) preMul(t, b, m, s.scalar);
    if (op.kind == OpKind::kProd) {
      for (size_t j = 0; j < m; ++j) a[j] *= b[j];
    } else {
      for (size_t j = 0; j < m; ++j) a[j] += b[j];
    }
    if (div) postDiv(t, a, m, s.divisor);
    narrowBlock(t, static_cast<unsigned char*>(dst) + i * es, a, m);
  }
}

void narrowUnary(const ReduceOp& op, void* dst, const void* src, size_t n, bool pre, bool div) {
  const DType t = op.dtype;
  const size_t es = dtypeSize(t);
  const NarrowScalars s = narrowScalars(op);
  float a[kNarrowBlock];
  for (size_t i = 0; i < n; i += kNarrowBlock) {
    const size_t m = std::min(kNarrowBlock, n - i);
    widenBlock(t, a, static_cast<const unsigned char*>(src) + i * es, m);
    if (pre) preMul(t, a, m, s.scalar);
    if (div) postDiv(t, a, m, s.divisor);
    narrowBlock(t, static_cast<unsigned char*>(dst) + i * es, a, m);
  }
}

// Every source of a block widened and combined in float, rounded once (reduce.h's reduceMany).
void narrowMany(const ReduceOp* ops, void* dst, const char* const* srcs, size_t at, int nsrc, size_t n, bool post) {
  const DType t = ops[0].dtype;
  const size_t es = dtypeSize(t);
  const bool pre = ops[0].kind == OpKind::kPreMulSum;
  const bool prod = ops[0].kind == OpKind::kProd;
  const bool div = wantsPost(ops[0], post);
  const float divisor = narrowScalars(ops[0]).divisor;
  float a[kNarrowBlock], b[kNarrowBlock];
  for (size_t i = 0; i < n; i += kNarrowBlock) {
    const size_t m = std::min(kNarrowBlock, n - i);
    for (int p = 0; p < nsrc; ++p) {
      float* x = p == 0 ? a : b;
      widenBlock(t, x, reinterpret_cast<const unsigned char*>(srcs[p] + at) + i * es, m);
      if (pre) preMul(t, x, m, narrowScalars(ops[p]).scalar);
      if (p == 0) continue;
      if (prod) {
        for (size_t j = 0; j < m; ++j) a[j] *= b[j];
      } else {
        for (size_t j = 0; j < m; ++j) a[j] += b[j];
      }
    }
    if (div) postDiv(t, a, m, divisor);  // the sum rounded to the type, then divided (reduce.h)
    narrowBlock(t, static_cast<unsigned char*>(dst) + i * es, a, m);
  }
}

}  // namespace

void reduceInto(const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post) {
  if (n == 0) return;
  if (narrowBlockOp(op)) return narrowReduce(op, dst, peer, local, n, post);
  dispatchType(op.dtype, [&](auto tr) { reduceT<decltype(tr)>(op, dst, peer, local, n, post); });
}

void copyLocal(const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
  if (n == 0) return;
  const bool pre = op.kind == OpKind::kPreMulSum;
  if (isNarrowFloatType(op.dtype) && (pre || wantsPost(op, post))) {
    return narrowUnary(op, dst, src, n, pre, !pre && wantsPost(op, post));
  }
  dispatchType(op.dtype, [&](auto tr) { copyLocalT<decltype(tr)>(op, dst, src, n, post); });
}

// Up to this many bytes per source, reduceMany runs the kernels' one-pass loop (ctaReduceMany, the same bits as
// the chain below) on this thread: what is left of a small call's reduction is then dispatch, done once.
constexpr size_t kOnePassBytes = 256;

void reduceMany(const ReduceOp* ops, void* dst, const char* const* srcs, size_t at, int nsrc, size_t n, bool post) {
  if (n == 0 || nsrc < 1) return;
  if (n * dtypeSize(ops[0].dtype) <= kOnePassBytes) return ctaReduceMany(HostCta{}, ops, dst, srcs, at, nsrc, n, post);
  if (narrowBlockOp(ops[0])) return narrowMany(ops, dst, srcs, at, nsrc, n, post);
  // In the type each step rounds where a one-pass loop would, so the chain is the definition; the tile the direct
  // path reduces stays in cache, so the passes cost little.
  copyLocal(ops[0], dst, srcs[0] + at, n, post && nsrc == 1);
  for (int p = 1; p < nsrc; ++p) reduceInto(ops[p], dst, dst, srcs[p] + at, n, post && p == nsrc - 1);
}

void copyPost(const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
  if (n == 0) return;
  if (isNarrowFloatType(op.dtype) && wantsPost(op, post)) return narrowUnary(op, dst, src, n, false, true);
  dispatchType(op.dtype, [&](auto tr) { copyPostT<decltype(tr)>(op, dst, src, n, post); });
}

void streamCopy(void* dstv, const void* srcv, size_t bytes) {
  auto* dst = static_cast<char*>(dstv);
  const auto* src = static_cast<const char*>(srcv);
#if defined(__x86_64__)
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void streamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

namespace {

template <class F>
void throughTile(const ReduceOp& op, void* dst, size_t n, void* tile, F&& compute) {
  const size_t es = dtypeSize(op.dtype);
  const size_t per = kStreamTileBytes / es;  // whole elements: every element size divides the tile
  for (size_t i = 0; i < n; i += per) {
    const size_t len = std::min(per, n - i);
    compute(static_cast<char*>(tile), i * es, len);
    streamCopy(static_cast<char*>(dst) + i * es, tile, len * es);
  }
}

}  // namespace

void reduceIntoStreaming(const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post,
                         void* tile) {
  throughTile(op, dst, n, tile, [&](char* t, size_t at, size_t len) {
    reduceInto(op, t, static_cast<const char*>(peer) + at, static_cast<const char*>(local) + at, len, post);
  });
}

void copyLocalStreaming(const ReduceOp& op, void* dst, const void* src, size_t n, bool post, void* tile) {
  throughTile(op, dst, n, tile,
              [&](char* t, size_t at, size_t len) { copyLocal(op, t, static_cast<const char*>(src) + at, len, post); });
}

}  // namespace braid
