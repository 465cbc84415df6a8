/* braid's nccl_device/portable.h: the few machine operations the device half of the device API is written over.
 *
 * The device half (coop.h, ptr.h, the pointer accessors of core.h, lsa_barrier.h) is one source for two compilers:
 *   - nvcc (__CUDACC__): CUDA's intrinsics and libcu++'s cuda::atomic_ref at system scope;
 *   - a host compiler with BRAID_DEVICE_EMULATION defined: braid's CTA emulator, which runs a kernel's threads as
 *     host threads (tests/devapi/device_shim.h provides threadIdx, __syncthreads, __syncwarp, clock64 and
 *     cuda::memory_order, and must be included first). That is how braid's CI runs device-API kernels without a
 *     GPU; a program has no reason to define it.
 * Without either, only the host half of the headers is compiled (C, or C++ host code). */
#ifndef NCCL_DEVICE_PORTABLE_H_
#define NCCL_DEVICE_PORTABLE_H_
#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "../nccl.h"

#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif

#if defined(__CUDACC__)
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ inline
#define NCCL_DEVICE_INLINE __device__ inline
#define NCCL_HOST_ONLY_ __host__
#elif defined(__cplusplus)
#define NCCL_HOST_DEVICE_INLINE inline
#define NCCL_DEVICE_INLINE inline
#define NCCL_HOST_ONLY_
#else
#define NCCL_HOST_DEVICE_INLINE static inline
#define NCCL_DEVICE_INLINE static inline
#define NCCL_HOST_ONLY_
#endif

#if defined(__CUDACC__) || defined(BRAID_DEVICE_EMULATION)
#define NCCL_DEVICE_HALF_ 1
#else
#define NCCL_DEVICE_HALF_ 0
#endif

#if NCCL_DEVICE_HALF_
#if defined(__CUDACC__)
#include <cuda/atomic>
#elif !defined(BRAID_DEVICE_SHIM_H_)
#error "BRAID_DEVICE_EMULATION needs braid's emulator shim (tests/devapi/device_shim.h) included first"
#endif

namespace nccl_braid_ {

/* A load never has release semantics and a store never acquire ones: each takes the half of `o` that applies. */
NCCL_HOST_DEVICE_INLINE cuda::memory_order loadOrder(cuda::memory_order o) {
  if (o == cuda::memory_order_seq_cst) return o;
  return o == cuda::memory_order_relaxed || o == cuda::memory_order_release ? cuda::memory_order_relaxed
                                                                            : cuda::memory_order_acquire;
}
NCCL_HOST_DEVICE_INLINE cuda::memory_order storeOrder(cuda::memory_order o) {
  if (o == cuda::memory_order_seq_cst) return o;
  return o == cuda::memory_order_relaxed || o == cuda::memory_order_acquire || o == cuda::memory_order_consume
             ? cuda::memory_order_relaxed
             : cuda::memory_order_release;
}

#if defined(__CUDACC__)
/* Words another GPU (or the CPU) writes: system scope. */
NCCL_DEVICE_INLINE uint32_t atomicLoad(const uint32_t* p, cuda::memory_order o) {
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*const_cast<uint32_t*>(p)).load(loadOrder(o));
}
NCCL_DEVICE_INLINE void atomicStore(uint32_t* p, uint32_t v, cuda::memory_order o) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).store(v, storeOrder(o));
}
NCCL_DEVICE_INLINE uint64_t atomicLoad64(const uint64_t* p, cuda::memory_order o) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*const_cast<uint64_t*>(p)).load(loadOrder(o));
}
NCCL_DEVICE_INLINE void atomicStore64(uint64_t* p, uint64_t v, cuda::memory_order o) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, storeOrder(o));
}
NCCL_DEVICE_INLINE uint64_t atomicAdd64(uint64_t* p, uint64_t v, cuda::memory_order o) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).fetch_add(v, o);
}
NCCL_DEVICE_INLINE uint64_t cycles() {
  return static_cast<uint64_t>(clock64());
}
NCCL_DEVICE_INLINE int lane() {
  return static_cast<int>(threadIdx.x % 32u);
}
NCCL_DEVICE_INLINE uint32_t lanemaskLt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}
NCCL_DEVICE_INLINE void backOff() {
  __nanosleep(100);
}
/* NVLS multicast words (sm_90): a load-reduce at multicast address p returns the sum of every bound buffer's value
 * there; a store writes every bound buffer's. Relaxed, system scope: LSA barriers order them. 64-bit integer sums
 * use the unsigned form, whose two's complement bits are the signed sum's. */
