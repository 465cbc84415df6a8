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
template <class T>
inline T pick(T a, T b, bool wantMin) {
  return wantMin ? (b < a ? b : a) : (a < b ? b : a);
}
}  // namespace mc_detail

// A multicast load-reduce over `k` values of one word, in the given order: what the switch returns (the emulator's
// switch; host only).
inline uint64_t mcCombine(McOp op, const uint64_t* words, int k) {
  using namespace mc_detail;
  auto f32 = [](uint64_t w) {
    float f;
    const uint32_t b = static_cast<uint32_t>(w);
    memcpy(&f, &b, 4);
    return f;
  };
  auto f64 = [](uint64_t w) {
    double d;
    memcpy(&d, &w, 8);
    return d;
  };
  switch (op) {
    case McOp::kAddF32: {
      float acc = f32(words[0]);
      for (int i = 1; i < k; ++i) acc = fpAdd(acc, f32(words[i]));
      uint32_t b;
      memcpy(&b, &acc, 4);
      return b;
    }
    case McOp::kAddF64: {
      double acc = f64(words[0]);
      for (int i = 1; i < k; ++i) acc = fpAdd(acc, f64(words[i]));
      uint64_t b;
      memcpy(&b, &acc, 8);
      return b;
    }
    case McOp::kAddU32: {
      uint32_t acc = 0;
      for (int i = 0; i < k; ++i) acc += static_cast<uint32_t>(words[i]);
      return acc;
    }
    case McOp::kAddU64: {
      uint64_t acc = 0;
      for (int i = 0; i < k; ++i) acc += words[i];
      return acc;
    }
    case McOp::kMinU32:
    case McOp::kMaxU32: {
      uint32_t acc = static_cast<uint32_t>(words[0]);
      for (int i = 1; i < k; ++i) acc = pick(acc, static_cast<uint32_t>(words[i]), op == McOp::kMinU32);
      return acc;
    }
    case McOp::kMinS32:
    case McOp::kMaxS32: {
      int32_t acc = static_cast<int32_t>(static_cast<uint32_t>(words[0]));
      for (int i = 1; i < k; ++i) {
        acc = pick(acc, static_cast<int32_t>(static_cast<uint32_t>(words[i])), op == McOp::kMinS32);
      }
      return static_cast<uint32_t>(acc);
    }
    case McOp::kMinU64:
    case McOp::kMaxU64: {
      uint64_t acc = words[0];
      for (int i = 1; i < k; ++i) acc = pick(acc, words[i], op == McOp::kMinU64);
      return acc;
    }
    case McOp::kMinS64:
    case McOp::kMaxS64: {
      int64_t acc = static_cast<int64_t>(words[0]);
      for (int i = 1; i < k; ++i) acc = pick(acc, static_cast<int64_t>(words[i]), op == McOp::kMinS64);
      return static_cast<uint64_t>(acc);
    }
    default: {
      // f16/bf16 pairs: each half on its own, in f32; sums round once at the end (.acc::f32).
      const bool bf = op == McOp::kAddBf16x2 || op == McOp::kMinBf16x2 || op == McOp::kMaxBf16x2;
      const bool add = op == McOp::kAddF16x2 || op == McOp::kAddBf16x2;
      const bool wantMin = op == McOp::kMinF16x2 || op == McOp::kMinBf16x2;
      uint32_t out = 0;
      for (int h = 0; h < 2; ++h) {
        auto get = [&](int i) {
          const auto bits = static_cast<uint16_t>(static_cast<uint32_t>(words[i]) >> (16 * h));
          return bf ? bf16ToFloat(bits) : halfToFloat(bits);
        };
        float acc = get(0);
        for (int i = 1; i < k; ++i) {
          const float v = get(i);
          acc = add ? fpAdd(acc, v) : (wantMin ? (v < acc || acc != acc ? v : acc) : (v > acc || acc != acc ? v : acc));
        }
        const uint16_t r = bf ? floatToBf16(acc) : floatToHalf(acc);
        out |= static_cast<uint32_t>(r) << (16 * h);
      }
      return out;
    }
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
