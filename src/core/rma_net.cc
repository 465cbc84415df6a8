#include "src/core/rma_net.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "src/backends/common/mem_order.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/common/wait.h"
#include "src/core/comm.h"

namespace braid {
namespace {

constexpr uint32_t kTagRma = 0x50000;    // bootstrap tag of the connection descriptions (comm.cc's are below)
constexpr uint32_t kMagic = 0x524d414e;  // "RMAN"
constexpr uint32_t kNoWindow = RmaStep::kNoWindow;  // a signal alone
constexpr uint32_t kGoodbye = ~uint32_t{0} - 1;     // the sender's communicator ends: its connection closes next
// A message slot: large enough that the header is a small part of it, small enough that connecting every pair of
// ranks on different hosts costs little (8 slots each way: 1 MB per peer).
constexpr size_t kSlotBytes = 64 << 10;
constexpr size_t kLlSlotBytes = 64;  // LL is never used here; the FIFO layout only needs a size

}  // namespace

void proxySleep(int idleRounds) {
  if (idleRounds < 64) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(idleRounds < 2000 ? 20 : 1000));
  }
}

RmaNet::RmaNet(Communicator* comm, char* signals, size_t signalStride, RmaWindowLookup lookup)
    : comm_(comm),
      signals_(signals),
      signalStride_(signalStride),
      lookup_(std::move(lookup)),
      rank_(comm->rank()),
      timeoutSec_(comm->waitContext().timeoutSec),
      abort_(&comm->abortFlag()) {}

Result<std::unique_ptr<RmaNet>> RmaNet::connect(Communicator* comm, const std::vector<int>& peers, char* signals,
                                                size_t signalStride, RmaWindowLookup lookup) {
  std::unique_ptr<RmaNet> net(new RmaNet(comm, signals, signalStride, std::move(lookup)));
  const size_t n = static_cast<size_t>(comm->nranks());
  net->out_.resize(n);
  net->in_.resize(n);
  net->spoiled_.assign(n, 0);
  net->spoiledGin_.assign(n, 0);
  for (size_t q = 0; q < n; ++q) net->sendMu_.push_back(std::make_unique<std::recursive_mutex>());
  net->ended_.assign(n, 0);
  net->failed_.resize(n);
  net->sendFailed_.resize(n);
  const PeerInfo& self = comm->peer(comm->rank());
  const TransportConfig& cfg = comm->transportConfig();
  // Every receiving end first, on every rank, so no rank waits for a description another has not sent yet.
  std::string via;
  for (int q : peers) {
    const PeerInfo& peer = comm->peer(q);
    BRAID_ASSIGN_OR_RETURN(Transport * t, selectTransport(comm->backend().transports(), cfg, self, peer));
    BRAID_ASSIGN_OR_RETURN(RecvSetup setup, t->setupRecv(cfg, self, peer, 0, kSlotBytes, kLlSlotBytes));
    BRAID_RETURN_IF_ERROR(comm->bootstrap()->send(q, kTagRma, setup.blob, kConnectBlobBytes));
    std::unique_ptr<Connector>& in = net->in_[static_cast<size_t>(q)];
    in = std::move(setup.connector);
    if (in->demandDriven()) in->expectMessages(kFifoSlots);  // always a slot's worth of receives posted
    via = t->name();
  }
  for (int q : peers) {
    char blob[kConnectBlobBytes];
    BRAID_RETURN_IF_ERROR(comm->bootstrap()
                              ->recv(q, kTagRma, blob, kConnectBlobBytes)
                              .withContext(strPrintf("connecting one-sided messages to rank %d", q)));
    BRAID_ASSIGN_OR_RETURN(Transport * t, selectTransport(comm->backend().transports(), cfg, self, comm->peer(q)));
    BRAID_ASSIGN_OR_RETURN(net->out_[static_cast<size_t>(q)], t->connectSend(cfg, self, comm->peer(q), 0, blob));
  }
  BRAID_RETURN_IF_ERROR(net->handshake(peers));
  BRAID_INFO(kLogInit | kLogNet,
             "rank %d: one-sided operations toward %zu rank(s) on other hosts go as messages via %s (%zu-byte "
             "slots), applied here by a proxy thread",
             comm->rank(), peers.size(), via.c_str(), kSlotBytes);
  RmaNet* p = net.get();
  net->proxy_ = std::thread([p] { p->proxyLoop(); });
  return net;
}

