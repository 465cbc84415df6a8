#include "src/core/windows.h"

#include <algorithm>
#include <cstring>

#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/core/comm.h"
#include "src/core/teams.h"
#include "src/core/window_directory.h"

namespace braid {
namespace {

// What each rank tells the others when a window is registered.
struct Offer {
  WindowDesc desc;
  int32_t enabled = 0;  // NCCL_WIN_ENABLE
  int32_t failed = 0;   // this rank could not offer its buffer: `why`
  char why[200] = {};
};

constexpr int kKnownFlags = kWinCollSymmetric | kWinStrictOrdering | kWinGinOnly | kWinCftCounted;
// Each sender's signal words start on their own line of a signal area, so senders never share a cache line.
constexpr size_t kSignalLine = 64;

// Why [buff, buff + bytes) with `flags` cannot be a window, or "" (checked inside the exchange, so a rank with a bad
// argument fails its peers at once instead of leaving them waiting).
std::string badArguments(const void* buff, int flags) {
  if ((flags & ~kKnownFlags) != 0) {
    return strPrintf(
        "winFlags=0x%x has bits braid does not know (NCCL_WIN_COLL_SYMMETRIC 0x%x, STRICT_ORDERING 0x%x, "
        "GIN_ONLY 0x%x, CFT_COUNTED 0x%x)",
        static_cast<unsigned>(flags), kWinCollSymmetric, kWinStrictOrdering, kWinGinOnly, kWinCftCounted);
  }
  if ((flags & kWinCollSymmetric) != 0 && reinterpret_cast<uintptr_t>(buff) % kWinRequiredAlignment != 0) {
    return strPrintf(
        "buff=%p is not aligned to NCCL_WIN_REQUIRED_ALIGNMENT (%zu bytes), which NCCL_WIN_COLL_SYMMETRIC "
        "needs: register the allocation's start (ncclMemAlloc returns aligned memory)",
        buff, kWinRequiredAlignment);
  }
  return "";
}

// One-sided operations before the signal area exists, with NCCL 2.31's remedy.
Status noSignalArea() {
  return invalidUsage(
      "the communicator has no one-sided signal area yet: its first ncclCommWindowRegister creates it, or init does "
      "with rmaEagerInit=1 in its config (or NCCL_RMA_EAGER_INIT=1)");
}

}  // namespace

Windows::~Windows() {
  net_.reset();  // its queued puts leave, its proxy stops writing into the windows and the signal area
  std::map<const ncclWindow_vidmem*, std::unique_ptr<Window>> left;
  {
    std::unique_lock<std::mutex> lock(mu_);
    left.swap(table_);
    byIndex_.clear();
    unpinned_.wait(lock, [&left] {
      for (const auto& e : left) {
        if (e.second->inUse != 0) return false;
      }
      return true;
    });
  }
  for (auto& e : left) {
    if (e.second->registration != nullptr) (void)comm_->deregisterBuffer(e.second->registration);
    unlistWindow(e.second->handle);
    comm_->backend().freeDeviceBlock(e.second->handle);
  }
  left.clear();  // unmaps the peers' buffers
  signals_.reset();
  if (signalMem_ != nullptr) comm_->backend().freeWindowMemory(signalMem_);
}

Status Windows::exchange(void* base, size_t bytes, Window* w, bool* disabled) {
  const int n = comm_->nranks(), me = comm_->rank();
  const PeerInfo& self = comm_->peer(me);
  int others = 0;
  for (int q = 0; q < n; ++q) {
    const PeerInfo& p = comm_->peer(q);
    others += p.hostHash == self.hostHash && p.pid != self.pid ? 1 : 0;
  }
  std::vector<Offer> all(static_cast<size_t>(n));
  Offer& mine = all[static_cast<size_t>(me)];
  mine = Offer{};
  mine.desc.pid = self.pid;
  mine.desc.hostHash = self.hostHash;
  mine.enabled = params::WinEnable() != 0 ? 1 : 0;
  std::string why = badArguments(base, w->flags);
  Status failure = why.empty() ? Status::ok() : invalidArgument("%s", why.c_str());
  if (failure.isOk() && (w->flags & kWinCftCounted) != 0) {
    failure = invalidUsage(
        "winFlags=0x%x asks for NCCL_WIN_CFT_COUNTED (0x%x): the Compute Fabric Transport is not built in braid; "
        "register without it",
        static_cast<unsigned>(w->flags), kWinCftCounted);
  }
  bool offered = false;
  if (failure.isOk() && mine.enabled != 0) {
    Result<WindowDesc> d = comm_->backend().exportWindow(base, bytes, others);
    if (d.isOk()) {
      mine.desc = d.value();
      mine.desc.pid = self.pid;
      mine.desc.hostHash = self.hostHash;
      mine.desc.device = comm_->backend().cudaDevice();
      mine.desc.addr = reinterpret_cast<uint64_t>(base);
      mine.desc.bytes = bytes;
      offered = true;
    } else {
      failure = d.status();
    }
  }
  if (!failure.isOk()) {
    mine.failed = 1;
    snprintf(mine.why, sizeof(mine.why), "%s", failure.message().c_str());
  }
  BRAID_RETURN_IF_ERROR(comm_->bootstrap()->allGather(all.data(), sizeof(Offer)).withContext("exchanging a window"));
  auto withdraw = [&] {
    if (offered) comm_->backend().withdrawWindow(mine.desc);
  };
  *disabled = false;
  for (int q = 0; q < n; ++q) {
    const Offer& o = all[static_cast<size_t>(q)];
    if (o.enabled == 0) {
      withdraw();
      *disabled = true;
      BRAID_INFO(kLogReg, "rank %d: no window registered: %s=0 on rank %d", me, params::kWinEnable.name, q);
      return Status::ok();
    }
  }
  for (int q = 0; q < n; ++q) {
    const Offer& o = all[static_cast<size_t>(q)];
    if (o.failed == 0) continue;
    withdraw();
    if (q == me) return failure;
    return invalidUsage("rank %d could not register its part of the window: %.*s", q, static_cast<int>(sizeof(o.why)),
                        o.why);
  }
  w->peers.assign(static_cast<size_t>(n), WindowPeer{});
  w->peerBytes.assign(static_cast<size_t>(n), 0);
  int reached = 0;
  for (int q = 0; q < n; ++q) {
    const WindowDesc& d = all[static_cast<size_t>(q)].desc;
    w->peerBytes[static_cast<size_t>(q)] = d.bytes;
    WindowPeer& p = w->peers[static_cast<size_t>(q)];
    if (q == me) {
      p.at = static_cast<char*>(base);
    } else {
      p = comm_->backend().importWindow(mine.desc, d);
    }
    if (p.at != nullptr) {
      ++reached;
    } else {
      BRAID_INFO(kLogReg, "rank %d: rank %d's window buffer is out of load/store reach: %s", me, q, p.why.c_str());
    }
  }
  // Every rank has fetched what it needed once all have passed here: the offers can end.
  Status agreed = comm_->bootstrap()->barrier();
  withdraw();
  BRAID_RETURN_IF_ERROR(agreed.withContext("after mapping a window"));
  BRAID_INFO(kLogReg, "rank %d: window of %zu bytes at %p reaches %d of %d ranks by load/store", me, bytes, base,
             reached, n);
  return Status::ok();
}

RmaWindowState Windows::pinned(uint32_t index, const std::function<void(const Window&)>& use) {
  Window* w = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = byIndex_.find(index);
    if (it == byIndex_.end()) return index < registered_ ? RmaWindowState::kGone : RmaWindowState::kNotYet;
    w = it->second;
    ++w->inUse;
  }
  use(*w);
  std::lock_guard<std::mutex> lock(mu_);
  if (--w->inUse == 0) unpinned_.notify_all();
  return RmaWindowState::kFound;
}

