// One rank's perf buffers, in host or device memory.
//
// The driver writes inputs and reads results through host images; on host memory the images are the buffers
// themselves, on a device they are separate host copies, copied in before an operation and back after it (never
// inside a timed span). Each device rank has its own non-blocking stream, as in nccl-tests (or the NULL stream
// with -y 1). Not thread safe: one driver thread owns a rank's buffers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/common/backend.h"

namespace braid::perf {

class RankBuffers {
 public:
  // `device` < 0: host memory from the backend (ncclMemAlloc for braid). Otherwise device memory on that CUDA
  // device (the backend's allocateOnDevice), host images, and a stream unless streamNull. The sizes are rounded
  // up to whole pages. nullptr with *error naming the sizes, the device and the reason.
  // plainHost: host memory from plain page-aligned allocation (Backend's own), not the library's allocator.
  static std::unique_ptr<RankBuffers> create(Backend* backend, int rank, int device, size_t sendBytes, size_t recvBytes,
                                             bool streamNull, bool plainHost, std::string* error);
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  int rank() const { return rank_; }
  bool plainHost() const { return plainHost_; }
  int device() const { return device_; }  // -1: host memory
  bool onDevice() const { return device_ >= 0; }
  cudaStream_t stream() const { return stream_; }

  char* send() const { return send_; }  // what the library sees
  char* recv() const { return recv_; }
  char* hostSend() const { return hostSend_; }  // what the driver fills and checks
  char* hostRecv() const { return hostRecv_; }
  char* expected() const { return expected_; }

  // Copies the first sendBytes / recvBytes of the images to the device (nothing on host memory). In place the send
  // buffer lives inside the receive buffer, so only the latter is copied.
  bool upload(size_t sendBytes, size_t recvBytes, bool inPlace, std::string* error);
  // Copies the first recvBytes of the receive buffer back to its image.
  bool download(size_t recvBytes, std::string* error);
  // Waits for everything issued on this rank's stream (nothing on host memory, where operations complete on return).
  bool synchronize(std::string* error);
  // A device buffer of at least `bytes` for the driver's bookkeeping, kept between calls; nullptr with *error.
  char* scratch(size_t bytes, std::string* error);

 private:
  RankBuffers(Backend* backend, int rank, int device) : backend_(backend), rank_(rank), device_(device) {}

  Backend* backend_;
  int rank_;
  int device_;
  bool plainHost_ = false;
  cudaStream_t stream_ = nullptr;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  char* hostSend_ = nullptr;
  char* hostRecv_ = nullptr;
  char* expected_ = nullptr;
  char* scratch_ = nullptr;  // device memory, grown by scratch()
  size_t scratchBytes_ = 0;
};

// The driver's bookkeeping all-reduce on device ranks: copies each rank's `bytes` host bytes to a device scratch
// buffer, runs comms->allReduce on the ranks' streams, waits, and copies the results back.
bool deviceBookkeepingAllReduce(ThreadComms* comms, const std::vector<std::unique_ptr<RankBuffers>>& ranks,
                                const std::vector<void*>& hostBufs, size_t bytes, size_t count, ncclDataType_t type,
                                ncclRedOp_t op, std::string* error);

}  // namespace braid::perf