Status RmaNet::handshake(const std::vector<int>& peers) {
  RmaStep hello;
  hello.kind = RmaStep::Kind::kSignal;
  for (int q : peers) {
    hello.peer = q;
    BRAID_RETURN_IF_ERROR(send(hello));  // a signal of value 0: applies nothing
  }
  WaitContext ctx = comm_->waitContext();
  for (int q : peers) {
    Connector* c = in_[static_cast<size_t>(q)].get();
    WaitLoop loop(ctx);
    while (!c->recvReady()) {
      c->drive();
      const std::string why = c->failureText();
      if (!why.empty())
        return remoteError("rank %d: one-sided messages from rank %d failed: %s", rank_, q, why.c_str());
      auto check = [&](bool timedOut) -> Status {
        if (!timedOut) return Status::ok();
        return remoteError("rank %d: rank %d (%s) opened no one-sided connection within BRAID_TIMEOUT=%g s", rank_, q,
                           c->peer().hostname, ctx.timeoutSec);
      };
      BRAID_RETURN_IF_ERROR(loop.idle(check, proxySleep));
    }
    if (apply(q, c->recvSlot(), receivedBytes(*c)) != RmaWindowState::kFound)
      return remoteError("rank %d: rank %d's first one-sided message was garbled", rank_, q);
    c->recvPost();
    if (c->demandDriven()) c->expectMessages(1);
  }
  return Status::ok();
}

RmaNet::~RmaNet() {
  const bool delivered = drain();
  stopSender(false);  // drained (or given up on): what a stream posts from now on is dropped
  stop_.store(true, std::memory_order_release);
  if (proxy_.joinable()) proxy_.join();
  // Undelivered or aborted: closing must not wait for a peer that takes nothing (the transport would wait for the
  // sends once more, BRAID_TIMEOUT per connection).
  if (!delivered || abort_->load(std::memory_order_relaxed)) {
    const std::string why = strPrintf("rank %d ended its communicator with one-sided messages undelivered", rank_);
    for (auto& c : out_) {
      if (c) c->markAborted(why);
    }
    for (auto& c : in_) {
      if (c) c->markAborted(why);
    }
  }
}

Status RmaNet::send(const RmaStep& s) {
  Connector* c = serves(s.peer) ? out_[static_cast<size_t>(s.peer)].get() : nullptr;
  if (c == nullptr) return invalidUsage("rank %d: no message connection to rank %d", rank_, s.peer);
  std::lock_guard<std::recursive_mutex> one(*sendMu_[static_cast<size_t>(s.peer)]);
  const PeerInfo& peer = c->peer();
  const size_t room = c->slotBytes() - sizeof(Header);
  const char* src = static_cast<const char*>(s.src);
  size_t left = s.kind == RmaStep::Kind::kPut ? s.bytes : 0;
  uint64_t offset = s.offset;
  WaitContext ctx = comm_->waitContext();
  do {
    WaitLoop loop(ctx);
    while (!c->sendReady()) {
      c->drive();
      const std::string why = c->failureText();
      if (!why.empty() || c->peerAborted()) {
        return remoteError("rank %d: one-sided messages to rank %d (%s) failed: %s", rank_, s.peer, peer.hostname,
                           why.empty() ? "the connection was aborted" : why.c_str());
      }
      auto check = [&](bool timedOut) -> Status {
        if (!timedOut) return Status::ok();
        return remoteError(
            "rank %d: rank %d (%s) took no one-sided message for BRAID_TIMEOUT=%g s (its process may "
            "have stopped or left the communicator)",
            rank_, s.peer, peer.hostname, ctx.timeoutSec);
      };
      BRAID_RETURN_IF_ERROR(loop.idle(check, proxySleep));
    }
    const size_t len = std::min(left, room);
    Header h;
    h.magic = kMagic;
    h.window = s.kind == RmaStep::Kind::kPut || s.window == kGoodbye ? s.window : kNoWindow;
    h.offset = offset;
    h.bytes = len;
    h.signal = left == len ? s.value : 0;  // the last message of the put carries its signal (values start at 1)
    h.ginTarget = s.ginTarget;
    h.ginSignal = s.ginSignal;
    h.ginAmount = s.ginAmount;
    h.ginFlags = (left == len && s.ginLast ? kGinLast : 0) |
                 (s.ginGet == RmaStep::GinGet::kRequest ? kGinGetRequest : 0) |
                 (s.ginGet == RmaStep::GinGet::kReply ? kGinGetAnswer : 0) | (s.ginFailed ? kGinFailed : 0) |
                 (s.ginVa ? kGinVa : 0);
    h.slot = s.slot;
    char* slot = c->sendSlot();
    memcpy(slot, &h, sizeof(h));
    if (len > 0) memcpy(slot + sizeof(h), src, len);
    c->sendPost(sizeof(h) + len);
    c->drive();
    src += len;
    offset += len;
    left -= len;
  } while (left > 0);
  c->release();  // what is still in flight is the transport's progress thread's
  return Status::ok();
}