/* Below sm_90 (a fat binary's older targets) there is no multimem: a launch that reaches one traps. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define NCCL_BRAID_MULTIMEM_(asmStatement) __trap()
#else
#define NCCL_BRAID_MULTIMEM_(asmStatement) asmStatement
#endif
NCCL_DEVICE_INLINE void trap(const char*) {
  __trap();
}
NCCL_DEVICE_INLINE float mcLoadSum(const float* p) {
  float v = 0;
  NCCL_BRAID_MULTIMEM_(asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];"
                                    : "=f"(v)
                                    : "l"(p)
                                    : "memory"));
  return v;
}
NCCL_DEVICE_INLINE double mcLoadSum(const double* p) {
  double v = 0;
  NCCL_BRAID_MULTIMEM_(asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f64 %0, [%1];"
                                    : "=d"(v)
                                    : "l"(p)
                                    : "memory"));
  return v;
}
NCCL_DEVICE_INLINE uint32_t mcLoadSum(const uint32_t* p) {
  uint32_t v = 0;
  NCCL_BRAID_MULTIMEM_(asm volatile("multimem.ld_reduce.relaxed.sys.global.add.u32 %0, [%1];"
                                    : "=r"(v)
                                    : "l"(p)
                                    : "memory"));
  return v;
}
NCCL_DEVICE_INLINE int32_t mcLoadSum(const int32_t* p) {
  return static_cast<int32_t>(mcLoadSum(reinterpret_cast<const uint32_t*>(p)));
}
NCCL_DEVICE_INLINE uint64_t mcLoadSum(const uint64_t* p) {
  uint64_t v = 0;
  NCCL_BRAID_MULTIMEM_(asm volatile("multimem.ld_reduce.relaxed.sys.global.add.u64 %0, [%1];"
                                    : "=l"(v)
                                    : "l"(p)
                                    : "memory"));
  return v;
}
NCCL_DEVICE_INLINE int64_t mcLoadSum(const int64_t* p) {
  return static_cast<int64_t>(mcLoadSum(reinterpret_cast<const uint64_t*>(p)));
}
/* The switch's sum of a pair of f16 (bf16 = false) or bf16 values at 4-byte-aligned multicast address p, accumulated
 * in f32 and rounded once; the pair's bits, first element in the low half. */
NCCL_DEVICE_INLINE uint32_t mcLoadSumPair(const void* p, bool bf16) {
  uint32_t v = 0;
  if (bf16) {
    NCCL_BRAID_MULTIMEM_(asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.bf16x2 %0, [%1];"
                                      : "=r"(v)
                                      : "l"(p)
                                      : "memory"));
  } else {
    NCCL_BRAID_MULTIMEM_(asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.f16x2 %0, [%1];"
                                      : "=r"(v)
                                      : "l"(p)
                                      : "memory"));
  }
  return v;
}
/* The switch's sums of four fp8 values (e4m3, or e5m2 = true) at 4-byte-aligned multicast address p, accumulated in
 * f16 (NCCL's form); the quad's bits, first element in the low byte. The PTX exists for sm_100a, sm_101a, sm_120a and
 * sm_121a (and the sm_100f / sm_101f families) only: built for any other target, a launch that reaches it traps. */
