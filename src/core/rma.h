// The one-sided operations of NCCL 2.29 (ncclPutSignal, ncclSignal, ncclWaitSignal) and window registration as the
// API calls them: the checks NCCL makes at call time, each error naming the argument, then the window layer
// (windows.h) for the steps and the backend to run them. Grouped calls follow NCCL's rule for collectives: what
// could wait for another rank runs at the outermost ncclGroupEnd, so one thread can drive several ranks.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "src/common/status.h"
#include "src/core/windows.h"

namespace braid {

struct CommConfig;

// NCCL 2.31's one-sided configuration (ncclConfig_t numRmaCtx, numRmaSig, rmaEagerInit): the bounds braid accepts.
// The signal area holds numRmaCtx x numRmaSig words per rank of the communicator.
constexpr int kMaxRmaCtx = 64;
constexpr int kMaxRmaSig = 1024;
// Applies NCCL_NUM_RMA_CTX and NCCL_RMA_EAGER_INIT over the config's values (the environment wins, as in NCCL).
// Errors: kInvalidArgument naming the variable and its value.
[[nodiscard]] Status resolveRmaConfig(CommConfig* config);

// ncclCommWindowRegister: in a group, the registration runs at ncclGroupEnd and *win is written then.
[[nodiscard]] Status registerWindow(const std::shared_ptr<Communicator>& comm, const void* handle, void* buff,
                                    size_t bytes, ncclWindow_vidmem** win, int flags);

struct PutRequest {
  const void* localbuff = nullptr;  // null with count 0: ncclSignal
  size_t count = 0;
  int datatype = 0;
  int peer = -1;
  const ncclWindow_vidmem* peerWin = nullptr;
  size_t peerWinOffset = 0;
  int sigIdx = 0;
  int ctx = 0;
  unsigned flags = 0;
  const void* handle = nullptr;  // the caller's ncclComm_t
  void* stream = nullptr;
  bool signalOnly = false;  // ncclSignal
};
[[nodiscard]] Status putSignal(const std::shared_ptr<Communicator>& comm, const PutRequest& req);

// ncclWaitSignal's descriptors (opCnt, peer, sigIdx, ctx) as given; sigIdx and ctx lie in [0, numRmaSig) and
// [0, numRmaCtx) of the communicator's config.
struct WaitDesc {
  int opCnt, peer, sigIdx, ctx;
};
[[nodiscard]] Status waitSignal(const std::shared_ptr<Communicator>& comm, const std::vector<WaitDesc>& descs,
                                const void* handle, void* stream);

}  // namespace braid
