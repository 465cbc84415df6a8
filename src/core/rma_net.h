// One-sided operations over the network (ncclPutSignal, ncclSignal toward a rank on another host) on host
// communicators: NCCL 2.29's CPU proxy, over braid's own connectors.
//
// Where a peer's window and signal area cannot be mapped (another host), a put becomes messages on a connector of
// the transport the communicator would pick for that peer (the network), outside the collectives' channels:
//
//   sender (the calling thread):  header {window, offset, bytes, signal} + up to a slot of data, per message;
//                                 the put's last message carries the signal value
//   receiver (one proxy thread):  copies each message's data into its own window buffer, then stores the signal
//                                 value into its own signal word for that sender (release), as a mapped put would
//
// One connector per direction and peer keeps a peer's messages in order, so "the signal arrived" still implies "the
// data before it arrived", and ncclWaitSignal is unchanged: it waits on this rank's own signal words. Windows are
// named by their registration number, the same on every rank since registration is collective. A put to a window
// the receiver has deregistered is dropped with a WARN (NCCL leaves it undefined); its signal is not applied, so
// the waiter fails at its deadline rather than reading data that never came.
//
// Where puts are issued (RmaMessenger): a host communicator's calling thread sends them itself (send); a CUDA
// communicator's stream copies the data into a pinned stage and, on reaching the put, posts it (posts(),
// src/backends/rma_posts.h) to this messenger's sender thread. The receiving proxy lands data and signal words
// through the backend (writeDeviceBlock, storeSignal), so window buffers and signal areas may be GPU memory.
//
// Lifetime: made by the communicator's first window registration, or its init with rmaEagerInit=1 (collective: every
// rank connects to each rank of another host), ended with the communicator, after its puts have left (a put returns
// once its messages are queued; a posted one counts from its call). A sender waits for free slots under BRAID_TIMEOUT
// and ncclCommAbort; the proxy thread polls with back-off and stops at destruction or abort.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/backends/backend.h"
#include "src/backends/rma_posts.h"
#include "src/common/status.h"
#include "transports/transport.h"

namespace braid {

class Communicator;

// Where an arriving put lands: `apply` runs on the window registered `index`-th on this rank (its buffer and size)
// with the window held (a deregistration waits for it) and kFound returns. kGone: deregistered. kNotYet: this rank's
// part of that registration has not finished (the sender's may finish first); the message waits.
enum class RmaWindowState { kFound, kGone, kNotYet };

// The back-off of a thread that polls for one-sided work (this proxy, the GIN proxy): yield at first, then short
// sleeps while a burst may still be coming, then long ones (an idle communicator costs about a thousand wake-ups a
// second). `idleRounds`: polls that found nothing so far.
void proxySleep(int idleRounds);
using RmaWindowLookup =
    std::function<RmaWindowState(uint32_t index, const std::function<void(char* base, uint64_t bytes)>&)>;

// A GIN get toward another host, as its request message carries it: where the answer goes on the asker (its window
// registered `localWindow`-th, at `localOffset`), how much, and the asker's id for it.
// A fence (kFence) asks for no data: the messenger answers it at once (empty), since every message before it on the
// connection has landed by then.
struct GinGetRequest {
  static constexpr uint32_t kFence = 1;
  uint32_t localWindow;
  uint32_t flags;
  uint64_t localOffset;
  uint64_t bytes;
  uint64_t id;
};

// A device communicator's GIN proxy (src/api/gin_net.h), for the gets of GIN across hosts. Called on the messenger's
// proxy thread with its GIN lock held (removeGinTarget waits for them to return), so they only take note.
class GinGetHandler {
 public:
  virtual ~GinGetHandler() = default;
  // `peer` asks for part of this rank's window registered `window`-th, at `offset`: `request` says how much and
  // where to (never a fence: the messenger answers those).
  virtual void getRequested(int peer, uint32_t window, uint64_t offset, const GinGetRequest& request) = 0;
  // Whether get `id` this rank asked `peer` for still waits for its answer (one that ended at its deadline does
  // not: the pieces of a late answer are dropped, not landed).
  virtual bool answerWanted(int peer, uint64_t id) = 0;
  // The answer to get `id` this rank asked `peer` for has landed (`ok`), or will not (a WARN said why).
  virtual void getAnswered(int peer, uint64_t id, bool ok) = 0;
};

class RmaNet : public RmaMessenger {
 public:
  // Collective among this rank and `peers` (each of which names this rank): connects a pair of message connectors
  // to each. `signals`: this rank's signal area ([sender] `signalStride` bytes of signal words). Errors: the
  // transports' and the bootstrap's, with the peer named.
  static Result<std::unique_ptr<RmaNet>> connect(Communicator* comm, const std::vector<int>& peers, char* signals,
                                                 size_t signalStride, RmaWindowLookup lookup);
  ~RmaNet() override;

