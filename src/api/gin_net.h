// GIN toward ranks outside the LSA team (ranks of other hosts): braid's CPU proxy, NCCL's GIN proxy type
// (NCCL_GIN_TYPE_PROXY), over the one-sided messages of rma_net.h.
//
// Device code (include/nccl_device/gin.h) queues a descriptor per put, value or signal toward such a rank into the
// device communicator's queue: ncclBraidGinNet, whose head is in device memory (claimed, by device atomics) and whose
// descriptors, done count and network signal and counter words are in host-mapped memory. One proxy thread per
// device communicator takes the descriptors in order:
//
//   put:    reads the source (device memory) into a pinned stage, a piece at a time, and sends each piece as a put
//           message to the peer's window (named by its registration number); the last piece carries the signal
//   value:  sends the value's bytes the same way
//   signal: sends the signal alone
//   then:   counts the local action in this rank's network counter word, and marks the descriptor done (flush waits
//           for that: the source has been read)
//
// The peer's messenger lands the data in its window and then adds the amount to its network signal word of that
// device communicator (named by the resource window's registration number, the same on every rank). Device code
// reads a signal or counter as its resource-window word plus its network word, so each word has one writer kind:
// GPUs of the LSA team by atomics, or this host's proxy threads.
//
// Order: one queue per device communicator (all contexts) and one connection per peer keep a peer's puts before
// the signals queued after them. Errors: a send that fails (the peer died, BRAID_TIMEOUT) is reported by a WARN; the
// descriptor is still marked done (so flush ends) and the peer's signal never comes (a wait ends at the abort or its
// timeout). Lifetime: made by ncclDevCommCreate (collective: every rank registers its signal words with its
// messenger before the call's last exchange), ended by ncclDevCommDestroy or the communicator's end: the proxy first
// finishes what was queued (under BRAID_TIMEOUT), then stops.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "src/common/status.h"

struct ncclBraidGinNet;
struct ncclBraidGinDesc;

namespace braid {

class Backend;
class Communicator;
class RmaNet;

// Why GIN cannot reach the ranks outside this rank's LSA team here, or "" when it can (by proxy): every such rank is
// on another host and one-sided messages are on (BRAID_RMA_NET). The same on every rank where the hosts are alike.
std::string ginNetRefusal(const Communicator& c);

class GinNet {
 public:
  // `resourceWindow`: the device communicator's resource window's registration number; `signals`, `counters`: its
  // GIN ids. Errors: the backend's allocation errors, naming what.
  static Result<std::unique_ptr<GinNet>> create(Communicator* comm, RmaNet* net, uint32_t resourceWindow,
                                                uint32_t signals, uint32_t counters);
  ~GinNet();

  // For ncclDevComm::ginNet (device memory).
  ncclBraidGinNet* device() const { return device_; }

 private:
  GinNet(Communicator* comm, RmaNet* net, uint32_t resourceWindow);
  void loop();
  // Sends one descriptor's operation; errors name the peer.
  [[nodiscard]] Status serve(const ncclBraidGinDesc& d);

  Communicator* comm_;
  Backend& backend_;
  RmaNet* net_;
  uint32_t resourceWindow_;
  int rank_;
  ncclBraidGinNet* device_ = nullptr;  // device memory
  char* host_ = nullptr;               // host-mapped: descriptors, done, signals, counters
  ncclBraidGinDesc* descs_ = nullptr;
  uint64_t* done_ = nullptr;
  uint64_t* signals_ = nullptr;
  uint64_t* counters_ = nullptr;
  uint32_t counterCount_ = 0;
  char* stage_ = nullptr;  // pinned: where sources are read into
  std::atomic<bool> stop_{false};
  std::thread proxy_;
};

}  // namespace braid