Status RmaNet::health(int peer) const {
  std::lock_guard<std::mutex> lock(failedMu_);
  if (!serves(peer)) return Status::ok();
  const size_t p = static_cast<size_t>(peer);
  if (!sendFailed_[p].empty()) return Status(Code::kRemoteError, sendFailed_[p]);
  if (failed_[p].empty()) return Status::ok();
  return remoteError("rank %d: one-sided messages from rank %d stopped: %s", rank_, peer, failed_[p].c_str());
}

void RmaNet::addGinTarget(uint32_t target, uint64_t* signals, uint32_t count, GinGetHandler* gets) {
  std::lock_guard<std::mutex> lock(ginMu_);
  ginTargets_[target] = GinTarget{signals, count, gets};
}

void RmaNet::removeGinTarget(uint32_t target) {
  std::lock_guard<std::mutex> lock(ginMu_);
  ginTargets_.erase(target);
}

std::string RmaNet::addGinSignal(int peer, const Header& h) {
  std::lock_guard<std::mutex> lock(ginMu_);
  auto it = ginTargets_.find(h.ginTarget);
  if (it == ginTargets_.end()) {
    return strPrintf(
        "a GIN signal from rank %d to the device communicator of window #%u, which this rank has "
        "destroyed: dropped",
        peer, h.ginTarget);
  }
  if (h.ginSignal >= it->second.count) {
    return strPrintf("a GIN signal from rank %d names signal %u of %u: dropped", peer, h.ginSignal, it->second.count);
  }
  // Host memory the rank's kernels read (acquire, system scope): this thread is its only writer.
  __atomic_fetch_add(&it->second.signals[h.ginSignal], h.ginAmount, __ATOMIC_RELEASE);
  return "";
}

bool RmaNet::ginAnswerWanted(int peer, const Header& h) {
  std::lock_guard<std::mutex> lock(ginMu_);
  auto it = ginTargets_.find(h.ginTarget);
  return it != ginTargets_.end() && it->second.gets != nullptr && it->second.gets->answerWanted(peer, h.ginAmount);
}

void RmaNet::answerGinRequest(int peer, uint32_t ginTarget, const GinGetRequest& req, bool failed) {
  RmaStep end;
  end.peer = peer;
  end.kind = RmaStep::Kind::kPut;
  end.window = req.localWindow;
  end.offset = req.localOffset;
  end.ginTarget = ginTarget;
  end.ginGet = RmaStep::GinGet::kReply;
  end.ginAmount = req.id;
  end.ginLast = true;
  end.ginFailed = failed;
  std::shared_ptr<RmaPosts> p = posts();
  if (p != nullptr && p->expect(0, comm_->waitContext()).isOk()) p->post(end, 0, nullptr);
}

std::string RmaNet::passGinGet(int peer, const Header& h, const char* data) {
  const bool request = (h.ginFlags & kGinGetRequest) != 0;
  GinGetRequest req{};
  if (request) {
    if (h.bytes != sizeof(req)) {
      return strPrintf("a GIN get request from rank %d of %llu bytes (not %zu): dropped", peer,
                       static_cast<unsigned long long>(h.bytes), sizeof(req));
    }
    memcpy(&req, data, sizeof(req));
    if ((req.flags & GinGetRequest::kFence) != 0) {
      // Everything the asker sent before it on this connection has landed (or was dropped with a WARN): the
      // empty answer says so at once, through the sender thread, whatever became of its device communicator.
      answerGinRequest(peer, h.ginTarget, req, false);
      return "";
    }
  }
  std::lock_guard<std::mutex> lock(ginMu_);
  auto it = ginTargets_.find(h.ginTarget);
  if (it == ginTargets_.end() || it->second.gets == nullptr) {
    if (request) answerGinRequest(peer, h.ginTarget, req, true);
    return strPrintf(
        "a GIN get %s rank %d for the device communicator of window #%u, which this rank has destroyed: "
        "dropped",
        request ? "request from" : "answer from", peer, h.ginTarget);
  }
  if (request) {
    it->second.gets->getRequested(peer, h.window, h.offset, req);
  } else {
    it->second.gets->getAnswered(peer, h.ginAmount,
                                 spoiledGin_[static_cast<size_t>(peer)] == 0 && (h.ginFlags & kGinFailed) == 0);
  }
  return "";
}

