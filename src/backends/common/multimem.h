// Switch reductions (NVLS multicast) for the kernels: which datatype/op pairs a multicast load-reduce covers, and the
// CTA-strided loops over them. The hardware part is the CTA's (the concept of kernel_main.h): a GPU's DeviceCta
// issues multimem.ld_reduce / multimem.st (kernels/ptx.cuh); the emulator's EmuCta asks the (fake) driver which
// buffers a multicast address stands for and combines them in the order the driver gives, a seeded permutation, so
// no code can come to rely on rank order.
//
// A multicast address reads as the reduction of every bound buffer's value at that offset, and a store to it lands
// in every bound buffer. The loads work on words: 32-bit (f32, 32-bit integers, pairs of f16/bf16) or 64-bit (f64,
// 64-bit integers), since the hardware has no 16-bit float form; f16/bf16 sums accumulate in f32 (.acc::f32) and
// round once, as NCCL's NVLS kernels do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/backends/common/reduce_copy.h"
#include "src/backends/common/reduce_elem.h"
#include "src/common/coll_types.h"
#include "src/common/dtype.h"
#include "src/common/host_device.h"

namespace braid {

// One multicast load-reduce form.
enum class McOp : uint8_t {
  kNone,
  kAddF32,
  kAddF64,
  kAddU32,  // also int32: two's complement sums are the same bits
  kAddU64,  // also int64
  kMinU32,
  kMaxU32,
  kMinS32,
  kMaxS32,
  kMinU64,
  kMaxU64,
  kMinS64,
  kMaxS64,
  kAddF16x2,
  kMinF16x2,
  kMaxF16x2,
  kAddBf16x2,
  kMinBf16x2,
  kMaxBf16x2,
  kAddE4m3x4,  // four fp8 sums accumulated in f16 (.acc::f16): the device API's building blocks only (mcOpFor never)
  kAddE5m2x4,
};

// The form that reduces `dtype` under `kind`, or kNone. NCCL's rule (ncclNvlsSupported): sums over 32/64-bit
// integers, f16, bf16, f32 and f64; min/max over 32/64-bit integers, f16 and bf16 (not f32/f64: the switch has no
// float min/max at those widths); nothing for 8-bit types or products. Avg and PreMulSum are sums here: the caller
// divides afterwards or scaled the inputs before.
BRAID_HOST_DEVICE inline McOp mcOpFor(DType dtype, OpKind kind) {
  const bool sum = kind == OpKind::kSum || kind == OpKind::kAvg || kind == OpKind::kPreMulSum;
  const bool mn = kind == OpKind::kMin, mx = kind == OpKind::kMax;
  switch (dtype) {
    case DType::kFloat32:
      return sum ? McOp::kAddF32 : McOp::kNone;
    case DType::kFloat64:
      return sum ? McOp::kAddF64 : McOp::kNone;
    case DType::kInt32:
      return sum ? McOp::kAddU32 : mn ? McOp::kMinS32 : mx ? McOp::kMaxS32 : McOp::kNone;
    case DType::kUint32:
      return sum ? McOp::kAddU32 : mn ? McOp::kMinU32 : mx ? McOp::kMaxU32 : McOp::kNone;
    case DType::kInt64:
      return sum ? McOp::kAddU64 : mn ? McOp::kMinS64 : mx ? McOp::kMaxS64 : McOp::kNone;
    case DType::kUint64:
      return sum ? McOp::kAddU64 : mn ? McOp::kMinU64 : mx ? McOp::kMaxU64 : McOp::kNone;
    case DType::kFloat16:
      return sum ? McOp::kAddF16x2 : mn ? McOp::kMinF16x2 : mx ? McOp::kMaxF16x2 : McOp::kNone;
    case DType::kBfloat16:
      return sum ? McOp::kAddBf16x2 : mn ? McOp::kMinBf16x2 : mx ? McOp::kMaxBf16x2 : McOp::kNone;
    default:
      return McOp::kNone;
  }
}

// Bytes of one load-reduce word of the form.
BRAID_HOST_DEVICE constexpr size_t mcWordBytes(McOp op) {
  return op == McOp::kAddF64 || op == McOp::kAddU64 || op == McOp::kMinU64 || op == McOp::kMaxU64 ||
                 op == McOp::kMinS64 || op == McOp::kMaxS64
             ? 8
             : 4;
}

namespace mc_detail {
using namespace reduce_elem;

enum class Fold { kAdd, kMin, kMax };

// Element `lane` of a word (lanes of sizeof(S) bytes, little-endian).
template <class S>
inline S laneOf(uint64_t word, int lane) {
  S v;
  const uint64_t shifted = word >> (8 * sizeof(S) * static_cast<unsigned>(lane));
  memcpy(&v, &shifted, sizeof(S));
  return v;
}

// The k words' lanes combined in order, in Tr's arithmetic (reduce_elem.h: the same element rules, NaNs included,
// as every other reduction of braid's), packed back into a word.
template <class Tr, int kLanes>
inline uint64_t fold(const uint64_t* words, int k, Fold how) {
  using S = typename Tr::S;
  uint64_t out = 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    S acc = laneOf<S>(words[0], lane);
    for (int i = 1; i < k; ++i) {
      const S v = laneOf<S>(words[i], lane);
      acc = how == Fold::kAdd ? Tr::add(acc, v) : how == Fold::kMin ? Tr::min(acc, v) : Tr::max(acc, v);
    }
    uint64_t bits = 0;
    memcpy(&bits, &acc, sizeof(S));
    out |= bits << (8 * sizeof(S) * static_cast<unsigned>(lane));
  }
  return out;
}

// A pair of f16/bf16 sums accumulated in f32 and rounded once (.acc::f32), unlike Tr::add, which rounds each step.
template <float (*kToF)(uint16_t), uint16_t (*kFromF)(float)>
inline uint64_t foldPairInF32(const uint64_t* words, int k) {
  uint64_t out = 0;
  for (int lane = 0; lane < 2; ++lane) {
    float acc = kToF(laneOf<uint16_t>(words[0], lane));
    for (int i = 1; i < k; ++i) acc = fpAdd(acc, kToF(laneOf<uint16_t>(words[i], lane)));
    out |= static_cast<uint64_t>(kFromF(acc)) << (16 * lane);
  }
  return out;
}
// Four fp8 sums accumulated in f16 (.acc::f16: each addition rounded to f16), converted back (saturating).
template <float (*kToF)(uint8_t), uint8_t (*kFromF)(float)>
inline uint64_t foldQuadInF16(const uint64_t* words, int k) {
  uint64_t out = 0;
  for (int lane = 0; lane < 4; ++lane) {
    uint16_t acc = floatToHalf(kToF(laneOf<uint8_t>(words[0], lane)));
    for (int i = 1; i < k; ++i) acc = floatToHalf(fpAdd(halfToFloat(acc), kToF(laneOf<uint8_t>(words[i], lane))));
    out |= static_cast<uint64_t>(kFromF(halfToFloat(acc))) << (8 * lane);
  }
  return out;
}
}  // namespace mc_detail

