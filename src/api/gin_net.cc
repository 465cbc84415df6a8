#include "src/api/gin_net.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "include/nccl_device.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/core/comm.h"
#include "src/core/rma_net.h"
#include "src/core/teams.h"
#include "src/core/windows.h"

namespace braid {
namespace {

constexpr size_t kStageBytes = 1 << 20;  // a source is read and sent a piece of this size at a time
constexpr size_t kDescBytes = NCCL_BRAID_GIN_NET_SLOTS * sizeof(ncclBraidGinDesc);
constexpr size_t kDoneAt = kDescBytes;  // its own cache line
static_assert(kDescBytes % 64 == 0, "the done word starts a cache line");
constexpr size_t kSignalsAt = kDescBytes + 64;  // then the signals' words, then the counters'

}  // namespace

std::string ginNetRefusal(const Communicator& c) {
  if (c.backend().kind() != BackendKind::kCuda) return "the communicator is not a CUDA communicator";
  if (params::RmaNet() == 0) return "BRAID_RMA_NET=0 turned off one-sided messages to the ranks of other hosts";
  // Decided from every rank's host, so every rank decides alike: each host's ranks must be exactly one LSA team
  // (teams are blocks of consecutive ranks of one size). One pass: each rank against its team's first rank and its
  // host's first rank.
  const int size = lsaTeam(c).nRanks;
  std::unordered_map<uint64_t, int> firstOnHost;
  for (int q = 0; q < c.nranks(); ++q) {
    const uint64_t host = c.peer(q).hostHash;
    const int teamFirst = q - q % size;
    const int seen = firstOnHost.emplace(host, q).first->second;
    const bool splitTeam = c.peer(teamFirst).hostHash != host;
    if (splitTeam || seen / size != q / size) {
      return strPrintf(
          "ranks %d and %d are %s, and braid's network GIN needs each host's ranks to be one LSA team (it reaches "
          "ranks of other hosts only)",
          splitTeam ? teamFirst : seen, q,
          splitTeam ? "in one LSA team but on different hosts"
                    : "on one host but in different LSA teams (no load/store reach)");
    }
  }
  return "";
}

GinNet::GinNet(Communicator* comm, RmaNet* net, uint32_t resourceWindow)
    : comm_(comm),
      backend_(comm->backend()),
      net_(net),
      resourceWindow_(resourceWindow),
      rank_(comm->rank()),
      timeoutSec_(comm->waitContext().timeoutSec),
      unfenced_(static_cast<size_t>(comm->nranks()), 0) {}

Result<std::unique_ptr<GinNet>> GinNet::create(Communicator* comm, RmaNet* net, uint32_t resourceWindow,
                                               uint32_t signals, uint32_t counters) {
  std::unique_ptr<GinNet> g(new GinNet(comm, net, resourceWindow));
  const size_t hostBytes = kSignalsAt + (size_t{signals} + counters) * sizeof(uint64_t);
  BRAID_ASSIGN_OR_RETURN(void* host, g->backend_.allocHostMapped(hostBytes));
  g->host_ = static_cast<char*>(host);
  g->descs_ = reinterpret_cast<ncclBraidGinDesc*>(g->host_);
  g->done_ = reinterpret_cast<uint64_t*>(g->host_ + kDoneAt);
  g->signals_ = reinterpret_cast<uint64_t*>(g->host_ + kSignalsAt);
  g->counters_ = g->signals_ + signals;
  g->counterCount_ = counters;
  BRAID_ASSIGN_OR_RETURN(void* stage, g->backend_.allocHostMapped(kStageBytes));
  g->stage_ = static_cast<char*>(stage);
  BRAID_ASSIGN_OR_RETURN(void* dev, g->backend_.allocDeviceBlock(sizeof(ncclBraidGinNet)));
  g->device_ = static_cast<ncclBraidGinNet*>(dev);
  ncclBraidGinNet image{};
  image.claimed = 0;
  image.descs = g->descs_;
  image.done = g->done_;
  image.signals = g->signals_;
  image.counters = g->counters_;
  image.descBytes = sizeof(ncclBraidGinDesc);
  BRAID_RETURN_IF_ERROR(g->backend_.writeDeviceBlock(g->device_, &image, sizeof(image)));
  net->addGinTarget(resourceWindow, g->signals_, signals, g.get());
  GinNet* p = g.get();
  g->proxy_ = std::thread([p] { p->loop(); });
  BRAID_INFO(kLogInit | kLogNet,
             "rank %d: GIN toward ranks of other LSA teams by proxy (one-sided messages): %u signals, %u counters, "
             "%u descriptor slots",
             comm->rank(), signals, counters, NCCL_BRAID_GIN_NET_SLOTS);
  return g;
}

GinNet::~GinNet() {
  if (proxy_.joinable()) {
    // What kernels queued before the end is sent first, for at most BRAID_TIMEOUT (or until an abort).
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec_ > 0 ? timeoutSec_ : 1e9);
    int rounds = 0;
    while (true) {
      const uint64_t claimed = [&] {
        ncclBraidGinNet now{};
        return backend_.readDeviceBlock(&now, device_, sizeof(now)).isOk() ? now.claimed : 0;
      }();
      if (__atomic_load_n(done_, __ATOMIC_ACQUIRE) >= claimed || comm_->abortFlag().load() ||
          std::chrono::steady_clock::now() >= end) {
        break;
      }
      proxySleep(rounds);
      if (rounds < (1 << 30)) ++rounds;
    }
    stop_.store(true, std::memory_order_release);
    proxy_.join();
    // Gets peers asked for and the proxy did not answer: a failed end each, so their flushes go on now.
    std::deque<IncomingGet> left;
    {
      std::lock_guard<std::mutex> lock(getsMu_);
      left.swap(incoming_);
    }
    for (const IncomingGet& g : left) (void)answer(g, true);
  }
  if (net_ != nullptr && host_ != nullptr) net_->removeGinTarget(resourceWindow_);
  if (device_ != nullptr) backend_.freeDeviceBlock(device_);
  if (stage_ != nullptr) backend_.freeHostMapped(stage_);
  if (host_ != nullptr) backend_.freeHostMapped(host_);
}