Status Windows::withRegistered(uint32_t index, uint64_t offset, uint64_t bytes,
                               const std::function<Status(char*)>& use) {
  Status result;
  const RmaWindowState state = pinned(index, [&](const Window& w) {
    if (offset > w.bytes || bytes > w.bytes - offset) {
      result = invalidArgument("%llu bytes at offset %llu pass the end of window #%u on rank %d (%zu bytes)",
                               static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(offset), index,
                               comm_->rank(), w.bytes);
      return;
    }
    if (use) result = use(static_cast<char*>(w.userPtr) + offset);
  });
  if (state != RmaWindowState::kFound) {
    return invalidArgument("window #%u is not registered on rank %d", index, comm_->rank());
  }
  return result;
}

bool Windows::registeredYet(uint32_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index < registered_;
}

uint32_t Windows::slotOf(SignalId id) const {
  return static_cast<uint32_t>(id.ctx * numRmaSig_ + id.sig);
}

size_t Windows::signalOffset(int from, uint32_t slot) const {
  return static_cast<size_t>(from) * signalStride_ + slot * sizeof(uint64_t);
}

size_t Windows::countAt(int peer, uint32_t slot) const {
  return static_cast<size_t>(peer) * signalSlots_ + slot;
}

Status Windows::ensureSignals() {
  if (signals_) return Status::ok();
  const size_t n = static_cast<size_t>(comm_->nranks());
  // Every rank has the same numRmaCtx and numRmaSig (agreed at init), so a sender finds its words at the same offset
  // in every peer's area.
  const CommConfig& cfg = comm_->config();
  const size_t slots = std::max<size_t>(1, static_cast<size_t>(cfg.numRmaCtx) * static_cast<size_t>(cfg.numRmaSig));
  const size_t stride = (slots * sizeof(uint64_t) + kSignalLine - 1) / kSignalLine * kSignalLine;
  const size_t bytes = n * stride;
  Result<void*> area = comm_->backend().allocWindowMemory(bytes);
  if (!area.isOk()) {
    return area.status().withContext(
        strPrintf("the one-sided signal area: %zu bytes (%zu ranks x numRmaCtx %d x numRmaSig %d words)", bytes, n,
                  cfg.numRmaCtx, cfg.numRmaSig));
  }
  void* mem = area.take();
  auto w = std::make_unique<Window>();
  bool disabled = false;
  Status st = exchange(mem, bytes, w.get(), &disabled);
  if (!st.isOk() || disabled) {
    comm_->backend().freeWindowMemory(mem);
    return st;  // disabled: no signal area (nor windows) on any rank
  }
  // Ranks of other hosts are out of reach on every rank alike: messages carry the one-sided operations toward them
  // (rma_net.h). Connected here, while every rank is in the registration.
  std::vector<int> remote;
  const PeerInfo& self = comm_->peer(comm_->rank());
  for (int q = 0; q < comm_->nranks(); ++q) {
    if (w->peers[static_cast<size_t>(q)].at == nullptr && comm_->peer(q).hostHash != self.hostHash) remote.push_back(q);
  }
  bool connect = !remote.empty();
  if (connect) {
    // Whether to connect must be the same on every rank (a rank connecting alone would wait for the others).
    std::vector<int32_t> knob(static_cast<size_t>(n), 0);
    knob[static_cast<size_t>(comm_->rank())] = params::RmaNet() != 0 ? 1 : 0;
    Status same = comm_->bootstrap()->allGather(knob.data(), sizeof(int32_t));
    for (size_t q = 0; same.isOk() && q < n; ++q) {
      if (knob[q] != knob[0]) {
        same = invalidUsage("BRAID_RMA_NET is %d on rank 0 and %d on rank %zu: set it the same on every rank", knob[0],
                            knob[q], q);
      }
    }
    if (!same.isOk()) {
      comm_->backend().freeWindowMemory(mem);
      return same;
    }
    connect = knob[0] != 0;
  }
  if (connect) {
    auto lookup = [this](uint32_t index, const std::function<void(char*, uint64_t)>& apply) {
      // A deregistration waits until the data is in; nothing else does.
      return pinned(index, [&](const Window& w) { apply(static_cast<char*>(w.userPtr), w.bytes); });
    };
    Result<std::unique_ptr<RmaNet>> net =
        RmaNet::connect(comm_, remote, static_cast<char*>(mem), stride, std::move(lookup));
    // All or nothing: a rank that kept its signal area while another dropped its own would pair that rank's next
    // signal-area exchange with a window's.
    Status agreed = comm_->bootstrap()->agreeAllOrNothing(
        net.status(), "connecting one-sided messages", [](int q, const Status& theirs) {
          return invalidUsage("rank %d could not connect its one-sided messages: %s", q, theirs.message().c_str());
        });
    if (!agreed.isOk()) {
      if (net.isOk()) net.take().reset();
      comm_->backend().freeWindowMemory(mem);
      return agreed.withContext(
          "connecting one-sided messages to the ranks of other hosts (BRAID_RMA_NET=0 turns "
          "them off)");
    }
    net_ = net.take();
  }
  signalMem_ = mem;
  signals_ = std::move(w);
  signalStride_ = stride;
  numRmaSig_ = cfg.numRmaSig;
  signalSlots_ = slots;
  sent_.assign(n * slots, 0);
  awaited_.assign(n * slots, 0);
  BRAID_INFO(kLogInit | kLogReg, "rank %d: one-sided signal area of %zu bytes: %d contexts x %d signals per rank",
             comm_->rank(), bytes, cfg.numRmaCtx, cfg.numRmaSig);
  return Status::ok();
}

