// ncclCommSuspend / ncclCommResume / the figures of ncclCommMemStats (comm.h has the contract).
//
// What a suspended communicator gives back is its links: the FIFOs (slots, LL lines, control blocks) every
// connection made at its first use, in host memory or, on a CUDA communicator, in device memory. They are all braid can
// make again without the user: links are connected lazily, so the first operation after the resume finds none and
// connects them as the first operation after init does. Every rank must take part: a rank whose peer still held its old
// link would wait for a connection that never comes.
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "src/common/logging.h"
#include "src/core/comm.h"
#include "src/core/group.h"
#include "src/core/nvls_tree.h"

namespace braid {
namespace {

constexpr int kSuspendMem = 0x01;  // NCCL_SUSPEND_MEM

// The FIFO memory one connector end allocated in this process: a receiver owns its FIFO, a network sender its own
// local copy (transports/net/net_transport.h); any other sender maps its receiver's.
uint64_t ownedBytes(const Connector& c) {
  if (c.ownedBytes() > 0) return c.ownedBytes();  // what its transport allocated (a device FIFO, rounded up)
  if (c.isSend() && !c.wholeMessages()) return 0;
  return localFifoBytes(c.slotBytes(), c.llSlotBytes());
}

}  // namespace

// A barrier some rank did not pass leaves the ranks on either side of it (suspended or not): like a failed group, the
// communicator is unusable from then on, so no rank waits on a peer in the other state.
Status Communicator::failIfNot(const Status& st) {
  if (st.isOk()) return st;
  health_.asyncError.store(static_cast<int>(st.code()));
  backend_->markAborted(st.message());
  return st;
}

uint64_t Communicator::suspendableBytes() const {
  if (suspended()) return health_.releasedBytes;
  uint64_t total = 0;
  for (const Channel& ch : channels_) {
    for (const auto& e : ch.send) total += ownedBytes(*e.second);
    for (const auto& e : ch.recv) total += ownedBytes(*e.second);
  }
  if (nvlsTree_) {
    for (Communicator* c : nvlsTree_->comms()) total += c->suspendableBytes();
  }
  return total;
}

uint64_t Communicator::persistentBytes() const {
  uint64_t total = backend_->persistentBytes();
  if (nvlsTree_) {
    for (Communicator* c : nvlsTree_->comms()) total += c->persistentBytes();
  }
  return total;
}

Status Communicator::suspend(int flags) {
  if ((flags & ~kSuspendMem) != 0) {
    return invalidArgument("flags=0x%x: only NCCL_SUSPEND_MEM (0x%x) is defined", static_cast<unsigned>(flags),
                           static_cast<unsigned>(kSuspendMem));
  }
  if (suspended())
    return invalidUsage("comm %p is already suspended (ncclCommSuspend twice)", static_cast<void*>(this));
  if (inGroup()) {
    return invalidUsage("ncclCommSuspend inside ncclGroupStart/ncclGroupEnd: braid suspends outside groups only");
  }
  if ((flags & kSuspendMem) == 0) return Status::ok();  // nothing asked to be released
  // Every rank is done with the links before any releases them (a peer's last send may still be draining into
  // them): host operations are complete when their call returns; a CUDA communicator's launches are waited for, and
  // a CUDA graph that captured them (it keeps the FIFOs' addresses) refuses the suspend. The ranks agree: either
  // all release their links or none does, and the communicator stays usable when they refuse.
  std::vector<Communicator*> holders{this};
  if (nvlsTree_) {
    for (Communicator* c : nvlsTree_->comms()) holders.push_back(c);
  }
  Status mine;
  for (Communicator* c : holders) {
    if (mine.isOk()) mine = c->backend_->quiesceLinks();
  }
  bool refused = false;  // by some rank: the communicator stays usable
  const Status agreed = bootstrap_->agreeAllOrNothing(mine, "ncclCommSuspend", [&](int r, const Status& theirs) {
    refused = true;
    return Status(theirs.code(), strPrintf("ncclCommSuspend: rank %d could not suspend, so no rank did: %s", r,
                                           theirs.message().c_str()));
  });
  if (!agreed.isOk()) return mine.isOk() && !refused ? failIfNot(agreed) : agreed;  // the exchange failed: unusable
  const uint64_t bytes = suspendableBytes();
  for (Communicator* c : holders) {
    for (Channel& ch : c->channels_) {
      ch.send.clear();
      ch.recv.clear();
    }
    c->backend_->linksReleased();
  }
  health_.releasedBytes = bytes;
  health_.suspended.store(true);
  BRAID_INFO(kLogInit | kLogAlloc, "comm %p rank %d: suspended, %" PRIu64 " bytes of link FIFOs released",
             static_cast<void*>(this), rank_, bytes);
  return Status::ok();
}

Status Communicator::resume() {
  if (!suspended()) {
    return invalidUsage("comm %p is not suspended (ncclCommResume without ncclCommSuspend)", static_cast<void*>(this));
  }
  if (inGroup()) {
    return invalidUsage("ncclCommResume inside ncclGroupStart/ncclGroupEnd: braid resumes outside groups only");
  }
  // No rank connects anew before every rank has released its old links.
  BRAID_RETURN_IF_ERROR(failIfNot(bootstrap_->barrier().withContext("ncclCommResume")));
  health_.suspended.store(false);
  health_.releasedBytes = 0;
  BRAID_INFO(kLogInit, "comm %p rank %d: resumed (links connect at the next operation)", static_cast<void*>(this),
             rank_);
  return Status::ok();
}

}  // namespace braid