std::shared_ptr<RmaPosts> RmaNet::posts() {
  std::lock_guard<std::mutex> lock(postsMu_);
  if (!posts_) {
    if (ending_) return nullptr;  // no sender thread is started once the end began (none would join it)
    // What streams may hold staged (BRAID_RMA_STAGE_BYTES), at least a message's worth.
    posts_ =
        std::make_shared<RmaPosts>(rank_, static_cast<uint64_t>(std::max<int64_t>(params::RmaStageBytes(), 65536)));
    sender_ = std::thread([this] { senderLoop(); });
  }
  return posts_;
}

void RmaNet::senderLoop() {
  RmaPosts::Item it;
  while (!stopSender_.load(std::memory_order_acquire)) {
    if (!posts_->next(&it, std::chrono::milliseconds(20))) continue;
    const size_t p = static_cast<size_t>(it.step.peer);
    bool skip;
    {
      std::lock_guard<std::mutex> lock(failedMu_);
      skip = p >= sendFailed_.size() || !sendFailed_[p].empty();
    }
    if (!skip) {
      Status st = send(it.step);
      if (!st.isOk()) {
        BRAID_WARN("rank %d: a one-sided operation posted by a stream failed: %s", rank_, st.message().c_str());
        std::lock_guard<std::mutex> lock(failedMu_);
        sendFailed_[p] = st.message();
      }
    }
    if (it.done) it.done();
    const uint64_t staged = it.staged;
    it = RmaPosts::Item{};  // drops what the step held before counting it finished
    posts_->finished(staged);
  }
}

void RmaNet::stopSender(bool wait) {
  std::shared_ptr<RmaPosts> posts;
  {
    std::lock_guard<std::mutex> lock(postsMu_);
    posts = posts_;
  }
  if (!posts) return;
  if (wait) {
    const Clock::time_point end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSec_));
    int round = 0;
    while (!posts->idle() && !abort_->load(std::memory_order_relaxed) && (timeoutSec_ <= 0 || Clock::now() < end)) {
      proxySleep(round++);
    }
    if (!posts->idle()) {
      BRAID_WARN("rank %d: one-sided operations issued on streams had not been sent when the communicator ended",
                 rank_);
    }
  }
  stopSender_.store(true, std::memory_order_release);
  if (sender_.joinable()) sender_.join();
  const size_t dropped = posts->close();
  if (dropped > 0) {
    BRAID_WARN("rank %d: %zu one-sided operation(s) issued on streams were not sent before the communicator ended",
               rank_, dropped);
  }
}