Status Windows::bindMulticast(Window* w) {
  // Multicast spans every rank of the communicator, so it serves the LSA team only where that team is the world
  // (the same on every rank, as is everything this decides on).
  const Team lsa = lsaTeam(*comm_);
  if (lsa.nRanks != comm_->nranks()) {
    w->mcWhy = strPrintf(
        "the LSA team (%d ranks) is not the whole communicator (%d): braid's multicast objects span "
        "every rank",
        lsa.nRanks, comm_->nranks());
    return Status::ok();
  }
  // Every rank binds as many bytes: the smallest buffer's (ranks may register different sizes).
  const uint64_t bindBytes = commonBytes(*w);
  BRAID_ASSIGN_OR_RETURN(w->mc, comm_->backend().bindWindowMulticast(w->userPtr, bindBytes, &w->mcWhy));
  if (w->mc.base != nullptr) {
    BRAID_INFO(kLogReg | kLogNvls, "rank %d: window at %p: NVLS multicast over %d ranks (%llu bytes)", comm_->rank(),
               w->userPtr, comm_->nranks(), static_cast<unsigned long long>(bindBytes));
  } else {
    BRAID_INFO(kLogReg | kLogNvls, "rank %d: window at %p has no multicast mapping: %s", comm_->rank(), w->userPtr,
               w->mcWhy.c_str());
  }
  return Status::ok();
}

