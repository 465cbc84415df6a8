// The kernels: one entry per protocol, each running kernelMain (src/backends/common/kernel_main.h) for the channel
// its CTA number names; the datatype and op are dispatched per step inside (reduce_copy.h). Built by nvcc into one
// fatbin (sm_90 SASS + compute_90 PTX, --fmad=false, never fast-math; CMakeLists.txt) that libnccl.so.2 embeds
// (kernel_image.h); the emulator compiles the same kernelMain with g++ (emu/emu_kernels.cc). The names are
// kernelName(ProtoId), kDirectKernelName and kRmaKernelName, and the launch bound is kKernelMaxThreads.
#include "src/backends/common/direct_kernel.h"
#include "src/backends/common/kernel_main.h"
#include "src/backends/common/rma_kernel.h"
#include "src/backends/cuda/kernels/device_cta.cuh"

namespace braid {
template <ProtoId kProto>
__device__ __forceinline__ void kernelEntry(const KernelArgs& a) {
  DeviceCta cta;
  KernelEnv env;
  kernelMain<OnlyProto<kProto>>(cta, env, a, blockIdx.x);
}
}  // namespace braid

extern "C" __global__ void __launch_bounds__(braid::kKernelMaxThreads, 1) braidKernelSimple(braid::KernelArgs a) {
  braid::kernelEntry<braid::ProtoId::kSimple>(a);
}
extern "C" __global__ void __launch_bounds__(braid::kKernelMaxThreads, 1) braidKernelLL(braid::KernelArgs a) {
  braid::kernelEntry<braid::ProtoId::kLL>(a);
}
extern "C" __global__ void __launch_bounds__(braid::kKernelMaxThreads, 1) braidKernelLL128(braid::KernelArgs a) {
  braid::kernelEntry<braid::ProtoId::kLL128>(a);
}
extern "C" __global__ void __launch_bounds__(braid::kKernelMaxThreads, 1) braidKernelDirect(braid::KernelArgs a) {
  braid::DeviceCta cta;
  braid::KernelEnv env;
  braid::directKernelMain(cta, env, a, blockIdx.x);
}
extern "C" __global__ void __launch_bounds__(braid::kKernelMaxThreads, 1) braidKernelRma(braid::KernelArgs a) {
  braid::DeviceCta cta;
  braid::rmaKernelMain(cta, a);
}
