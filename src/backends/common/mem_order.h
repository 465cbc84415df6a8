// The only place where memory another agent (thread, process, GPU, NIC proxy) reads or writes is accessed with an
// ordering. Every access names its scope: what it synchronises with.
//   kCta  the threads of one CTA (a host thread: itself)
//   kGpu  every thread of one GPU
//   kSys  every agent of the system: other GPUs, the host's threads and processes, a network proxy
// On the host the scope changes nothing (x86 and Arm host threads are one coherence domain); on the device it
// selects the PTX scope (.cta/.gpu/.sys). Every access braid makes today is kSys, the widest: right whichever agent
// is on the other side (a peer GPU, the host, a proxy), at some cost on a GPU. Narrowing one is an optimisation that
// needs a scope checker in the CTA emulator first (not built: with kSys everywhere it would have nothing to check).
//
// Host: GCC/clang __atomic builtins, always, even where CUDA's headers exist, so every host build behaves the same
// and ThreadSanitizer sees each operation. Device: cuda::atomic_ref of the matching thread scope.
// Words are plain integers in memory (no std::atomic, no volatile): the same struct is written by the host, by a
// kernel and across processes, so its layout is what both compilers see.
#pragma once

#include <cstdint>

#include "src/common/host_device.h"

#if defined(__CUDA_ARCH__)
#include <cuda/atomic>
#endif

namespace braid {

enum class Scope : uint8_t { kCta, kGpu, kSys };

#if defined(__CUDA_ARCH__)
namespace mem_detail {
template <Scope S>
struct CudaScope;
template <>
struct CudaScope<Scope::kCta> {
  static constexpr cuda::thread_scope kValue = cuda::thread_scope_block;
};
template <>
struct CudaScope<Scope::kGpu> {
  static constexpr cuda::thread_scope kValue = cuda::thread_scope_device;
};
template <>
struct CudaScope<Scope::kSys> {
  static constexpr cuda::thread_scope kValue = cuda::thread_scope_system;
};
template <Scope S, class T>
__device__ __forceinline__ cuda::atomic_ref<T, CudaScope<S>::kValue> ref(const T* p) {
  return cuda::atomic_ref<T, CudaScope<S>::kValue>(*const_cast<T*>(p));
}
}  // namespace mem_detail
#endif

// Acquire load: what the writer stored before its release is visible after this returns.
template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE T loadAcquire(const T* p) {
#if defined(__CUDA_ARCH__)
  return mem_detail::ref<S>(p).load(cuda::std::memory_order_acquire);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// Relaxed load: one whole earlier store to *p, never a mix of two; no order with other memory.
template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE T loadRelaxed(const T* p) {
#if defined(__CUDA_ARCH__)
  return mem_detail::ref<S>(p).load(cuda::std::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

// Release store: everything this thread wrote before is visible to whoever acquires the value.
template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE void storeRelease(T* p, T v) {
#if defined(__CUDA_ARCH__)
  mem_detail::ref<S>(p).store(v, cuda::std::memory_order_release);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE void storeRelaxed(T* p, T v) {
#if defined(__CUDA_ARCH__)
  mem_detail::ref<S>(p).store(v, cuda::std::memory_order_relaxed);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

// Atomic add with release order; returns the old value.
template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE T fetchAddRelease(T* p, T v) {
#if defined(__CUDA_ARCH__)
  return mem_detail::ref<S>(p).fetch_add(v, cuda::std::memory_order_release);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

// A full acquire-release fence. Host code synchronises through release/acquire on the flag word instead (TSan does
// not model fences), so on the host this only keeps the compiler from moving accesses across it.
template <Scope S = Scope::kSys>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE void fenceAcqRel() {
#if defined(__CUDA_ARCH__)
  cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, mem_detail::CudaScope<S>::kValue);
#else
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

// Sequentially consistent store and load: for a publisher and a sleeper that each store one word, then load the
// other's (a futex's waiter count), where release/acquire alone would let both miss the other's store. On x86 the
// store is one locked exchange, cheaper than a separate fence.
template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE void storeSeqCst(T* p, T v) {
#if defined(__CUDA_ARCH__)
  mem_detail::ref<S>(p).store(v, cuda::std::memory_order_seq_cst);
#else
  __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
#endif
}

template <Scope S = Scope::kSys, class T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE T loadSeqCst(const T* p) {
#if defined(__CUDA_ARCH__)
  return mem_detail::ref<S>(p).load(cuda::std::memory_order_seq_cst);
#else
  return __atomic_load_n(p, __ATOMIC_SEQ_CST);
#endif
}

}  // namespace braid
