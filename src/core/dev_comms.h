// Device communicators (ncclDevCommCreate / ncclDevCommDestroy, include/nccl_device/core.h) of one communicator.
//
// A device communicator is one resource window per rank: ncclMemAlloc-kind memory, zeroed, registered as a window
// of the communicator (windows.h), so every rank reaches its LSA team's copies by load/store. Its layout is the same
// on every rank: first the LSA team's barriers (src/api computes their size from nccl_device/lsa_barrier.h's
// layout), then each requested resource buffer in list order at its alignment. src/api turns the result into the
// ncclDevComm kernels take by value.
//
// Creation is collective and blocking (the window's registration is), and fails on every rank alike when one rank
// cannot reach an LSA member's window, or asked for a different layout. Destruction is local (a window's
// deregistration is, since NCCL 2.29); the caller makes sure no kernel still uses the device communicator.
//
// Thread safety: NCCL's: a communicator is used by one thread at a time.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "src/common/status.h"

struct ncclWindow_vidmem;

namespace braid {

class Communicator;

struct DevCommRequest {
  size_t barrierBytes = 0;  // the LSA barriers, first in the window (0: none)
  struct Buffer {
    size_t bytes = 0;
    size_t align = 0;  // 0: the handle unit
  };
  std::vector<Buffer> buffers;  // in the requirement list's order
  bool multimem = false;        // the resource window gets a multicast mapping where the communicator can
};

struct DevCommMade {
  const void* record = nullptr;         // identifies it to destroy (ncclDevComm::braidState)
  ncclWindow_vidmem* window = nullptr;  // the resource window
  size_t bytes = 0;
  const void* windowTable = nullptr;  // the communicator's (ncclFindWindow)
  std::vector<size_t> offsets;        // [buffer]: its byte offset in the window, a multiple of kHandleUnit
};

class DevComms {
 public:
  // A resource handle counts these (ncclGetResourceBufferOffset).
  static constexpr size_t kHandleUnit = 128;
  // Window memory starts on a page at least: the largest alignment a buffer may ask for.
  static constexpr size_t kMaxAlign = 4096;

  explicit DevComms(Communicator* comm) : comm_(comm) {}
  ~DevComms();  // frees the resource memory of device communicators left undestroyed

  // Collective. Errors: kInvalidArgument naming a buffer's bad alignment or size, kInvalidUsage for windows
  // disabled (NCCL_WIN_ENABLE=0), for a rank out of an LSA member's reach or with another layout (naming the rank);
  // the exchange's errors.
  Result<DevCommMade> create(const DevCommRequest& req);
  // kInvalidArgument for a record/window pair this communicator did not make (or destroyed already).
  [[nodiscard]] Status destroy(const void* record, const ncclWindow_vidmem* window);
  // Something the device communicator `record` uses (its network GIN proxy): released first when it ends.
  void attach(const void* record, std::shared_ptr<void> extra);

 private:
  struct Record {
    void* memory = nullptr;
    ncclWindow_vidmem* window = nullptr;
    std::shared_ptr<void> extra;  // attach()
  };
  Communicator* comm_;
  std::mutex mu_;
  std::map<const void*, std::unique_ptr<Record>> records_;  // by record
};

}  // namespace braid