Status Windows::publish(Window* w) {
  const Team lsa = lsaTeam(*comm_);
  const int me = comm_->rank();
  const std::vector<int> members = lsaWorldRanks();
  const size_t header = (sizeof(WindowDescriptor) + alignof(char*) - 1) / alignof(char*) * alignof(char*);
  const size_t bytes = header + static_cast<size_t>(lsa.nRanks) * sizeof(char*);
  BRAID_ASSIGN_OR_RETURN(void* block, comm_->backend().allocDeviceBlock(bytes));
  std::vector<char> image(bytes, 0);
  WindowDescriptor d;
  d.winHost = w;
  d.localBase = static_cast<char*>(w->userPtr);
  d.lsaBases = reinterpret_cast<char* const*>(static_cast<char*>(block) + header);
  d.size = w->bytes;
  d.worldRank = me;
  d.lsaRank = lsa.rank;
  d.lsaSize = lsa.nRanks;
  d.braidMagic = kDescriptorMagic;
  d.lsaMultimem = w->mc.base;
  d.registration = w->index;
  std::memcpy(image.data(), &d, sizeof(d));
  for (size_t i = 0; i < members.size(); ++i) {
    char* at = w->peers[static_cast<size_t>(members[i])].at;
    std::memcpy(image.data() + header + i * sizeof(char*), &at, sizeof(at));
  }
  Status st = comm_->backend().writeDeviceBlock(block, image.data(), bytes);
  if (!st.isOk()) {
    comm_->backend().freeDeviceBlock(block);
    return st;
  }
  w->handle = static_cast<ncclWindow_vidmem*>(block);
  return Status::ok();
}

