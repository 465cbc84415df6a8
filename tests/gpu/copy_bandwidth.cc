// Device-to-device copy bandwidth through the CUDA runtime (cudaMemcpyAsync on one stream), the yardstick
// tests/gpu/run.sh holds braid's reduction kernels to (issue 15: at least 80% of it). Built against the toolkit's
// libcudart like any program; on the fake runtime (ctest gpu_copy_bandwidth_fake) it only shows that it runs, since
// the fake's copies are memcpy on a host thread.
// Usage: copy_bandwidth [bytes] [iterations]   Prints "d2d copy: <bytes> bytes, <GB/s> GB/s (best of <n>)".
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{256} << 20;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&src, bytes) != cudaSuccess ||
      cudaMalloc(&dst, bytes) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess ||
      cudaMemset(src, 1, bytes) != cudaSuccess) {
    std::fprintf(stderr, "copy_bandwidth: CUDA setup failed\n");
    return 2;
  }
  double best = 0;
  for (int i = 0; i < iterations + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      std::fprintf(stderr, "copy_bandwidth: the copy failed\n");
      return 3;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 2 && s > 0 && bytes / s > best) best = static_cast<double>(bytes) / s;  // two warm-ups
  }
  std::printf("d2d copy: %zu bytes, %.1f GB/s (best of %d)\n", bytes, best / 1e9, iterations);
  cudaFree(src);
  cudaFree(dst);
  cudaStreamDestroy(stream);
  return 0;
}