void GinNet::loop() {
  uint64_t next = 0;
  int idle = 0;
  std::vector<uint8_t> failed(static_cast<size_t>(comm_->nranks()), 0);  // a send to it failed: nothing more goes
  while (!stop_.load(std::memory_order_acquire)) {
    bool worked = answerGets();
    expireGets();
    ncclBraidGinDesc& slot = descs_[next % NCCL_BRAID_GIN_NET_SLOTS];
    if (__atomic_load_n(&slot.seq, __ATOMIC_ACQUIRE) == next + 1) {
      worked = true;
      ncclBraidGinDesc d;
      std::memcpy(&d, &slot, sizeof(d));
      const bool known = d.peer >= 0 && d.peer < comm_->nranks();
      if (d.op == ncclBraidGinNetFence) {
        fence(next, failed);
      } else if (known && failed[static_cast<size_t>(d.peer)] == 0) {
        Status st = serve(next, d);
        if (!st.isOk()) {
          failed[static_cast<size_t>(d.peer)] = 1;  // each later descriptor would wait BRAID_TIMEOUT again
          BRAID_WARN("rank %d: a GIN operation toward rank %d failed, and later ones toward it are dropped: %s", rank_,
                     d.peer, st.message().c_str());
        }
      } else if (!known) {
        BRAID_WARN("rank %d: a GIN descriptor names rank %d, not a rank of this communicator: dropped", rank_, d.peer);
      }
      if (d.counter != NCCL_BRAID_GIN_NONE && d.counter < counterCount_) {
        __atomic_fetch_add(&counters_[d.counter], 1, __ATOMIC_RELEASE);  // its source is no longer needed
      }
      ++next;
    }
    publishDone(next);  // the slot may be reused, and flush sees it
    if (worked) {
      idle = 0;
    } else {
      proxySleep(idle);
      if (idle < (1 << 30)) ++idle;
    }
  }
}