Result<ncclWindow_vidmem*> Windows::add(void* buff, size_t bytes, int flags, bool multicast) {
  // The signal area comes first, on every rank alike (its exchange is collective too).
  BRAID_RETURN_IF_ERROR(ensureSignals().withContext("setting up the one-sided signal area"));
  auto w = std::make_unique<Window>();
  w->userPtr = buff;
  w->bytes = bytes;
  w->flags = flags;
  bool disabled = false;
  BRAID_RETURN_IF_ERROR(exchange(buff, bytes, w.get(), &disabled));
  if (disabled) return static_cast<ncclWindow_vidmem*>(nullptr);
  if (multicast) {
    BRAID_RETURN_IF_ERROR(bindMulticast(w.get()));
  } else {
    w->mcWhy = "not asked for";
  }
  // Collectives on the buffer read it in place where the backend can (as a registered buffer).
  Result<void*> reg = comm_->registerBuffer(buff, bytes);
  if (reg.isOk()) {
    w->registration = reg.value();
  } else {
    BRAID_INFO(kLogReg, "rank %d: window at %p is not registered for collectives: %s", comm_->rank(), buff,
               reg.status().message().c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    w->index = registered_;  // counted below once every rank has it (registration is collective, one at a time)
  }
  Status done = publish(w.get()).withContext("writing the window's device descriptor");
  if (done.isOk()) {
    std::lock_guard<std::mutex> lock(mu_);
    done = deviceTableLocked().status();
    if (done.isOk()) done = deviceTable_->add(buff, bytes, w->handle);
    if (!done.isOk()) {
      comm_->backend().freeDeviceBlock(w->handle);
      w->handle = nullptr;
      done = done.withContext("listing the window for ncclFindWindow");
    }
  }
  // All or nothing: a window registered on some ranks only would leave the others' kernels and multicast object
  // with a member that is not there.
  Status agreed = comm_->bootstrap()->agreeAllOrNothing(done, "agreeing on a window", [](int q, const Status& theirs) {
    return invalidUsage("rank %d could not register its part of the window: %s", q, theirs.message().c_str());
  });
  if (!agreed.isOk()) {
    if (w->handle != nullptr) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        (void)deviceTable_->remove(w->handle);
      }
      comm_->backend().freeDeviceBlock(w->handle);
    }
    if (w->registration != nullptr) (void)comm_->deregisterBuffer(w->registration);
    return agreed;  // `w` releases the multicast binding and the peers' mappings
  }
  ncclWindow_vidmem* handle = w->handle;
  listWindow(handle, viewOf(*w));
  std::lock_guard<std::mutex> lock(mu_);
  ++registered_;
  byIndex_[w->index] = w.get();
  table_[handle] = std::move(w);
  return handle;
}

WindowView Windows::viewOf(const Window& w) const {
  WindowView v;
  v.worldRank = comm_->rank();
  v.nRanks = comm_->nranks();
  v.lsa = lsaTeam(*comm_);
  for (int q : lsaWorldRanks()) {
    v.lsaBases.push_back(w.peers[static_cast<size_t>(q)].at);
    v.lsaBytes.push_back(w.peerBytes[static_cast<size_t>(q)]);
    v.why.push_back(w.peers[static_cast<size_t>(q)].why);
  }
  v.multimem = w.mc.base;
  if (v.multimem != nullptr) v.multimemBytes = commonBytes(w);  // what bindMulticast bound
  return v;
}