  bool serves(int peer) const { return peer >= 0 && static_cast<size_t>(peer) < out_.size() && out_[peer] != nullptr; }
  // A put (s.kind kPut: s.src, s.bytes into window s.window at s.offset) or a signal toward s.peer, then the signal
  // value. Returns once its messages are queued. Errors: ncclRemoteError when the peer stopped taking messages for
  // BRAID_TIMEOUT or the connection failed (naming the peer), the abort error after ncclCommAbort.
  [[nodiscard]] Status send(const RmaStep& s) override;
  // Null once the communicator's end began, if none was made before.
  std::shared_ptr<RmaPosts> posts() override;
  // ncclRemoteError with the transport's message once the proxy saw messages from `peer` fail, or a posted put to it
  // failed, else ok.
  [[nodiscard]] Status health(int peer) const override;
  // GIN toward other hosts (src/api/gin_net.h): messages naming registration `target` add to signals[id] here (the
  // proxy is their only writer). Added before any peer can send to it (ncclDevCommCreate is collective); removed at its
  // end, after which such messages are dropped with a WARN.
  // `gets` takes the GIN gets toward it and their answers (null: they are dropped with a WARN).
  void addGinTarget(uint32_t target, uint64_t* signals, uint32_t count, GinGetHandler* gets = nullptr);
  // Keeps other senders off `peer`'s connection while the caller sends an operation of several steps (send() may be
  // called while held). Requires serves(peer).
  std::unique_lock<std::recursive_mutex> holdPeer(int peer) {
    return std::unique_lock<std::recursive_mutex>(*sendMu_[static_cast<size_t>(peer)]);
  }
  void removeGinTarget(uint32_t target);

 private:
  struct Header {
    uint32_t magic;
    uint32_t window;
    uint64_t offset;
    uint64_t bytes;      // data after the header in this message
    uint64_t signal;     // 0: more messages of this put follow; else the value of the sender's signal word
    uint32_t ginTarget;  // a GIN operation's message: RmaStep's fields (else kNoGinTarget)
    uint32_t ginSignal;
    uint64_t ginAmount;
    uint32_t ginFlags;  // kGinLast on the operation's last message, kGinGetRequest, kGinGetAnswer, kGinFailed, kGinVa
    uint32_t slot;      // which of the sender's signal words `signal` sets (RmaStep::slot)
  };
  static constexpr uint32_t kGinLast = 1, kGinGetRequest = 2, kGinGetAnswer = 4, kGinFailed = 8, kGinVa = 16;
  // Adds a GIN message's signal (the proxy), or says why not.
  std::string addGinSignal(int peer, const Header& h);
  // Hands a GIN get's request (`data`: its GinGetRequest) or the end of its answer to the handler of its device
  // communicator, or says why not.
  std::string passGinGet(int peer, const Header& h, const char* data);
  // Whether a piece of a GIN get's answer is still wanted by its asker (this rank's device communicator).
  bool ginAnswerWanted(int peer, const Header& h);
  // An empty last answer to a GIN request, back to its asker through the sender thread (the proxy thread must not
  // block on a send): a fence's (done), or a failed end for a get nobody here can answer.
  void answerGinRequest(int peer, uint32_t ginTarget, const GinGetRequest& req, bool failed);
  RmaNet(Communicator* comm, char* signals, size_t signalStride, RmaWindowLookup lookup);
  // At set-up: one empty message each way, so every connection is open (a peer that dies later is seen on it).
  Status handshake(const std::vector<int>& peers);
  void proxyLoop();
  // Sends what streams posted, in order; a peer whose send failed gets nothing more (health() says why).
  void senderLoop();
  // Stops the sender thread (after the posts came, unless `wait` is false or the deadline passed): drops the rest.
  void stopSender(bool wait);
  // Applies one message from `peer` (the proxy thread): kFound, kGone after a WARN for one that could not be
  // applied, kNotYet for a window whose registration has not finished here (applied later).
  RmaWindowState apply(int peer, const char* msg, uint64_t received);
  // The proxy saw messages from peer q stop (its connection failed or closed): recorded for health(), with a WARN
  // unless q had said goodbye.
  void noteStopped(size_t q, const Connector& c);
  // Bytes the network delivered into the receiving connector's current slot.
  static uint64_t receivedBytes(Connector& c);
  // Says goodbye to every peer, then waits until every message this rank queued has left (the transport freed its
  // slot), for at most BRAID_TIMEOUT. False when some did not (or the communicator was aborted).
  bool drain();

  Communicator* comm_;
  char* signals_;
  size_t signalStride_;
  RmaWindowLookup lookup_;
  int rank_;
  double timeoutSec_;
  const std::atomic<bool>* abort_;
  std::vector<std::unique_ptr<Connector>> out_;  // [peer] what this rank sends it (null: not served)
  std::vector<std::unique_ptr<Connector>> in_;   // [peer] what it sends this rank
  std::vector<uint8_t> spoiled_;                 // [peer] a piece of its current put was dropped (the proxy's)
  std::vector<uint8_t> spoiledGin_;              // [peer] the same for its current GIN operation
  std::vector<uint8_t> ended_;                   // [peer] it said goodbye (the proxy's)
  mutable std::mutex failedMu_;
  std::vector<std::string> failed_;      // [peer] why its messages stopped (set once by the proxy; empty: fine)
  std::vector<std::string> sendFailed_;  // [peer] why a posted put to it failed (set once by the sender)
  std::atomic<bool> stop_{false};
  std::thread proxy_;
  // [peer] one sender at a time on its connection: the caller, the stream posts' thread, GIN proxies (a GIN
  // operation of several steps holds it throughout: holdPeer).
  std::vector<std::unique_ptr<std::recursive_mutex>> sendMu_;
  std::mutex ginMu_;
  struct GinTarget {
    uint64_t* signals;
    uint32_t count;
    GinGetHandler* gets;
  };
  std::map<uint32_t, GinTarget> ginTargets_;
  std::mutex postsMu_;
  std::shared_ptr<RmaPosts> posts_;  // made, with the sender thread, at the first posts()
  bool ending_ = false;              // under postsMu_: the end began, no sender thread is started any more
  std::atomic<bool> stopSender_{false};
  std::thread sender_;
};

}  // namespace braid
