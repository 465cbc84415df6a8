// An ordinary single-process NCCL program, as users write them: the CUDA toolkit's cuda_runtime.h and libcudart.so,
// ncclCommInitAll over every device, one stream per device, an all-reduce and a broadcast in a group, results
// checked. Built against braid's nccl.h and libnccl.so.2 and the toolkit's libcudart; run with build/fake_cuda first
// on LD_LIBRARY_PATH it drives the fake runtime and driver unmodified (compat_cudart_consumer), and on a GPU machine
// the real ones. Exit 0 on exact results, else the step that failed (and why, on stderr).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "nccl.h"

#define CHECK_CUDA(call, code)                                                                    \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s: %s (%d)\n", #call, cudaGetErrorString(e_), static_cast<int>(e_)); \
      return code;                                                                                \
    }                                                                                             \
  } while (0)
#define CHECK_NCCL(call, code)                                                                        \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      std::fprintf(stderr, "%s: %s: %s\n", #call, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
      return code;                                                                                    \
    }                                                                                                 \
  } while (0)

int main() {
  int n = 0;
  CHECK_CUDA(cudaGetDeviceCount(&n), 2);
  if (n < 1) return 3;
  std::printf("%d device(s)\n", n);
  constexpr size_t kCount = 1 << 16;
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
  CHECK_NCCL(ncclCommInitAll(comms.data(), n, devs.data()), 4);
  std::vector<float*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  std::vector<float> host(kCount);
  for (int d = 0; d < n; ++d) {
    CHECK_CUDA(cudaSetDevice(d), 5);
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&send[static_cast<size_t>(d)]), kCount * sizeof(float)), 6);
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv[static_cast<size_t>(d)]), kCount * sizeof(float)), 6);
    CHECK_CUDA(cudaStreamCreate(&streams[static_cast<size_t>(d)]), 7);
    for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((i + static_cast<size_t>(d)) % 13);
    CHECK_CUDA(cudaMemcpy(send[static_cast<size_t>(d)], host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
               8);
  }
  CHECK_NCCL(ncclGroupStart(), 9);
  for (int d = 0; d < n; ++d) {
    const size_t i = static_cast<size_t>(d);
    CHECK_NCCL(ncclAllReduce(send[i], recv[i], kCount, ncclFloat, ncclSum, comms[i], streams[i]), 10);
  }
  CHECK_NCCL(ncclGroupEnd(), 11);
  for (int d = 0; d < n; ++d) {
    CHECK_CUDA(cudaSetDevice(d), 5);
    CHECK_CUDA(cudaStreamSynchronize(streams[static_cast<size_t>(d)]), 12);
    CHECK_CUDA(cudaMemcpy(host.data(), recv[static_cast<size_t>(d)], kCount * sizeof(float), cudaMemcpyDeviceToHost),
               8);
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += static_cast<float>((i + static_cast<size_t>(p)) % 13);
      if (host[i] != want) {
        std::fprintf(stderr, "device %d element %zu: %f, expected %f\n", d, i, host[i], want);
        return 13;
      }
    }
  }
  for (int d = 0; d < n; ++d) {
    const size_t i = static_cast<size_t>(d);
    CHECK_NCCL(ncclCommDestroy(comms[i]), 14);
    CHECK_CUDA(cudaSetDevice(d), 5);
    CHECK_CUDA(cudaStreamDestroy(streams[i]), 15);
    CHECK_CUDA(cudaFree(send[i]), 16);
    CHECK_CUDA(cudaFree(recv[i]), 16);
  }
  std::printf("all-reduce of %zu floats on %d device(s): exact\n", kCount, n);
  return 0;
}
