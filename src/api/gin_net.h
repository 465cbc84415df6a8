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
//   VA:     a VA signal (of a put, a value or a signal) follows the operation's data as a message of its own, naming
//           the peer's window and offset; the peer's messenger adds it to that GPU word with braid's signal kernel
//           (Backend::addSignal: the driver's stream memory operations have no add), after the data has landed
//   get:    sends a request (which part of the peer's window, and where in this rank's window the answer goes);
//           the peer's proxy thread reads that part into its stage and sends it back as put messages into this
//           rank's window, the last marking the get answered
//   fence:  (a barrier's Put fence) sends an empty fence request to every peer this proxy sent puts, values or VA
//           signals to since its last fence; the peer's messenger answers it at once through its sender thread, having
//           landed every message before it on the connection
//   then:   counts the local action in this rank's network counter word, and marks the descriptor done once every
//           descriptor before it is (flush waits for that: sources read, gets landed, fences answered). Gets and
//           fences stay outstanding while later descriptors are served; one not answered within BRAID_TIMEOUT, or
//           whose peer's connection failed, ends with a WARN (its data did not land, or is not known to have).
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
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "src/common/status.h"
#include "src/core/rma_net.h"

struct ncclBraidGinNet;
struct ncclBraidGinDesc;

namespace braid {

class Backend;
class Communicator;

// Why GIN cannot reach the ranks outside this rank's LSA team here, or "" when it can (by proxy): every such rank is
// on another host and one-sided messages are on (BRAID_RMA_NET). The same on every rank where the hosts are alike.
std::string ginNetRefusal(const Communicator& c);

class GinNet : public GinGetHandler {
 public:
  // `resourceWindow`: the device communicator's resource window's registration number; `signals`, `counters`: its
  // GIN ids. Errors: the backend's allocation errors, naming what.
  static Result<std::unique_ptr<GinNet>> create(Communicator* comm, RmaNet* net, uint32_t resourceWindow,
                                                uint32_t signals, uint32_t counters);
  ~GinNet() override;

  // For ncclDevComm::ginNet (device memory).
  ncclBraidGinNet* device() const { return device_; }

  // GinGetHandler (the messenger's proxy thread): note the request or the answer; the proxy thread acts on it.
  void getRequested(int peer, uint32_t window, uint64_t offset, const GinGetRequest& request) override;
  bool answerWanted(int peer, uint64_t id) override;
  void getAnswered(int peer, uint64_t id, bool ok) override;

 private:
  struct IncomingGet {
    int peer;
    uint32_t window;
    uint64_t offset;
    GinGetRequest request;
  };
  struct OutstandingGet {
    std::chrono::steady_clock::time_point deadline;
    bool fence;
  };
  using GetKey = std::pair<uint64_t, int>;  // the descriptor's index (the request's id), the peer
  GinNet(Communicator* comm, RmaNet* net, uint32_t resourceWindow);
  void loop();
  // Sends descriptor `index`'s operation; errors name the peer.
  [[nodiscard]] Status serve(uint64_t index, const ncclBraidGinDesc& d);
  // A put's or value's data messages (`s`: the operation's step so far); the last is the operation's last when `last`.
  [[nodiscard]] Status sendData(const ncclBraidGinDesc& d, const RmaStep& s, bool last);
  // A get of this rank's: noted outstanding, then its request sent.
  [[nodiscard]] Status ask(uint64_t index, const ncclBraidGinDesc& d);
  // Sends fence `index`'s requests to the peers written to since the last fence (`failed`: those not to send to).
  void fence(uint64_t index, const std::vector<uint8_t>& failed);
  // Notes request (index, peer) outstanding and sends it; undone when the send fails.
  [[nodiscard]] Status request(uint64_t index, int peer, uint32_t window, uint64_t offset, const GinGetRequest& req);
  // A peer's get: the part of this rank's window it names, sent back in pieces (or a failed end, with a WARN;
  // `refuse`: a failed end at once).
  [[nodiscard]] Status answer(const IncomingGet& g, bool refuse = false);
  // Answers what peers asked for so far; true when there was any.
  bool answerGets();
  // Ends, with a WARN, this rank's gets past their deadline or toward a peer whose connection failed.
  void expireGets();
  // Publishes done: every descriptor before `next` but the outstanding gets and what follows the first of them.
  void publishDone(uint64_t next);

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
  double timeoutSec_ = 0;  // BRAID_TIMEOUT: how long a get may stay unanswered (0: no limit)
  std::mutex getsMu_;
  std::deque<IncomingGet> incoming_;                  // peers' gets, to answer (under getsMu_)
  std::map<GetKey, OutstandingGet> outstanding_;      // this rank's gets and fences not answered yet (getsMu_)
  std::vector<uint8_t> unfenced_;                     // [peer]: writes sent since the last fence (the proxy's)
  std::chrono::steady_clock::time_point nextExpiry_;  // the proxy's: when expireGets next looks
  std::atomic<bool> stop_{false};
  std::thread proxy_;
};

}  // namespace braid
