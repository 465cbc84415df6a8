// Device-code probe for the host+device layer (src/backends/common): instantiates the step engine, every protocol,
// the reduction loops, the FIFO view and the memory-order accessors in kernels, so nvcc checks the template code a
// CUDA backend will run (an uninstantiated template is never checked). Compiled by device_headers_test.sh; nothing
// here runs.
#include <cuda_runtime.h>

#include "src/backends/common/direct_engine.h"
#include "src/backends/common/reduce_copy.h"
#include "src/backends/common/step_engine.h"

namespace braid {
namespace {

struct DeviceCta {
  static constexpr bool kSerial = false;
  __device__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ int nthreads() const { return static_cast<int>(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  __device__ bool syncAll(bool v) const { return __syncthreads_and(v) != 0; }
};

struct DeviceEnv {
  __device__ void drive(const ConnSlot&) {}
  __device__ void released(const ConnSlot&) {}
  __device__ void reduce(const DeviceCta& cta, const ReduceOp& op, void* dst, const void* peer, const void* local,
                         size_t n, bool post) {
    ctaReduce(cta, op, dst, peer, local, n, post);
  }
  __device__ void copyLocal(const DeviceCta& cta, const ReduceOp& op, void* dst, const void* src, size_t n,
                            bool post) {
    ctaCopyLocal(cta, op, dst, src, n, post);
  }
  __device__ void copy(const DeviceCta& cta, void* dst, const void* src, size_t bytes) { ctaCopy(cta, dst, src, bytes); }
};

}  // namespace
}  // namespace braid

extern "C" __global__ void braidProbeEngine(braid::ChannelWorkDesc ch, int* status) {
  braid::DeviceCta cta;
  braid::DeviceEnv env;
  if (cta.tid() == 0) braid::announceDemand(ch);
  while (cta.syncAll(ch.remaining != 0)) braid::progressChannel(cta, env, ch);
  if (cta.tid() == 0) *status = braid::waitingOn(ch) != nullptr;
}

extern "C" __global__ void braidProbeDirect(braid::DirectTileArgs a) {
  braid::DeviceCta cta;
  braid::DeviceEnv env;
  braid::directReduceTile(cta, env, a);
}
