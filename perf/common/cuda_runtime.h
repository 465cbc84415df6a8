// The CUDA runtime as the perf tools see it: loaded at run time (dlopen), so the tools build without CUDA headers
// and run on machines without CUDA, yet put their buffers in device memory where the library's communicators live
// on GPUs (NVIDIA's NCCL in the same binary through LD_LIBRARY_PATH, or braid's CUDA backend), as nccl-tests does.
//
// Only the few entry points the driver needs are bound; their C signatures have been stable since CUDA 4, so any
// libcudart from 11 on serves. cudaError_t is an int here and streams are nccl.h's cudaStream_t.
#pragma once

#include <cstddef>
#include <string>

#include "nccl.h"

namespace braid::perf {

class CudaRuntime {
 public:
  // The process-wide runtime, loaded on first use (thread safe). The library is BRAID_PERF_CUDART when set (a path
  // or a soname: tests use a fake), otherwise the first of libcudart.so.13, .12, .11.0 and libcudart.so.
  static const CudaRuntime& get();

  // Devices the runtime sees; 0 when the library is missing or reports an error (why() says which).
  int deviceCount() const { return deviceCount_; }
  // Why deviceCount() is 0: "libcudart.so.13: cannot open shared object file" or the runtime's own error.
  const std::string& why() const { return why_; }
  // The library that was loaded ("" when none).
  const std::string& library() const { return library_; }

  // Each returns false with *error naming the call and the runtime's message.
  bool setDevice(int device, std::string* error) const;
  bool copy(void* dst, const void* src, size_t bytes, std::string* error) const;  // cudaMemcpyDefault (UVA)
  bool fill(void* dst, int value, size_t bytes, std::string* error) const;
  bool allocate(void** p, size_t bytes, std::string* error) const;
  void release(void* p) const;
  bool createStream(cudaStream_t* stream, std::string* error) const;  // non-blocking, as nccl-tests' streams
  bool synchronize(cudaStream_t stream, std::string* error) const;
  // Waits for all work on the current device: a copy from pageable memory may return before its data has landed,
  // and non-blocking streams are not ordered after it.
  bool synchronizeDevice(std::string* error) const;
  void destroyStream(cudaStream_t stream) const;
  // "[0000:18:00.0] NVIDIA H200": bus id and name, as nccl-tests' "# Using devices" lines ("cuda" / "GPU" where the
  // runtime cannot say).
  std::string describe(int device) const;

 private:
  CudaRuntime();
  bool check(int rc, const char* call, std::string* error) const;

  using GetCountFn = int (*)(int*);
  using SetDeviceFn = int (*)(int);
  using MemcpyFn = int (*)(void*, const void*, size_t, int);
  using MemsetFn = int (*)(void*, int, size_t);
  using MallocFn = int (*)(void**, size_t);
  using FreeFn = int (*)(void*);
  using StreamCreateFn = int (*)(cudaStream_t*, unsigned int);
  using StreamFn = int (*)(cudaStream_t);
  using ErrorStringFn = const char* (*)(int);
  using BusIdFn = int (*)(char*, int, int);
  using VoidFn = int (*)();
  using PropertiesFn = int (*)(void*, int);

  int deviceCount_ = 0;
  std::string why_;
  std::string library_;
  GetCountFn getCount_ = nullptr;
  SetDeviceFn setDevice_ = nullptr;
  MemcpyFn memcpy_ = nullptr;
  MemsetFn memset_ = nullptr;
  MallocFn malloc_ = nullptr;
  FreeFn free_ = nullptr;
  StreamCreateFn streamCreate_ = nullptr;
  StreamFn streamSync_ = nullptr;
  StreamFn streamDestroy_ = nullptr;
  VoidFn deviceSync_ = nullptr;
  ErrorStringFn errorString_ = nullptr;
  BusIdFn busId_ = nullptr;
  PropertiesFn properties_ = nullptr;
};

}  // namespace braid::perf