// A multicast load-reduce over `k` values of one word, in the given order: what the switch returns (the emulator's
// switch; host only).
inline uint64_t mcCombine(McOp op, const uint64_t* words, int k) {
  using namespace mc_detail;
  switch (op) {
    case McOp::kAddF32:
      return fold<FloatTraits<float>, 1>(words, k, Fold::kAdd);
    case McOp::kAddF64:
      return fold<FloatTraits<double>, 1>(words, k, Fold::kAdd);
    case McOp::kAddU32:
      return fold<IntTraits<uint32_t>, 1>(words, k, Fold::kAdd);
    case McOp::kAddU64:
      return fold<IntTraits<uint64_t>, 1>(words, k, Fold::kAdd);
    case McOp::kMinU32:
      return fold<IntTraits<uint32_t>, 1>(words, k, Fold::kMin);
    case McOp::kMaxU32:
      return fold<IntTraits<uint32_t>, 1>(words, k, Fold::kMax);
    case McOp::kMinS32:
      return fold<IntTraits<int32_t>, 1>(words, k, Fold::kMin);
    case McOp::kMaxS32:
      return fold<IntTraits<int32_t>, 1>(words, k, Fold::kMax);
    case McOp::kMinU64:
      return fold<IntTraits<uint64_t>, 1>(words, k, Fold::kMin);
    case McOp::kMaxU64:
      return fold<IntTraits<uint64_t>, 1>(words, k, Fold::kMax);
    case McOp::kMinS64:
      return fold<IntTraits<int64_t>, 1>(words, k, Fold::kMin);
    case McOp::kMaxS64:
      return fold<IntTraits<int64_t>, 1>(words, k, Fold::kMax);
    case McOp::kAddF16x2:
      return foldPairInF32<halfToFloat, floatToHalf>(words, k);
    case McOp::kMinF16x2:
      return fold<HalfTraits, 2>(words, k, Fold::kMin);
    case McOp::kMaxF16x2:
      return fold<HalfTraits, 2>(words, k, Fold::kMax);
    case McOp::kAddBf16x2:
      return foldPairInF32<bf16ToFloat, floatToBf16>(words, k);
    case McOp::kMinBf16x2:
      return fold<Bf16Traits, 2>(words, k, Fold::kMin);
    case McOp::kMaxBf16x2:
      return fold<Bf16Traits, 2>(words, k, Fold::kMax);
    case McOp::kAddE4m3x4:
      return foldQuadInF16<fp8e4m3ToFloat, floatToFp8e4m3>(words, k);
    case McOp::kAddE5m2x4:
      return foldQuadInF16<fp8e5m2ToFloat, floatToFp8e5m2>(words, k);
    default:
      return 0;  // kNone: never built into work (mcOpFor)
  }
}

