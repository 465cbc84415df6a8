// The CTA of a real GPU kernel, the CTA concept of src/backends/common/kernel_main.h and step_engine.h over CUDA's
// intrinsics (nvcc only). The emulator's EmuCta (src/backends/cuda/emu/cta_emulator.h) is the same concept on host
// threads.
#pragma once

#include <cstdint>

#include "src/backends/cuda/kernels/ptx.cuh"

namespace braid {

struct DeviceCta {
  static constexpr bool kSerial = false;
  __device__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ int nthreads() const { return static_cast<int>(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  __device__ bool syncAll(bool v) const { return __syncthreads_and(v) != 0; }
  // A short back-off: the warp leaves the scheduler for about this long (the peer's write needs the link anyway).
  __device__ void relax() const { __nanosleep(200); }
  __device__ uint64_t nowNs() const { return ptx::globalTimerNs(); }
  // Multicast (multimem.h): the address itself is the view.
  using McView = const char*;
  __device__ McView mcView(const void* mc, size_t) const { return static_cast<const char*>(mc); }
  __device__ uint64_t mcLoadReduce(McView v, size_t off, McOp op) const { return ptx::multimemLoadReduce(v + off, op); }
  __device__ void mcStore(McView v, size_t off, uint64_t word, size_t bytes) const {
    ptx::multimemStore(const_cast<char*>(v) + off, word, bytes);
  }
  __device__ void mcFence() const { ptx::fenceProxyAlias(); }
};

}  // namespace braid