void GinNet::publishDone(uint64_t next) {
  uint64_t upTo = next;
  {
    std::lock_guard<std::mutex> lock(getsMu_);
    if (!outstanding_.empty()) upTo = std::min(upTo, outstanding_.begin()->first.first);
  }
  if (upTo > __atomic_load_n(done_, __ATOMIC_RELAXED)) __atomic_store_n(done_, upTo, __ATOMIC_RELEASE);
}

void GinNet::getRequested(int peer, uint32_t window, uint64_t offset, const GinGetRequest& request) {
  std::lock_guard<std::mutex> lock(getsMu_);
  incoming_.push_back(IncomingGet{peer, window, offset, request});
}

bool GinNet::answerWanted(int peer, uint64_t id) {
  std::lock_guard<std::mutex> lock(getsMu_);
  return outstanding_.count(GetKey{id, peer}) != 0;
}

void GinNet::getAnswered(int peer, uint64_t id, bool ok) {
  std::lock_guard<std::mutex> lock(getsMu_);
  auto it = outstanding_.find(GetKey{id, peer});
  if (it == outstanding_.end()) return;  // ended at its deadline already
  const bool fence = it->second.fence;
  outstanding_.erase(it);
  if (!ok) {
    // A fence's answer is never a failure (the messenger answers it itself), but a malformed one is said so.
    BRAID_WARN("rank %d: a GIN %s rank %d %s (the WARN before says why); it goes on", rank_,
               fence ? "fence toward" : "get from", peer, fence ? "failed" : "did not land");
  }
}

void GinNet::expireGets() {
  const auto now = std::chrono::steady_clock::now();
  if (now < nextExpiry_) return;
  nextExpiry_ = now + std::chrono::milliseconds(5);  // a few checks per deadline's resolution, not one per poll
  std::lock_guard<std::mutex> lock(getsMu_);
  if (outstanding_.empty()) return;
  const bool aborted = comm_->abortFlag().load();
  std::map<int, Status> health;  // one look per peer
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    const OutstandingGet& g = it->second;
    const int peer = it->first.second;
    auto h = health.find(peer);
    if (h == health.end()) h = health.emplace(peer, net_->health(peer)).first;
    if (aborted || now >= g.deadline || !h->second.isOk()) {
      BRAID_WARN("rank %d: a GIN %s rank %d ends unanswered (%s): %s", rank_, g.fence ? "fence toward" : "get from",
                 peer, g.fence ? "the puts before it may not have landed" : "its data did not land",
                 aborted             ? "the communicator was aborted"
                 : !h->second.isOk() ? h->second.message().c_str()
                                     : "no answer within BRAID_TIMEOUT");
      it = outstanding_.erase(it);
    } else {
      ++it;
    }
  }
}

bool GinNet::answerGets() {
  std::deque<IncomingGet> todo, later;
  {
    std::lock_guard<std::mutex> lock(getsMu_);
    todo.swap(incoming_);
  }
  bool answered = false;
  for (const IncomingGet& g : todo) {
    // The asker's part of the window's registration may finish before this rank's: its get waits for it here.
    if (!comm_->windows().registeredYet(g.window)) {
      later.push_back(g);
      continue;
    }
    answered = true;
    Status st = answer(g);
    if (!st.isOk()) {
      BRAID_WARN("rank %d: the answer to a GIN get from rank %d could not be sent (it ends at its deadline): %s", rank_,
                 g.peer, st.message().c_str());
    }
  }
  if (!later.empty()) {
    std::lock_guard<std::mutex> lock(getsMu_);
    incoming_.insert(incoming_.begin(), later.begin(), later.end());
  }
  return answered;
}