#if (defined(__CUDA_ARCH_SPECIFIC__) && (__CUDA_ARCH_SPECIFIC__ == 1000 || __CUDA_ARCH_SPECIFIC__ == 1010 ||   \
                                         __CUDA_ARCH_SPECIFIC__ == 1200 || __CUDA_ARCH_SPECIFIC__ == 1210)) || \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) &&                                                                 \
     (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000 || __CUDA_ARCH_FAMILY_SPECIFIC__ == 1010))
#define NCCL_BRAID_FP8_MULTIMEM_ 1
#else
#define NCCL_BRAID_FP8_MULTIMEM_ 0
#endif
NCCL_DEVICE_INLINE uint32_t mcLoadSumQuad(const void* p, bool e5m2) {
  uint32_t v = 0;
#if NCCL_BRAID_FP8_MULTIMEM_
  if (e5m2) {
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f16.e5m2x4 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  } else {
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f16.e4m3x4 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  }
#else
  (void)p;
  (void)e5m2;
  trap("ncclMultimem* (fp8): the switch's fp8 sums need a kernel built for sm_100a, sm_101a, sm_120a or sm_121a");
#endif
  return v;
}
#undef NCCL_BRAID_FP8_MULTIMEM_
NCCL_DEVICE_INLINE void mcStoreWord(void* p, uint64_t v, int bytes) {
  if (bytes == 8) {
    NCCL_BRAID_MULTIMEM_(asm volatile("multimem.st.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory"));
  } else {
    NCCL_BRAID_MULTIMEM_(
        asm volatile("multimem.st.relaxed.sys.global.b32 [%0], %1;" ::"l"(p), "r"(static_cast<uint32_t>(v))
                     : "memory"));
  }
}
/* A 32-bit multicast store in `o`'s store order (the LSA barrier's one-store arrival): release where `o` has it (a
 * sequentially consistent one is a full fence then a release store), else relaxed. */
/* Orders this thread's unicast and multicast accesses to the same memory (fence.proxy.alias). */
NCCL_DEVICE_INLINE void mcFence() {
  NCCL_BRAID_MULTIMEM_(asm volatile("fence.proxy.alias;" ::: "memory"));
}
NCCL_DEVICE_INLINE void mcStore32(uint32_t* p, uint32_t v, cuda::memory_order o) {
  const cuda::memory_order so = storeOrder(o);
  if (so == cuda::memory_order_relaxed) {
    NCCL_BRAID_MULTIMEM_(asm volatile("multimem.st.relaxed.sys.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory"));
    return;
  }
  if (so == cuda::memory_order_seq_cst) __threadfence_system();
  NCCL_BRAID_MULTIMEM_(asm volatile("multimem.st.release.sys.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory"));
}
#undef NCCL_BRAID_MULTIMEM_
#else
NCCL_DEVICE_INLINE int gccOrder_(cuda::memory_order o) {
  switch (o) {
    case cuda::memory_order_relaxed:
      return __ATOMIC_RELAXED;
    case cuda::memory_order_consume:
    case cuda::memory_order_acquire:
      return __ATOMIC_ACQUIRE;
    case cuda::memory_order_release:
      return __ATOMIC_RELEASE;
    case cuda::memory_order_acq_rel:
      return __ATOMIC_ACQ_REL;
    default:
      return __ATOMIC_SEQ_CST;
  }
}
NCCL_DEVICE_INLINE uint32_t atomicLoad(const uint32_t* p, cuda::memory_order o) {
  return __atomic_load_n(p, gccOrder_(loadOrder(o)));
}
NCCL_DEVICE_INLINE void atomicStore(uint32_t* p, uint32_t v, cuda::memory_order o) {
  __atomic_store_n(p, v, gccOrder_(storeOrder(o)));
}
NCCL_DEVICE_INLINE uint64_t atomicLoad64(const uint64_t* p, cuda::memory_order o) {
  return __atomic_load_n(p, gccOrder_(loadOrder(o)));
}
NCCL_DEVICE_INLINE void atomicStore64(uint64_t* p, uint64_t v, cuda::memory_order o) {
  __atomic_store_n(p, v, gccOrder_(storeOrder(o)));
}
NCCL_DEVICE_INLINE uint64_t atomicAdd64(uint64_t* p, uint64_t v, cuda::memory_order o) {
  return __atomic_fetch_add(p, v, gccOrder_(o));
}
/* On the emulator a "cycle" is a nanosecond of the host's monotonic clock. */
NCCL_DEVICE_INLINE uint64_t cycles() {
  return static_cast<uint64_t>(clock64());
}
NCCL_DEVICE_INLINE int lane() {
  return static_cast<int>(threadIdx.x % 32u);
}
NCCL_DEVICE_INLINE uint32_t lanemaskLt() {
  return (1u << lane()) - 1u;
}
NCCL_DEVICE_INLINE void backOff() {
  braid_emu::backOff();
}
/* The emulator asks the (fake) driver which buffers a multicast address stands for and sums them in the order the
 * driver gives (the switch's own, seeded), failing the launch where a GPU would fault. */