std::vector<int> Windows::lsaWorldRanks() const {
  const Team lsa = lsaTeam(*comm_);
  const int first = comm_->rank() - lsa.rank * lsa.stride;  // world rank of LSA member 0
  std::vector<int> ranks(static_cast<size_t>(lsa.nRanks));
  for (int i = 0; i < lsa.nRanks; ++i) ranks[static_cast<size_t>(i)] = first + i * lsa.stride;
  return ranks;
}

uint64_t Windows::commonBytes(const Window& w) {
  uint64_t bytes = w.bytes;
  for (uint64_t b : w.peerBytes) bytes = std::min(bytes, b);
  return bytes;
}

Status Windows::remove(ncclWindow_vidmem* win) {
  if (win == nullptr) return Status::ok();  // what registration returned with NCCL_WIN_ENABLE=0
  std::unique_ptr<Window> w;
  Status unlisted = Status::ok();
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = table_.find(win);
    if (it == table_.end()) {
      return invalidArgument(
          "win=%p is not a window of this communicator (never returned by its "
          "ncclCommWindowRegister, or already deregistered)",
          static_cast<const void*>(win));
    }
    w = std::move(it->second);
    table_.erase(it);
    byIndex_.erase(w->index);
    if (deviceTable_) unlisted = deviceTable_->remove(win);
    // Out of the tables, so nobody new pins it: wait for the proxies copying into or out of it now.
    Window* gone = w.get();
    unpinned_.wait(lock, [gone] { return gone->inUse == 0; });
  }
  unlistWindow(w->handle);
  comm_->backend().freeDeviceBlock(w->handle);
  if (w->registration != nullptr) BRAID_RETURN_IF_ERROR(comm_->deregisterBuffer(w->registration));
  return unlisted;  // `w` unmaps the peers' buffers
}

Result<const void*> Windows::deviceTableLocked() {
  if (!deviceTable_) deviceTable_ = std::make_unique<WindowTable>(&comm_->backend());
  return deviceTable_->head();
}

Result<const void*> Windows::deviceTable() {
  std::lock_guard<std::mutex> lock(mu_);
  return deviceTableLocked();
}

Result<const Window*> Windows::find(const ncclWindow_vidmem* win, const char* what) const {
  if (win == nullptr) return invalidArgument("%s is NULL", what);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = table_.find(win);
  if (it == table_.end()) {
    return invalidArgument(
        "%s=%p is not a window of this communicator (never returned by its "
        "ncclCommWindowRegister, or deregistered)",
        what, static_cast<const void*>(win));
  }
  return static_cast<const Window*>(it->second.get());
}

const char* Windows::outOfReach(int peer) const {
  const bool otherHost = comm_->peer(peer).hostHash != comm_->peer(comm_->rank()).hostHash;
  if (otherHost) return "BRAID_RMA_NET=0 turned off one-sided messages to the ranks of other hosts";
  if (comm_->backend().kind() == BackendKind::kHost) {
    return "braid's one-sided operations run between ranks that map each other's windows, or as messages to ranks "
           "of other hosts; between processes of one host register ncclMemAlloc memory, which peers map";
  }
  return "braid's one-sided operations on CUDA communicators run between ranks that map each other's windows (P2P), "
         "or as messages to ranks of other hosts; between GPUs of one host without P2P they are not built";
}