// dst[i] = the switch's reduction of element i at multicast address mc, for i < n, under op (its dtype and kind:
// mcOpFor must not be kNone); with post, an avg is divided afterwards. mc must be word-aligned; a pair's second
// half past n is read (the bound buffers must hold it) and not written.
template <class Cta>
BRAID_HOST_DEVICE void ctaMultimemReduce(const Cta& cta, const ReduceOp& op, void* dst, const void* mc, size_t n,
                                         bool post) {
  const McOp form = mcOpFor(op.dtype, op.kind);
  const size_t es = dtypeSize(op.dtype);
  const size_t wb = mcWordBytes(form);
  const size_t per = wb / es;  // elements per word: 1, or 2 for f16/bf16 pairs
  const size_t words = (n + per - 1) / per;
  const auto view = cta.mcView(mc, words * wb);
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t w = static_cast<size_t>(cta.tid()); w < words; w += static_cast<size_t>(cta.nthreads())) {
    const uint64_t v = cta.mcLoadReduce(view, w * wb, form);
    const size_t take = n - w * per < per ? n - w * per : per;
    memcpy(out + w * wb, &v, take * es);  // little-endian: the low bytes are the first element
  }
  if (post && op.kind == OpKind::kAvg && op.nranks > 1) {
    cta.sync();  // the words were split among threads by pairs; the division goes element by element
    ctaCopyLocal(cta, op, dst, dst, n, true);
  }
}

// Stores `bytes` from src (this GPU's memory) to every buffer bound behind multicast address mc, in words of 8
// bytes where both are aligned so, else 4; bytes past the end up to the next word boundary are read from src and
// written too (the caller's regions leave room for that).
template <class Cta>
BRAID_HOST_DEVICE void ctaMultimemStore(const Cta& cta, void* mc, const void* src, size_t bytes) {
  const bool eight = ((reinterpret_cast<uintptr_t>(mc) | reinterpret_cast<uintptr_t>(src)) & 7) == 0;
  const size_t wb = eight ? 8 : 4;
  const size_t words = (bytes + wb - 1) / wb;
  const auto view = cta.mcView(mc, words * wb);
  const auto* in = static_cast<const unsigned char*>(src);
  for (size_t w = static_cast<size_t>(cta.tid()); w < words; w += static_cast<size_t>(cta.nthreads())) {
    uint64_t v = 0;
    memcpy(&v, in + w * wb, wb);
    cta.mcStore(view, w * wb, v, wb);
  }
}

}  // namespace braid
