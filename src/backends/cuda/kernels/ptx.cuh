// Every inline-PTX helper of the kernels, in one file (nvcc only). The shared layer (src/backends/common) stays
// free of inline assembly; what it needs from the hardware comes through the CTA (device_cta.cuh).
#pragma once

#include <cstdint>

#include "src/backends/common/multimem.h"

namespace braid {
namespace ptx {

// The GPU's global timer in nanoseconds (%globaltimer: a 64-bit nanosecond counter, updated every microsecond or
// so). Deadlines only need it to be monotonic and in nanoseconds.
__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// multimem.ld_reduce at multicast address p (relaxed, system scope: the bound buffers are other GPUs' memory) in
// the form `op`; the word's bits come back in the low bytes.
__device__ __forceinline__ uint64_t multimemLoadReduce(const void* p, McOp op) {
  uint32_t r = 0;
  uint64_t q = 0;
  float f = 0;
  double d = 0;
#define BRAID_MM32(form) \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." form " %0, [%1];" : "=r"(r) : "l"(p) : "memory")
#define BRAID_MM64(form) \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." form " %0, [%1];" : "=l"(q) : "l"(p) : "memory")
  switch (op) {
    case McOp::kAddF32:
      asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];" : "=f"(f) : "l"(p) : "memory");
      return __float_as_uint(f);
    case McOp::kAddF64:
      asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f64 %0, [%1];" : "=d"(d) : "l"(p) : "memory");
      return static_cast<uint64_t>(__double_as_longlong(d));
    case McOp::kAddU32:
      BRAID_MM32("add.u32");
      return r;
    case McOp::kMinU32:
      BRAID_MM32("min.u32");
      return r;
    case McOp::kMaxU32:
      BRAID_MM32("max.u32");
      return r;
    case McOp::kMinS32:
      BRAID_MM32("min.s32");
      return r;
    case McOp::kMaxS32:
      BRAID_MM32("max.s32");
      return r;
    case McOp::kAddU64:
      BRAID_MM64("add.u64");
      return q;
    case McOp::kMinU64:
      BRAID_MM64("min.u64");
      return q;
    case McOp::kMaxU64:
      BRAID_MM64("max.u64");
      return q;
    case McOp::kMinS64:
      BRAID_MM64("min.s64");
      return q;
    case McOp::kMaxS64:
      BRAID_MM64("max.s64");
      return q;
    case McOp::kAddF16x2:
      BRAID_MM32("add.acc::f32.f16x2");
      return r;
    case McOp::kMinF16x2:
      BRAID_MM32("min.f16x2");
      return r;
    case McOp::kMaxF16x2:
      BRAID_MM32("max.f16x2");
      return r;
    case McOp::kAddBf16x2:
      BRAID_MM32("add.acc::f32.bf16x2");
      return r;
    case McOp::kMinBf16x2:
      BRAID_MM32("min.bf16x2");
      return r;
    case McOp::kMaxBf16x2:
      BRAID_MM32("max.bf16x2");
      return r;
    default:
      __trap();  // the host never builds work with a form it did not check (mcOpFor)
  }
#undef BRAID_MM32
#undef BRAID_MM64
  return 0;
}

// Orders this thread's accesses through multicast addresses against those through unicast ones (they are
// different proxies of the same memory; NCCL's NVLS kernels fence the same way).
__device__ __forceinline__ void fenceProxyAlias() {
  asm volatile("fence.proxy.alias;" ::: "memory");
}

// multimem.st of a 4- or 8-byte word to every buffer bound behind multicast address p.
__device__ __forceinline__ void multimemStore(void* p, uint64_t v, size_t bytes) {
  if (bytes == 8) {
    asm volatile("multimem.st.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  } else {
    asm volatile("multimem.st.relaxed.sys.global.b32 [%0], %1;" ::"l"(p), "r"(static_cast<uint32_t>(v)) : "memory");
  }
}

}  // namespace ptx
}  // namespace braid