NCCL_DEVICE_INLINE float mcLoadSum(const float* p) {
  const uint64_t w = braid_emu::mcLoadSum(p, braid_emu::McSum::kF32);
  float v;
  __builtin_memcpy(&v, &w, sizeof(v));
  return v;
}
NCCL_DEVICE_INLINE double mcLoadSum(const double* p) {
  const uint64_t w = braid_emu::mcLoadSum(p, braid_emu::McSum::kF64);
  double v;
  __builtin_memcpy(&v, &w, sizeof(v));
  return v;
}
NCCL_DEVICE_INLINE uint32_t mcLoadSum(const uint32_t* p) {
  return static_cast<uint32_t>(braid_emu::mcLoadSum(p, braid_emu::McSum::kU32));
}
NCCL_DEVICE_INLINE int32_t mcLoadSum(const int32_t* p) {
  return static_cast<int32_t>(braid_emu::mcLoadSum(p, braid_emu::McSum::kU32));
}
NCCL_DEVICE_INLINE uint64_t mcLoadSum(const uint64_t* p) {
  return braid_emu::mcLoadSum(p, braid_emu::McSum::kU64);
}
NCCL_DEVICE_INLINE int64_t mcLoadSum(const int64_t* p) {
  return static_cast<int64_t>(braid_emu::mcLoadSum(p, braid_emu::McSum::kU64));
}
NCCL_DEVICE_INLINE uint32_t mcLoadSumPair(const void* p, bool bf16) {
  return static_cast<uint32_t>(braid_emu::mcLoadSum(p, bf16 ? braid_emu::McSum::kBf16x2 : braid_emu::McSum::kF16x2));
}
NCCL_DEVICE_INLINE uint32_t mcLoadSumQuad(const void* p, bool e5m2) {
  return static_cast<uint32_t>(braid_emu::mcLoadSum(p, e5m2 ? braid_emu::McSum::kE5m2x4 : braid_emu::McSum::kE4m3x4));
}
NCCL_DEVICE_INLINE void mcStoreWord(void* p, uint64_t v, int bytes) {
  braid_emu::mcStore(p, v, bytes);
}
/* The emulator stores to each bound buffer in `o`'s store order. */
/* Host threads see one proxy of memory: only the compiler is held back. */
NCCL_DEVICE_INLINE void mcFence() {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
NCCL_DEVICE_INLINE void mcStore32(uint32_t* p, uint32_t v, cuda::memory_order o) {
  braid_emu::mcStore(p, v, 4, gccOrder_(storeOrder(o)));
}
/* A kernel error the headers detect (a null multicast pointer): fails the launch, as __trap does on a GPU. */
NCCL_DEVICE_INLINE void trap(const char* why) {
  braid_emu::trap(why);
}
#endif

template <typename T>
T&& declval();

/* a is at or past b on a wrapping 32-bit counter. */
NCCL_HOST_DEVICE_INLINE bool reached(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) >= 0;
}

}  // namespace nccl_braid_
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_PORTABLE_H_ */
