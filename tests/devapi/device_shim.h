// CUDA's kernel-side vocabulary on braid's CTA emulator (src/backends/cuda/emu/cta_emulator.h), so that a kernel
// written the way device-API users write them (__global__, threadIdx, __syncthreads, __syncwarp, clock64,
// cuda::memory_order) compiles with g++ and runs on host threads, one per simulated GPU thread, in CI. Include it
// before nccl_device.h (it defines BRAID_DEVICE_EMULATION, which turns on the headers' device half) and start
// kernels with braid_emu::launch.
//
// What it models: threadIdx/blockIdx/blockDim/gridDim in x; __syncthreads (the emulator's site-checked barrier),
// __syncthreads_or; warp barriers __syncwarp(mask) and __any_sync(mask, v) among exactly the lanes of the mask; named
// barriers (bar.sync id, n); __shfl_sync of 32-bit values (width 32); a CTA's stash (braid_emu::blockStash, for
// the headers' __shared__ needs); __activemask (every lane of the warp: the emulator has no divergence to report);
// clock64 in nanoseconds. Not modelled: __shared__ declarations in kernels, other shuffles, lockstep execution within a
// warp (the threads run independently, which is stricter: a kernel that relies on implicit warp synchrony fails or
// races here).
#pragma once

#define BRAID_DEVICE_SHIM_H_ 1
#ifndef BRAID_DEVICE_EMULATION
#define BRAID_DEVICE_EMULATION 1
#endif

#include <cstdint>
#include <functional>

#include "src/backends/cuda/emu/cta_emulator.h"
#include "src/common/dtype.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

// cuda_fp16.h's and cuda_bf16.h's element types, as far as device-API kernels and the headers use them: the bits,
// conversions to and from float (round to nearest even), and arithmetic through float, rounded once per operation.
struct __half {
  uint16_t __x;
};
typedef __half half;
struct __nv_bfloat16 {
  uint16_t __x;
};
inline float __half2float(__half h) {
  return braid::halfToFloat(h.__x);
}
inline __half __float2half_rn(float f) {
  return __half{braid::floatToHalf(f)};
}
inline __half __float2half(float f) {
  return __float2half_rn(f);
}
inline float __bfloat162float(__nv_bfloat16 h) {
  return braid::bf16ToFloat(h.__x);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{braid::floatToBf16(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return __float2bfloat16_rn(f);
}
inline __half operator+(__half a, __half b) {
  return __float2half_rn(__half2float(a) + __half2float(b));
}
inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}
// cuda_fp8.h's element types: the bits, explicit conversions from and to float (saturating to the finite range,
// as CUDA's constructors do).
struct __nv_fp8_e4m3 {
  uint8_t __x;
  __nv_fp8_e4m3() = default;
  explicit __nv_fp8_e4m3(float f) : __x(braid::floatToFp8e4m3(f)) {}
  explicit operator float() const { return braid::fp8e4m3ToFloat(__x); }
};
struct __nv_fp8_e5m2 {
  uint8_t __x;
  __nv_fp8_e5m2() = default;
  explicit __nv_fp8_e5m2(float f) : __x(braid::floatToFp8e5m2(f)) {}
  explicit operator float() const { return braid::fp8e5m2ToFloat(__x); }
};
inline bool operator==(__half a, __half b) {
  return __half2float(a) == __half2float(b);
}
inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __bfloat162float(a) == __bfloat162float(b);
}

namespace cuda {
enum memory_order {
  memory_order_relaxed,
  memory_order_consume,
  memory_order_acquire,
  memory_order_release,
  memory_order_acq_rel,
  memory_order_seq_cst
};
enum thread_scope { thread_scope_system, thread_scope_device, thread_scope_block, thread_scope_thread };
}  // namespace cuda

namespace braid_emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// The calling simulated thread's indices (only inside braid_emu::launch).
const Dim3& threadIdx_();
const Dim3& blockIdx_();
const Dim3& blockDim_();
const Dim3& gridDim_();
void syncThreads(const char* file, int line);
int syncThreadsOr(int v, const char* file, int line);
// Lanes of `mask` in the caller's warp wait for each other; true when v held on any of them.
bool warpBarrier(unsigned mask, bool v);
// bar.sync / bar.red.or on named barrier `id` (1..15) for `count` threads of the CTA.
void namedBarrier(int id, int count);
bool namedBarrierOr(int id, int count, bool v);
long long clockNs();
// __shfl_sync: lane srcLane's v, exchanged among the lanes of mask.
unsigned shfl(unsigned mask, unsigned v, int srcLane);
// `bytes` of memory shared by the calling thread's CTA for this launch (what a __shared__ array is on a GPU).
void* blockStash(size_t bytes);
// A polling loop's pause: the emulator's back-off (chaos, and the launch's failure and deadline checks).
void backOff();
// A multicast word (nccl_device/portable.h's mcLoadSum / mcStoreWord): the sum of every buffer bound behind p, in
// the (fake) driver's order, or a store to each of them; the launch fails where a GPU would fault (cfg.multicast
// unset, p outside a multicast mapping of the launch's device, a misaligned word).
// pairs: summed in f32, rounded once (.acc::f32); fp8 quads: summed in f16 (.acc::f16)
enum class McSum { kF32, kF64, kU32, kU64, kF16x2, kBf16x2, kE4m3x4, kE5m2x4 };
uint64_t mcLoadSum(const void* p, McSum form);
// order: a GCC __ATOMIC_ order for the store to each bound buffer.
void mcStore(void* p, uint64_t word, int bytes, int order = __ATOMIC_RELAXED);
// __trap: fails the launch with `why` (what the headers detected).
[[noreturn]] void trap(const char* why);

// Runs kernel() on cfg.grid CTAs of cfg.block threads each, blocking until every thread returned; an error names
// what failed (a divergent barrier, a deadlock past cfg.deadlineSec, an exception).
[[nodiscard]] braid::Status launch(const braid::EmuLaunchConfig& cfg, const std::function<void()>& kernel);

}  // namespace braid_emu

#define threadIdx (::braid_emu::threadIdx_())
#define blockIdx (::braid_emu::blockIdx_())
#define blockDim (::braid_emu::blockDim_())
#define gridDim (::braid_emu::gridDim_())
#define __syncthreads() ::braid_emu::syncThreads(__FILE__, __LINE__)
#define __syncthreads_or(v) ::braid_emu::syncThreadsOr((v), __FILE__, __LINE__)

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)braid_emu::warpBarrier(mask, false);
}
inline int __any_sync(unsigned mask, int v) {
  return braid_emu::warpBarrier(mask, v != 0) ? 1 : 0;
}
inline unsigned __activemask() {
  const unsigned warp0 = braid_emu::threadIdx_().x & ~31u, n = braid_emu::blockDim_().x;
  const unsigned lanes = n - warp0 >= 32 ? 32 : n - warp0;
  return lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
}
inline unsigned __shfl_sync(unsigned mask, unsigned v, int srcLane, int width = 32) {
  (void)width;
  return braid_emu::shfl(mask, v, srcLane);
}
inline int __ffs(int v) {
  return __builtin_ffs(v);
}
inline int __popc(unsigned v) {
  return __builtin_popcount(v);
}
inline long long clock64() {
  return braid_emu::clockNs();
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wtsan"  // ThreadSanitizer does not model fences (devapi_tsan knows)
inline void __threadfence_system() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#pragma GCC diagnostic pop