Status GinNet::ask(uint64_t index, const ncclBraidGinDesc& d) {
  GinGetRequest req{};
  req.localWindow = static_cast<uint32_t>(d.src);
  req.localOffset = d.amount;
  req.bytes = d.bytes;
  req.id = index;
  // Where the answer goes must be this rank's window, whole: a get that could not land is not asked for.
  Status into = comm_->windows().withRegistered(req.localWindow, req.localOffset, req.bytes);
  if (!into.isOk()) {
    BRAID_WARN("rank %d: a GIN get of %llu bytes from rank %d into offset %llu of window #%u is not sent: %s", rank_,
               static_cast<unsigned long long>(req.bytes), d.peer, static_cast<unsigned long long>(req.localOffset),
               req.localWindow, into.message().c_str());
    return Status::ok();
  }
  return request(index, d.peer, d.window, d.offset, req);
}

void GinNet::fence(uint64_t index, const std::vector<uint8_t>& failed) {
  GinGetRequest req{};
  req.localWindow = RmaStep::kNoWindow;
  req.flags = GinGetRequest::kFence;
  req.id = index;
  for (int p = 0; p < comm_->nranks(); ++p) {
    const size_t q = static_cast<size_t>(p);
    if (unfenced_[q] == 0 || failed[q] != 0) continue;  // a failed peer's puts were reported lost already
    unfenced_[q] = 0;
    Status st = request(index, p, RmaStep::kNoWindow, 0, req);
    if (!st.isOk()) {
      BRAID_WARN("rank %d: a GIN fence toward rank %d could not be sent (the puts before it may not have landed): %s",
                 rank_, p, st.message().c_str());
    }
  }
}

Status GinNet::request(uint64_t index, int peer, uint32_t window, uint64_t offset, const GinGetRequest& req) {
  const auto deadline = timeoutSec_ > 0 ? std::chrono::steady_clock::now() +
                                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double>(timeoutSec_))
                                        : std::chrono::steady_clock::time_point::max();
  const bool isFence = (req.flags & GinGetRequest::kFence) != 0;
  {
    std::lock_guard<std::mutex> lock(getsMu_);  // before the request leaves: the answer may come at once
    outstanding_[GetKey{index, peer}] = OutstandingGet{deadline, isFence};
  }
  RmaStep s;
  s.peer = peer;
  s.kind = RmaStep::Kind::kPut;
  s.window = window;
  s.offset = offset;
  s.src = &req;
  s.bytes = sizeof(req);
  s.ginTarget = resourceWindow_;
  s.ginGet = RmaStep::GinGet::kRequest;
  s.ginLast = true;
  Status st = net_->send(s);
  if (!st.isOk()) {
    std::lock_guard<std::mutex> lock(getsMu_);
    outstanding_.erase(GetKey{index, peer});
  }
  return st;
}

Status GinNet::answer(const IncomingGet& g, bool refuse) {
  if (!net_->serves(g.peer)) return invalidUsage("rank %d has no one-sided messages to rank %d", rank_, g.peer);
  RmaStep s;
  s.peer = g.peer;
  s.kind = RmaStep::Kind::kPut;
  s.window = g.request.localWindow;
  s.ginTarget = resourceWindow_;
  s.ginGet = RmaStep::GinGet::kReply;
  s.ginAmount = g.request.id;
  const uint64_t bytes = g.request.bytes;
  Windows& windows = comm_->windows();
  // The whole range first, so a get past the end of the window is refused before any of it is sent.
  Status readable = refuse ? invalidUsage("the device communicator ended before it was answered")
                           : windows.withRegistered(g.window, g.offset, bytes);
  std::unique_lock<std::recursive_mutex> hold = net_->holdPeer(g.peer);
  uint64_t done = 0;
  do {
    const uint64_t len = readable.isOk() ? std::min<uint64_t>(kStageBytes, bytes - done) : 0;
    if (len > 0) {
      readable = windows.withRegistered(g.window, g.offset + done, len,
                                        [&](char* at) { return backend_.readDeviceBlock(stage_, at, len); });
    }
    RmaStep piece = s;
    piece.src = stage_;
    piece.bytes = readable.isOk() ? len : 0;
    piece.offset = g.request.localOffset + done;
    piece.ginFailed = !readable.isOk();
    piece.ginLast = piece.ginFailed || done + len == bytes;
    if (piece.ginFailed) {
      BRAID_WARN("rank %d: a GIN get from rank %d of %llu bytes at offset %llu of window #%u cannot be answered: %s",
                 rank_, g.peer, static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(g.offset),
                 g.window, readable.message().c_str());
    }
    BRAID_RETURN_IF_ERROR(net_->send(piece));
    if (piece.ginLast) break;
    done += len;
  } while (done < bytes);
  return Status::ok();
}