RmaWindowState RmaNet::apply(int peer, const char* msg, uint64_t received) {
  Header h;
  memcpy(&h, msg, sizeof(h));
  const size_t p = static_cast<size_t>(peer);
  std::string why;
  if (h.magic != kMagic || received < sizeof(h) || h.bytes > received - sizeof(h)) {
    why = strPrintf("a message of %llu bytes from rank %d is not a one-sided message (magic 0x%x, %llu bytes of data)",
                    static_cast<unsigned long long>(received), peer, h.magic, static_cast<unsigned long long>(h.bytes));
  } else if (h.window == kGoodbye) {
    __atomic_store_n(&ended_[p], 1, __ATOMIC_RELEASE);
    // Everything it sent came before: a wait for more from it ends now, naming why.
    std::lock_guard<std::mutex> lock(failedMu_);
    if (failed_[p].empty()) failed_[p] = "it ended its communicator";
    return RmaWindowState::kFound;
  } else if ((h.ginFlags & kGinGetRequest) != 0) {
    // A request lands nothing here: this rank's GIN proxy answers it.
    const std::string dropped = passGinGet(peer, h, msg + sizeof(h));
    if (!dropped.empty()) BRAID_WARN("rank %d: %s", rank_, dropped.c_str());
    return RmaWindowState::kFound;
  } else if ((h.ginFlags & kGinGetAnswer) != 0 && !ginAnswerWanted(peer, h)) {
    // The get ended already (its deadline, or its device communicator's end): the buffer is the user's again.
    if ((h.ginFlags & kGinLast) != 0) {
      BRAID_WARN("rank %d: the answer to a GIN get or fence from rank %d came after it had ended: dropped", rank_,
                 peer);
      spoiledGin_[p] = 0;
    }
    return RmaWindowState::kFound;
  } else if (h.window != kNoWindow) {
    bool inside = true;
    Status landed;
    const bool va = (h.ginFlags & kGinVa) != 0;
    const RmaWindowState state = lookup_(h.window, [&](char* base, uint64_t bytes) {
      if (va) {
        // Not after a dropped message of its operation: a signal implies its data.
        inside = h.offset % sizeof(uint64_t) == 0 && h.offset <= bytes && sizeof(uint64_t) <= bytes - h.offset;
        if (inside && spoiledGin_[p] == 0) {
          landed = comm_->backend().addSignal(reinterpret_cast<uint64_t*>(base + h.offset), h.ginAmount);
        }
        return;
      }
      inside = h.offset <= bytes && h.bytes <= bytes - h.offset;
      // The window buffer may be GPU memory: the backend copies (and has finished at return).
      if (inside && h.bytes > 0) landed = comm_->backend().writeDeviceBlock(base + h.offset, msg + sizeof(h), h.bytes);
    });
    if (state == RmaWindowState::kNotYet) return state;
    if (state == RmaWindowState::kGone) {
      why = strPrintf("a %s from rank %d to window #%u, which this rank has deregistered: dropped",
                      va ? "GIN VA signal" : "put", peer, h.window);
    } else if (va && !inside) {
      why = strPrintf(
          "a GIN VA signal from rank %d at offset %llu of window #%u is not an 8-byte aligned word inside it: dropped",
          peer, static_cast<unsigned long long>(h.offset), h.window);
    } else if (!inside) {
      why = strPrintf("a put from rank %d of %llu bytes at offset %llu passes the end of window #%u: dropped", peer,
                      static_cast<unsigned long long>(h.bytes), static_cast<unsigned long long>(h.offset), h.window);
    } else if (!landed.isOk()) {
      why = strPrintf("a %s from rank %d to window #%u could not be %s: %s", va ? "GIN VA signal" : "put", peer,
                      h.window, va ? "added" : "copied in", landed.message().c_str());
    }
  }
  if (!why.empty()) {
    BRAID_WARN("rank %d: %s (its signal is not applied)", rank_, why.c_str());
    (h.ginTarget != RmaStep::kNoGinTarget ? spoiledGin_ : spoiled_)[p] = 1;
  }
  if (h.ginTarget != RmaStep::kNoGinTarget) {
    // A GIN operation's messages (contiguous on the connection: holdPeer) keep their own record of drops, so an
    // RMA put's pieces interleaved with them are not charged for them, nor they for those.
    if ((h.ginFlags & kGinLast) != 0) {
      if (spoiledGin_[p] == 0 && h.ginSignal != RmaStep::kNoGinSignal) {
        const std::string notAdded = addGinSignal(peer, h);
        if (!notAdded.empty()) BRAID_WARN("rank %d: %s", rank_, notAdded.c_str());
      }
      if ((h.ginFlags & kGinGetAnswer) != 0) {
        // Landed or not, the asker learns the get is over (a flush waits for it).
        const std::string lost = passGinGet(peer, h, nullptr);
        if (!lost.empty()) BRAID_WARN("rank %d: %s", rank_, lost.c_str());
      }
      spoiledGin_[p] = 0;
    }
    return why.empty() ? RmaWindowState::kFound : RmaWindowState::kGone;
  }
  if (h.signal != 0) {
    // A put that lost a piece does not signal: the waiter fails at its deadline instead of reading missing data.
    if (spoiled_[p] == 0 && (static_cast<size_t>(h.slot) + 1) * sizeof(uint64_t) > signalStride_) {
      // Only where the ranks' numRmaCtx or numRmaSig disagreed, which init refuses.
      BRAID_WARN("rank %d: signal word %u from rank %d is past its %zu bytes of signal words: dropped", rank_, h.slot,
                 peer, signalStride_);
    } else if (spoiled_[p] == 0) {
      uint64_t* word = reinterpret_cast<uint64_t*>(signals_ + p * signalStride_ + h.slot * sizeof(uint64_t));
      Status st = comm_->backend().storeSignal(word, h.signal);
      if (!st.isOk())
        BRAID_WARN("rank %d: signal %llu from rank %d could not be set: %s", rank_,
                   static_cast<unsigned long long>(h.signal), peer, st.message().c_str());
    }
    spoiled_[p] = 0;
  }
  return why.empty() ? RmaWindowState::kFound : RmaWindowState::kGone;
}

