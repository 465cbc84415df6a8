#include "perf/common/rank_buffers.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "perf/common/cuda_runtime.h"

namespace braid::perf {
namespace {

// Images and expected results: plain page-aligned host memory.
char* hostAllocate(size_t bytes) {
  return static_cast<char*>(zeroedHostPages(bytes));
}

}  // namespace

std::unique_ptr<RankBuffers> RankBuffers::create(Backend* backend, int rank, int device, size_t sendBytes,
                                                 size_t recvBytes, bool streamNull, bool plainHost,
                                                 std::string* error) {
  sendBytes = pageRounded(sendBytes);
  recvBytes = pageRounded(recvBytes);
  std::unique_ptr<RankBuffers> b(new RankBuffers(backend, rank, device));
  const std::string sizes = std::to_string(sendBytes) + " + " + std::to_string(recvBytes);
  b->expected_ = hostAllocate(recvBytes);
  if (b->expected_ == nullptr) {
    *error = "cannot allocate " + std::to_string(recvBytes) + " bytes of host memory for expected results (lower -e)";
    return nullptr;
  }
  if (device < 0) {
    b->plainHost_ = plainHost;
    // A qualified call: the base class's plain pages, whatever the library's allocator is.
    b->send_ = b->hostSend_ =
        static_cast<char*>(plainHost ? backend->Backend::allocate(sendBytes) : backend->allocate(sendBytes));
    b->recv_ = b->hostRecv_ =
        static_cast<char*>(plainHost ? backend->Backend::allocate(recvBytes) : backend->allocate(recvBytes));
    if (b->send_ == nullptr || b->recv_ == nullptr) {
      *error = "cannot allocate " + sizes + " bytes of host buffers (lower -e)";
      return nullptr;
    }
    return b;
  }
  const CudaRuntime& cuda = CudaRuntime::get();
  // ncclMemAlloc allocates on the current device.
  if (!cuda.setDevice(device, error)) return nullptr;
  std::string why;
  b->send_ = static_cast<char*>(backend->allocateOnDevice(sendBytes, &why));
  if (b->send_ != nullptr) b->recv_ = static_cast<char*>(backend->allocateOnDevice(recvBytes, &why));
  if (b->recv_ == nullptr) {
    *error = "cannot allocate " + sizes + " bytes of buffers on CUDA device " + std::to_string(device) + ": " + why +
             " (lower -e)";
    return nullptr;
  }
  b->hostSend_ = hostAllocate(sendBytes);
  b->hostRecv_ = hostAllocate(recvBytes);
  if (b->hostSend_ == nullptr || b->hostRecv_ == nullptr) {
    *error = "cannot allocate " + sizes + " bytes of host images of the device buffers (lower -e)";
    return nullptr;
  }
  if (!streamNull && !cuda.createStream(&b->stream_, error)) return nullptr;
  return b;
}

RankBuffers::~RankBuffers() {
  if (onDevice()) {
    const CudaRuntime& cuda = CudaRuntime::get();
    std::string ignored;
    if (stream_ != nullptr) {
      (void)cuda.synchronize(stream_, &ignored);
      cuda.destroyStream(stream_);
    }
    cuda.release(scratch_);
    if (send_ != nullptr) backend_->releaseOnDevice(send_);
    if (recv_ != nullptr) backend_->releaseOnDevice(recv_);
    std::free(hostSend_);
    std::free(hostRecv_);
  } else {
    for (char* p : {send_, recv_}) {
      if (p == nullptr) continue;
      if (plainHost_) {
        backend_->Backend::release(p);
      } else {
        backend_->release(p);
      }
    }
  }
  std::free(expected_);
}

bool RankBuffers::upload(size_t sendBytes, size_t recvBytes, bool inPlace, std::string* error) {
  if (!onDevice()) return true;
  const CudaRuntime& cuda = CudaRuntime::get();
  return cuda.copy(recv_, hostRecv_, recvBytes, error) && (inPlace || cuda.copy(send_, hostSend_, sendBytes, error)) &&
         cuda.setDevice(device_, error) && cuda.synchronizeDevice(error);
}

char* RankBuffers::scratch(size_t bytes, std::string* error) {
  if (bytes <= scratchBytes_) return scratch_;
  const CudaRuntime& cuda = CudaRuntime::get();
  cuda.release(scratch_);
  scratch_ = nullptr;
  scratchBytes_ = 0;
  void* p = nullptr;
  if (!cuda.setDevice(device_, error) || !cuda.allocate(&p, bytes, error)) return nullptr;
  scratch_ = static_cast<char*>(p);
  scratchBytes_ = bytes;
  return scratch_;
}

bool RankBuffers::download(size_t recvBytes, std::string* error) {
  return !onDevice() || CudaRuntime::get().copy(hostRecv_, recv_, recvBytes, error);
}

bool RankBuffers::synchronize(std::string* error) {
  if (!onDevice()) return true;
  const CudaRuntime& cuda = CudaRuntime::get();
  // The NULL stream (-y 1) is per device: make this rank's device current first.
  return (stream_ != nullptr || cuda.setDevice(device_, error)) && cuda.synchronize(stream_, error);
}

bool deviceBookkeepingAllReduce(ThreadComms* comms, const std::vector<std::unique_ptr<RankBuffers>>& ranks,
                                const std::vector<void*>& hostBufs, size_t bytes, size_t count, ncclDataType_t type,
                                ncclRedOp_t op, std::string* error) {
  // Each rank's scratch is kept (grown when needed), so a barrier inside a timed span (-z 1) costs an all-reduce and
  // two small copies, no allocation.
  const CudaRuntime& cuda = CudaRuntime::get();
  std::vector<void*> scratch;
  std::vector<cudaStream_t> streams;
  for (const auto& r : ranks) {
    char* s = r->scratch(std::max<size_t>(bytes, 1), error);
    if (s == nullptr || !cuda.copy(s, hostBufs[scratch.size()], bytes, error) || !cuda.setDevice(r->device(), error) ||
        !cuda.synchronizeDevice(error)) {
      return false;
    }
    scratch.push_back(s);
    streams.push_back(r->stream());
  }
  if (!comms->allReduce(scratch, count, type, op, streams, error)) return false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!ranks[i]->synchronize(error) || !cuda.copy(hostBufs[i], scratch[i], bytes, error)) return false;
  }
  return true;
}

}  // namespace braid::perf