Result<std::vector<RmaStep>> Windows::putSteps(bool put, const void* localbuff, size_t bytes, int peer,
                                               const ncclWindow_vidmem* win, size_t offset, SignalId id) {
  const int n = comm_->nranks(), me = comm_->rank();
  if (peer < 0 || peer >= n) return invalidArgument("peer=%d is not a rank of this communicator (0..%d)", peer, n - 1);
  if (!signals_) return noSignalArea();
  const bool viaNet = net_ && net_->serves(peer);  // another host: messages (rma_net.h)
  RmaStep s;
  s.peer = peer;
  s.kind = put ? RmaStep::Kind::kPut : RmaStep::Kind::kSignal;
  if (put) {
    BRAID_ASSIGN_OR_RETURN(const Window* w, find(win, "peerWin"));
    const uint64_t peerBytes = w->peerBytes[static_cast<size_t>(peer)];
    if (offset > peerBytes || bytes > peerBytes - offset) {
      return invalidArgument("peerWinOffset=%zu plus %zu bytes passes the end of rank %d's window buffer (%llu bytes)",
                             offset, bytes, peer, static_cast<unsigned long long>(peerBytes));
    }
    s.src = localbuff;
    s.bytes = bytes;
    const WindowPeer& p = w->peers[static_cast<size_t>(peer)];
    if (viaNet) {
      s.window = w->index;
      s.offset = offset;
    } else if (p.at == nullptr) {
      return invalidUsage("rank %d's window buffer is out of rank %d's load/store reach (%s): %s", peer, me,
                          p.why.c_str(), outOfReach(peer));
    } else {
      s.dst = p.at + offset;
    }
  }
  s.slot = slotOf(id);
  s.value = sent_[countAt(peer, s.slot)] + 1;
  if (viaNet) {
    s.via = net_.get();  // data and signal as messages, in order
    return std::vector<RmaStep>{s};
  }
  const WindowPeer& sig = signals_->peers[static_cast<size_t>(peer)];
  if (sig.at == nullptr) {
    return invalidUsage("rank %d's signal area is out of rank %d's load/store reach (%s): %s", peer, me,
                        sig.why.c_str(), outOfReach(peer));
  }
  s.word = reinterpret_cast<uint64_t*>(sig.at + signalOffset(me, s.slot));
  return std::vector<RmaStep>{s};
}

Result<std::vector<RmaStep>> Windows::waitSteps(const std::vector<SignalWait>& waits) {
  const int n = comm_->nranks();
  for (size_t i = 0; i < waits.size(); ++i) {
    if (waits[i].peer < 0 || waits[i].peer >= n) {
      return invalidArgument("signalDescs[%zu].peer=%d is not a rank of this communicator (0..%d)", i, waits[i].peer,
                             n - 1);
    }
    if (waits[i].opCnt < 0) return invalidArgument("signalDescs[%zu].opCnt=%d is negative", i, waits[i].opCnt);
  }
  if (!signals_) return noSignalArea();
  std::vector<RmaStep> steps;
  std::map<size_t, uint64_t> awaited;  // several descriptors may name one signal: their counts add up
  char* area = signals_->peers[static_cast<size_t>(comm_->rank())].at;
  for (const SignalWait& sw : waits) {
    if (sw.opCnt == 0) continue;
    RmaStep s;
    s.kind = RmaStep::Kind::kWait;
    s.peer = sw.peer;
    s.slot = slotOf(SignalId{sw.ctx, sw.sig});
    s.word = reinterpret_cast<uint64_t*>(area + signalOffset(sw.peer, s.slot));
    const size_t at = countAt(sw.peer, s.slot);
    auto it = awaited.emplace(at, awaited_[at]).first;
    s.value = it->second += static_cast<uint64_t>(sw.opCnt);
    if (net_ && net_->serves(sw.peer)) s.via = net_.get();  // its health: a failed connection ends the wait
    steps.push_back(s);
  }
  return steps;
}

void Windows::commit(const std::vector<RmaStep>& steps) {
  for (const RmaStep& s : steps) {
    uint64_t& count = (s.kind == RmaStep::Kind::kWait ? awaited_ : sent_)[countAt(s.peer, s.slot)];
    if (s.value > count) count = s.value;
  }
}

}  // namespace braid
