// Device-code probe for the parts of the host+device layer (src/backends/common) that braid's kernels
// (src/backends/cuda/kernels/braid_kernel.cu, built into the fatbin) do not instantiate yet: the direct tile
// reduction of the NVLS-style executor. nvcc checks template code only when it is instantiated. Compiled by
// device_headers_test.sh; nothing here runs.
#include <cuda_runtime.h>

#include "src/backends/common/direct_engine.h"
#include "src/backends/common/kernel_main.h"
#include "src/backends/cuda/kernels/device_cta.cuh"

extern "C" __global__ void braidProbeDirect(braid::DirectTileArgs a) {
  braid::DeviceCta cta;
  braid::KernelEnv env;
  braid::directReduceTile(cta, env, a);
}