void RmaNet::proxyLoop() {
  int idle = 0;
  // Not ended by ncclCommAbort or ncclCommRevoke (a revocation sets the abort flag only for a while): messages
  // already sent are still applied, and peers' queues still drain.
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved = false;
    for (size_t q = 0; q < in_.size(); ++q) {
      Connector* c = in_[q].get();
      // After its goodbye nothing more comes: its connection closing next is not driven (nor reported).
      if (c == nullptr || __atomic_load_n(&ended_[q], __ATOMIC_RELAXED) != 0) continue;
      if (idle < 2000) c->drive();  // deep asleep, the transport's progress thread posts and completes receives
      // The failure first: a message that completed before it is still in the FIFO, and is applied first.
      if (idle % 64 == 0 && (c->peerAborted() || !c->failureText().empty()) && !c->recvReady()) {
        noteStopped(q, *c);
        continue;
      }
      while (c->recvReady()) {
        if (apply(static_cast<int>(q), c->recvSlot(), receivedBytes(*c)) == RmaWindowState::kNotYet) break;
        c->recvPost();
        if (c->demandDriven()) c->expectMessages(1);
        moved = true;
      }
    }
    if (moved) {
      idle = 0;
      continue;
    }
    proxySleep(idle);
    if (idle < (1 << 30)) ++idle;
  }
}

void RmaNet::noteStopped(size_t q, const Connector& c) {
  std::lock_guard<std::mutex> lock(failedMu_);
  if (!failed_[q].empty()) return;  // a peer that said goodbye: its connection closing is no news
  const std::string why = c.failureText();
  failed_[q] = why.empty() ? "the connection was aborted" : why;
  BRAID_WARN("rank %d: one-sided messages from rank %d (%s) stopped: %s", rank_, static_cast<int>(q), c.peer().hostname,
             failed_[q].c_str());
}

uint64_t RmaNet::receivedBytes(Connector& c) {
  return loadAcquire(&c.view().ctrl->msgBytes[c.cursor().step % kFifoSlots]);
}

bool RmaNet::drain() {
  // Aborted, or never connected (connect() failed before starting the proxy): nothing to say goodbye on.
  {
    std::lock_guard<std::mutex> lock(postsMu_);
    ending_ = true;
  }
  if (abort_->load(std::memory_order_relaxed) || !proxy_.joinable()) return false;
  stopSender(true);  // what streams issued leaves before the goodbye (one sender per connector at a time)
  // A goodbye to every peer, so its proxy takes the connection closing next for what it is.
  RmaStep bye;
  bye.kind = RmaStep::Kind::kSignal;
  bye.window = kGoodbye;
  bool delivered = true;
  std::vector<uint8_t> told(out_.size(), 0);
  for (size_t q = 0; q < out_.size(); ++q) {
    // A peer that said goodbye first may have closed already: nothing is sent to it (it would fail, with a WARN).
    if (!out_[q] || __atomic_load_n(&ended_[q], __ATOMIC_ACQUIRE) != 0) continue;
    bye.peer = static_cast<int>(q);
    delivered = send(bye).isOk() && delivered;
    told[q] = 1;
  }
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSec_));
  for (size_t q = 0; q < out_.size(); ++q) {
    Connector* c = out_[q].get();
    if (c == nullptr || told[q] == 0) continue;
    int round = 0;
    while (loadAcquire(&c->view().ctrl->head) < c->cursor().step && c->failureText().empty()) {
      if (abort_->load(std::memory_order_relaxed) || (timeoutSec_ > 0 && Clock::now() >= end)) {
        BRAID_WARN("rank %d: one-sided messages to rank %d had not left when the communicator ended", rank_,
                   static_cast<int>(q));
        delivered = false;
        break;
      }
      c->drive();
      proxySleep(round++);
    }
  }
  return delivered;
}

}  // namespace braid