Status GinNet::serve(uint64_t index, const ncclBraidGinDesc& d) {
  if (!net_->serves(d.peer)) {
    return invalidUsage("rank %d has no one-sided messages to rank %d (not a rank of another host)", rank_, d.peer);
  }
  if (d.op == ncclBraidGinNetGet) return ask(index, d);
  if (d.op != ncclBraidGinNetPut && d.op != ncclBraidGinNetValue && d.op != ncclBraidGinNetSignal) {
    return internalError("rank %d: a GIN descriptor with operation %u", rank_, d.op);
  }
  RmaStep s;
  s.peer = d.peer;
  s.ginTarget = resourceWindow_;  // the same registration number on every rank
  const bool va = d.signal == NCCL_BRAID_GIN_VA;
  if (d.signal != NCCL_BRAID_GIN_NONE && !va) {
    s.ginSignal = d.signal;
    s.ginAmount = d.amount;
  }
  // The operation's messages, then its VA signal's, contiguous on the peer's connection: the VA signal ends it.
  std::unique_lock<std::recursive_mutex> hold = net_->holdPeer(d.peer);
  // Writes to the peer's memory (data, or a VA signal's word): a later fence asks the peer whether they landed.
  if (d.op != ncclBraidGinNetSignal || va) unfenced_[static_cast<size_t>(d.peer)] = 1;
  if (d.op == ncclBraidGinNetSignal) {
    if (!va) {
      s.kind = RmaStep::Kind::kSignal;
      s.ginLast = true;
      return net_->send(s);
    }
  } else {
    BRAID_RETURN_IF_ERROR(sendData(d, s, !va));
  }
  if (!va) return Status::ok();
  RmaStep add;
  add.peer = d.peer;
  add.kind = RmaStep::Kind::kPut;
  add.window = d.vaWindow;
  add.offset = d.vaOffset;
  add.ginTarget = resourceWindow_;
  add.ginAmount = d.amount;
  add.ginVa = true;
  add.ginLast = true;
  return net_->send(add);
}

Status GinNet::sendData(const ncclBraidGinDesc& d, const RmaStep& s0, bool last) {
  RmaStep s = s0;
  s.kind = RmaStep::Kind::kPut;
  s.window = d.window;
  if (d.op == ncclBraidGinNetValue) {
    if (d.bytes > sizeof(d.src)) return invalidArgument("a GIN value of %llu bytes", (unsigned long long)d.bytes);
    std::memcpy(stage_, &d.src, sizeof(d.src));
    s.src = stage_;
    s.bytes = d.bytes;
    s.offset = d.offset;
    s.ginLast = last;
    return net_->send(s);
  }
  // Pieces of the stage; the last ends the operation (and carries its indexed signal) unless a VA signal follows.
  uint64_t done = 0;
  do {
    const uint64_t len = std::min<uint64_t>(kStageBytes, d.bytes - done);
    if (len > 0) {
      BRAID_RETURN_IF_ERROR(
          backend_.readDeviceBlock(stage_, reinterpret_cast<const char*>(static_cast<uintptr_t>(d.src)) + done, len)
              .withContext("reading a GIN put's source"));
    }
    RmaStep piece = s;
    piece.src = stage_;
    piece.bytes = len;
    piece.offset = d.offset + done;
    piece.ginLast = last && done + len == d.bytes;
    BRAID_RETURN_IF_ERROR(net_->send(piece));
    done += len;
  } while (done < d.bytes);
  return Status::ok();
}

}  // namespace braid
