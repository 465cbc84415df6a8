#include "src/core/enqueue.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "src/common/logging.h"
#include "src/core/flight_recorder.h"
#include "src/core/group.h"
#include "src/core/profiler_plugin.h"

namespace braid {

Status checkDatatype(int datatype) {
  if (datatype < 0 || datatype >= static_cast<int>(DType::kCount)) {
    return invalidArgument("datatype=%d is not a valid ncclDataType_t (0..%d)", datatype,
                           static_cast<int>(DType::kCount) - 1);
  }
  return Status::ok();
}

namespace {

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

Status checkInPlace(const char* what, const void* sendbuff, size_t sendBytes, const void* recvbuff, size_t recvBytes,
                    const void* inPlaceSend, const char* rule) {
  if (sendbuff == inPlaceSend) return Status::ok();
  if (overlaps(sendbuff, sendBytes, recvbuff, recvBytes)) {
    return invalidArgument(
        "sendbuff=%p (%zu bytes) overlaps recvbuff=%p (%zu bytes) but is not the in-place position: %s requires %s "
        "(%p)",
        sendbuff, sendBytes, recvbuff, recvBytes, what, rule, inPlaceSend);
  }
  return Status::ok();
}

}  // namespace

namespace {

// Closes the profiler's API scope of a communicator the call leaves with nothing queued (see its uses).
struct ApiScopeGuard {
  Communicator* comm;
  ~ApiScopeGuard() {
    if (comm->profiler() != nullptr && comm->pending().empty()) comm->profiler()->groupDone();
  }
};

}  // namespace

Status checkUsable(Communicator& comm, const void* handle, const void* stream) {
  const int asyncErr = comm.asyncError().load();
  if (asyncErr == static_cast<int>(Code::kInProgress)) {
    return invalidUsage("comm=%p is still initializing (poll ncclCommGetAsyncError until it returns ncclSuccess)",
                        handle);
  }
  if (asyncErr != static_cast<int>(Code::kOk)) {
    return invalidUsage("comm=%p is unusable after an earlier error (%d); destroy or abort it", handle, asyncErr);
  }
  if (comm.finalized.load()) {
    return invalidUsage("comm=%p was finalized with ncclCommFinalize; only ncclCommDestroy may follow", handle);
  }
  if (comm.revoked.load()) {
    return invalidUsage("comm=%p was revoked with ncclCommRevoke: destroy, split or shrink it", handle);
  }
  if (comm.suspended()) {
    return invalidUsage("comm=%p is suspended (ncclCommSuspend): call ncclCommResume on every rank first", handle);
  }
  if (stream != nullptr && !comm.backend().caps().streams) {
    return invalidUsage(
        "stream=%p: this communicator works on host memory, where operations complete before the call returns; "
        "pass a NULL stream, or create the communicator with a current CUDA context for device buffers and streams",
        stream);
  }
  if (stream != nullptr) BRAID_RETURN_IF_ERROR(comm.backend().checkStream(const_cast<void*>(stream)));
  // An earlier operation's kernels may have failed since: this one is refused with that error. (Finished ones end
  // in the flight recorder here, on the owner's thread.)
  return comm.pollOwned();
}

namespace {

// enqueueColl without joining the group: the caller launches what it queued.
Status queueColl(const std::shared_ptr<Communicator>& comm, const CollRequest& a) {
  BRAID_RETURN_IF_ERROR(checkUsable(*comm, a.handle, a.stream));
  BRAID_RETURN_IF_ERROR(checkDatatype(a.datatype));
  const DType dtype = static_cast<DType>(a.datatype);
  const size_t es = dtypeSize(dtype);
  const int n = comm->nranks();
  const int rank = comm->rank();
  const bool rooted = a.kind == CollKind::kBroadcast || a.kind == CollKind::kReduce;
  const bool isP2p = a.kind == CollKind::kSend || a.kind == CollKind::kRecv;
  if (rooted && (a.root < 0 || a.root >= n)) {
    return invalidArgument("root=%d is out of range for a communicator of %d ranks", a.root, n);
  }
  if (isP2p && (a.root < 0 || a.root >= n)) {
    return invalidArgument("peer=%d is out of range for a communicator of %d ranks", a.root, n);
  }
  // A negative count cast to size_t, or one whose byte size overflows, is rejected before any arithmetic uses it.
  const size_t blocks =
      (a.kind == CollKind::kAllGather || a.kind == CollKind::kReduceScatter || a.kind == CollKind::kAlltoAll)
          ? static_cast<size_t>(n)
          : 1;
  size_t totalBytes = 0;  // (a multiplication, not the divisions a bound would take: this is the latency path)
  if (__builtin_mul_overflow(a.count, es * blocks, &totalBytes) || totalBytes > static_cast<size_t>(PTRDIFF_MAX)) {
    return invalidArgument("count=%zu (%lld as a signed value) is negative or too large for datatype %s", a.count,
                           static_cast<long long>(a.count), dtypeName(dtype));
  }
  ReduceOp op;
  op.dtype = dtype;
  op.nranks = n;
  // Whatever its value: a negative op is a bad op, not "no reduction".
  const bool reduces =
      a.kind == CollKind::kAllReduce || a.kind == CollKind::kReduce || a.kind == CollKind::kReduceScatter;
  if (reduces && !builtinOp(a.op, &op.kind)) {  // (a built-in op needs no lookup: op has its dtype and nranks)
    BRAID_ASSIGN_OR_RETURN(op, comm->resolveOp(a.op, dtype));
  }
  const size_t bytes = a.count * es;
  if (a.count > 0) {
    const bool needSend = !(a.kind == CollKind::kRecv || (a.kind == CollKind::kBroadcast && rank != a.root));
    const bool needRecv = !(a.kind == CollKind::kSend || (a.kind == CollKind::kReduce && rank != a.root));
    if (needSend && a.sendbuff == nullptr) return invalidArgument("sendbuff is NULL with count=%zu", a.count);
    if (needRecv && a.recvbuff == nullptr) return invalidArgument("recvbuff is NULL with count=%zu", a.count);
    switch (a.kind) {
      case CollKind::kAllReduce:
      case CollKind::kReduce:
        if (!(a.kind == CollKind::kReduce && rank != a.root)) {
          BRAID_RETURN_IF_ERROR(
              checkInPlace("in-place", a.sendbuff, bytes, a.recvbuff, bytes, a.recvbuff, "sendbuff == recvbuff"));
        }
        break;
      case CollKind::kBroadcast:
        if (rank == a.root) {
          BRAID_RETURN_IF_ERROR(
              checkInPlace("in-place", a.sendbuff, bytes, a.recvbuff, bytes, a.recvbuff, "sendbuff == recvbuff"));
        }
        break;
      case CollKind::kAllGather:
        BRAID_RETURN_IF_ERROR(checkInPlace("in-place all-gather", a.sendbuff, bytes, a.recvbuff, bytes * blocks,
                                           static_cast<const char*>(a.recvbuff) + static_cast<size_t>(rank) * bytes,
                                           "sendbuff == recvbuff + rank * sendcount"));
        break;
      case CollKind::kReduceScatter:
        BRAID_RETURN_IF_ERROR(checkInPlace("in-place reduce-scatter", a.recvbuff, bytes, a.sendbuff, bytes * blocks,
                                           static_cast<const char*>(a.sendbuff) + static_cast<size_t>(rank) * bytes,
                                           "recvbuff == sendbuff + rank * recvcount"));
        break;
      default:
        break;
    }
  }
  if (a.count > 0 && comm->backend().caps().streams) {
    // Device memory (or pinned host memory) only, whole, on this communicator's device.
    const size_t many = bytes * blocks;
    const bool gathers = a.kind == CollKind::kAllGather || a.kind == CollKind::kAlltoAll;
    const bool scatters = a.kind == CollKind::kReduceScatter || a.kind == CollKind::kAlltoAll;
    const bool sends = !(a.kind == CollKind::kRecv || (a.kind == CollKind::kBroadcast && rank != a.root));
    const bool recvs = !(a.kind == CollKind::kSend || (a.kind == CollKind::kReduce && rank != a.root));
    if (sends) {
      BRAID_RETURN_IF_ERROR(comm->checkRegistered(a.sendbuff, scatters ? many : bytes, "sendbuff"));
      BRAID_RETURN_IF_ERROR(comm->backend().checkBuffer(a.sendbuff, scatters ? many : bytes, "sendbuff"));
    }
    if (recvs) {
      BRAID_RETURN_IF_ERROR(comm->checkRegistered(a.recvbuff, gathers ? many : bytes, "recvbuff"));
      BRAID_RETURN_IF_ERROR(comm->backend().checkBuffer(a.recvbuff, gathers ? many : bytes, "recvbuff"));
    }
  }
  BRAID_INFO(kLogColl, "%s: opCount comm %p rank %d sendbuff %p recvbuff %p count %zu datatype %d op %d root %d", a.fn,
             a.handle, rank, a.sendbuff, a.recvbuff, a.count, static_cast<int>(a.datatype), a.op, a.root);
  const Selector* callSelector = nullptr;
  FilterColl filtered;
  if (a.algSelection != nullptr && a.algSelection[0] != '\0' && filterCollOf(a.kind, &filtered)) {
    BRAID_ASSIGN_OR_RETURN(callSelector, comm->selector().forSelection(a.algSelection));
    const Status left = callSelector->checkAlgorithms(a.kind);
    // The call's own argument leaves nothing (nccl.h: ncclInvalidArgument).
    if (!left.isOk() && a.forceAlgSelection) return invalidArgument("%s", left.message().c_str());
    if (!left.isOk()) {
      BRAID_INFO(kLogColl | kLogTuning, "%s: config->algSelection=\"%s\" ignored (forceAlgSelection=0): %s", a.fn,
                 a.algSelection, left.message().c_str());
      callSelector = nullptr;
    }
  }
  if (callSelector == nullptr) BRAID_RETURN_IF_ERROR(comm->checkAlgorithms(a.kind));
  if (a.count == 0) return Status::ok();  // nothing moves; NCCL accepts and ignores it
  uint64_t token = a.flightToken;
  if (token == FlightRecorder::kNone) {
    FlightCall call;
    call.fn = a.fn;
    call.kind = a.kind;
    call.p2p = isP2p;
    call.count = a.count;
    call.dtype = dtype;
    call.op = reduces ? static_cast<int>(op.kind) : -1;
    call.root = rooted ? a.root : -1;
    call.peer = isP2p ? a.root : -1;
    token = comm->flight().queued(call);
  }
  void* profApi = a.profApi;
  if (comm->profiler() != nullptr && !a.apiReported) {
    ProfiledOp call;
    call.kind = a.kind;
    call.count = a.count;
    call.dtype = dtype;
    call.root = a.root;
    call.stream = const_cast<void*>(a.stream);
    call.userTag = a.userTag;
    profApi = comm->profiler()->apiCall(call, groupDepth());
  }
  // Built where it stays rather than copied in; last, so nothing above (a plugin included) sees it half made.
  PendingOp& queued = comm->pending().emplace_back();
  queued.kind = a.kind;
  queued.sendbuff = a.sendbuff;
  queued.recvbuff = a.recvbuff;
  queued.count = a.count;
  queued.dtype = dtype;
  queued.op = op;
  queued.root = a.root;
  queued.flightToken = token;
  queued.stream = const_cast<void*>(a.stream);
  queued.userTag = a.userTag;
  queued.profApi = profApi;
  queued.selector = callSelector;
  queued.minChannels = a.minChannels;
  queued.maxChannels = a.maxChannels;
  queued.nvlsChannels = a.nvlsChannels;
  return Status::ok();
}

}  // namespace

Status enqueueColl(const std::shared_ptr<Communicator>& comm, const CollRequest& a) {
  BRAID_RETURN_IF_ERROR(queueColl(comm, a));
  if (!comm->pending().empty()) groupAddComm(comm);
  return Status::ok();
}

Status runLone(const std::shared_ptr<Communicator>& comm, const CollRequest& a) {
  if (inGroup() || comm->profiler() != nullptr) {
    // A group of its own, as NCCL makes one (the profiler sees its group events).
    groupStart();
    const Status queued = enqueueColl(comm, a);
    const Status ended = groupEnd();
    return queued.isOk() ? ended : queued;
  }
  // The latency path: what a group of one call does, without the thread's group state.
  BRAID_RETURN_IF_ERROR(queueColl(comm, a));
  if (comm->pending().empty()) return Status::ok();
  return comm->launchLone();
}

Status enqueuePattern(const std::shared_ptr<Communicator>& c, P2pPattern pattern, const CollRequest& a) {
  BRAID_RETURN_IF_ERROR(checkUsable(*c, a.handle, a.stream));
  // All-to-all, gather and scatter have no algorithm to select (nor ring/tree channels to bound), whichever schedule
  // runs them; a selection braid cannot parse is refused all the same, whatever the size.
  if (a.algSelection != nullptr && a.algSelection[0] != '\0') {
    BRAID_RETURN_IF_ERROR(c->selector().forSelection(a.algSelection).status());
  }
  const bool sendsAll = pattern != P2pPattern::kGather;
  const bool recvsAll = pattern != P2pPattern::kScatter;
  const bool rooted = pattern != P2pPattern::kAlltoAll;
  const void* sendbuff = a.sendbuff;
  void* recvbuff = a.recvbuff;
  const size_t count = a.count;
  const int root = a.root;
  const int n = c->nranks();
  const int rank = c->rank();
  if (rooted && (root < 0 || root >= n)) {
    return invalidArgument("root=%d is out of range for a communicator of %d ranks", root, n);
  }
  BRAID_RETURN_IF_ERROR(checkDatatype(a.datatype));
  const size_t es = dtypeSize(static_cast<DType>(a.datatype));
  if (count > static_cast<size_t>(PTRDIFF_MAX) / es / static_cast<size_t>(n)) {
    return invalidArgument("count=%zu (%lld as a signed value) is negative or too large", count,
                           static_cast<long long>(count));
  }
  const size_t bytes = count * es;
  const bool scatter = rooted && sendsAll;
  const bool gather = rooted && recvsAll;
  if (count > 0 && sendbuff == nullptr && (!scatter || rank == root)) {
    return invalidArgument("sendbuff is NULL with count=%zu", count);
  }
  if (count > 0 && recvbuff == nullptr && (!gather || rank == root)) {
    return invalidArgument("recvbuff is NULL with count=%zu", count);
  }
  CollRequest base = a;  // what every send and receive below starts from
  if (count > 0 && c->profiler() != nullptr) {
    ProfiledOp call;
    call.kind = CollKind::kAlltoAll;
    call.func = pattern == P2pPattern::kAlltoAll ? "AlltoAll" : pattern == P2pPattern::kGather ? "Gather" : "Scatter";
    call.count = count;
    call.dtype = static_cast<DType>(a.datatype);
    call.root = rooted ? root : 0;
    call.stream = const_cast<void*>(a.stream);
    call.userTag = a.userTag;
    base.profApi = c->profiler()->apiCall(call, groupDepth());
    base.apiReported = true;
  }
  // A call that fails before it queued anything leaves the communicator out of the group, whose end would close
  // the profiler's GroupApi: close it here.
  ApiScopeGuard closeOnFailure{c.get()};
  if (count > 0 && c->flight().enabled()) {
    FlightCall call;
    call.fn = a.fn;
    call.kind = CollKind::kAlltoAll;
    call.count = count;
    call.dtype = static_cast<DType>(a.datatype);
    call.root = rooted ? root : -1;
    base.flightToken = c->flight().queued(call);
  }
  // Every rank's block is read by one peer while another peer's block lands on it: an all-to-all whose buffers
  // overlap (in place) reads from a snapshot taken now, which the caller may not modify until completion anyway.
  if (sendsAll && recvsAll && count > 0) {
    const char* s = static_cast<const char*>(sendbuff);
    const char* r = static_cast<const char*>(recvbuff);
    const size_t total = bytes * static_cast<size_t>(n);
    if (s < r + total && r < s + total) sendbuff = c->stageCopy(sendbuff, total);
    // The log-step schedule is one collective (queued in the same order on every rank, like the others).
    if (!rooted && c->useBruck(bytes)) {
      CollRequest whole = base;
      whole.kind = CollKind::kAlltoAll;
      whole.sendbuff = sendbuff;
      whole.op = -1;
      whole.root = 0;
      return enqueueColl(c, whole);
    }
  }
  auto sendAt = [&](int peer) { return static_cast<const char*>(sendbuff) + (sendsAll ? bytes * peer : 0); };
  auto recvAt = [&](int peer) { return static_cast<char*>(recvbuff) + (recvsAll ? bytes * peer : 0); };
  auto p2p = [&](CollKind kind, const void* s, void* r, int peer) {
    CollRequest one = base;
    one.kind = kind;
    one.sendbuff = s;
    one.recvbuff = r;
    one.op = -1;
    one.root = peer;
    return enqueueColl(c, one);
  };
  for (int peer = 0; peer < n; ++peer) {
    if (!rooted || rank == root) {
      if (sendsAll) BRAID_RETURN_IF_ERROR(p2p(CollKind::kSend, sendAt(peer), nullptr, peer));
      if (recvsAll) BRAID_RETURN_IF_ERROR(p2p(CollKind::kRecv, nullptr, recvAt(peer), peer));
    }
  }
  if (scatter) BRAID_RETURN_IF_ERROR(p2p(CollKind::kRecv, nullptr, recvbuff, root));
  if (gather) BRAID_RETURN_IF_ERROR(p2p(CollKind::kSend, sendbuff, nullptr, root));
  return Status::ok();
}

Status enqueueAlltoAllv(const std::shared_ptr<Communicator>& c, const AlltoAllvRequest& v) {
  BRAID_RETURN_IF_ERROR(checkUsable(*c, v.handle, v.stream));
  const void* sendbuff = v.sendbuff;
  void* recvbuff = v.recvbuff;
  const size_t* sendcounts = v.sendcounts;
  const size_t* sdispls = v.sdispls;
  const size_t* recvcounts = v.recvcounts;
  const size_t* rdispls = v.rdispls;
  const int datatype = v.datatype;
  const int n = c->nranks();
  BRAID_RETURN_IF_ERROR(checkDatatype(datatype));
  const struct {
    const char* name;
    const size_t* v;
  } arrays[] = {{"sendcounts", sendcounts}, {"sdispls", sdispls}, {"recvcounts", recvcounts}, {"rdispls", rdispls}};
  for (const auto& a : arrays) {
    if (a.v == nullptr) return invalidArgument("%s is NULL (an array of nranks=%d entries is required)", a.name, n);
  }
  const size_t es = dtypeSize(static_cast<DType>(datatype));
  const size_t maxElems = static_cast<size_t>(PTRDIFF_MAX) / es;
  size_t sendExtent = 0, recvExtent = 0;  // in elements
  for (int p = 0; p < n; ++p) {
    for (int side = 0; side < 2; ++side) {
      const size_t count = side == 0 ? sendcounts[p] : recvcounts[p];
      const size_t displ = side == 0 ? sdispls[p] : rdispls[p];
      if (count > maxElems || displ > maxElems - count) {
        return invalidArgument("%s[%d]=%zu with %s[%d]=%zu is negative or overflows for datatype %s",
                               side == 0 ? "sendcounts" : "recvcounts", p, count, side == 0 ? "sdispls" : "rdispls", p,
                               displ, dtypeName(static_cast<DType>(datatype)));
      }
      if (count > 0)
        (side == 0 ? sendExtent : recvExtent) = std::max(side == 0 ? sendExtent : recvExtent, displ + count);
    }
  }
  if (sendExtent > 0 && sendbuff == nullptr) return invalidArgument("sendbuff is NULL with non-zero sendcounts");
  if (recvExtent > 0 && recvbuff == nullptr) return invalidArgument("recvbuff is NULL with non-zero recvcounts");
  if (overlaps(sendbuff, sendExtent * es, recvbuff, recvExtent * es)) {
    sendbuff = c->stageCopy(sendbuff, sendExtent * es);
  }
  // One entry for the call, on every rank, even one that moves nothing (the ranks' collective numbers stay equal).
  uint64_t token = FlightRecorder::kNone;
  if (c->flight().enabled()) {
    FlightCall call;
    call.fn = "braidAlltoAllv";
    call.kind = CollKind::kAlltoAll;
    call.count = sendExtent;
    call.dtype = static_cast<DType>(datatype);
    token = c->flight().queued(call);
    if (sendExtent == 0 && recvExtent == 0) c->flight().nothingToRun(token);
  }
  void* profApi = nullptr;
  if (c->profiler() != nullptr && (sendExtent > 0 || recvExtent > 0)) {
    ProfiledOp call;
    call.kind = CollKind::kAlltoAll;
    call.func = "AlltoAllv";
    call.count = sendExtent;
    call.dtype = static_cast<DType>(datatype);
    call.root = 0;
    call.stream = const_cast<void*>(v.stream);
    profApi = c->profiler()->apiCall(call, groupDepth());
  }
  ApiScopeGuard closeOnFailure{c.get()};
  auto p2p = [&](CollKind kind, const void* s, void* r, size_t count, int peer) {
    CollRequest one{"braidAlltoAllv", kind, s, r, count, datatype, -1, peer, v.handle, v.stream, token};
    one.profApi = profApi;
    one.apiReported = true;
    return enqueueColl(c, one);
  };
  for (int p = 0; p < n; ++p) {
    if (sendcounts[p] > 0) {
      BRAID_RETURN_IF_ERROR(
          p2p(CollKind::kSend, static_cast<const char*>(sendbuff) + sdispls[p] * es, nullptr, sendcounts[p], p));
    }
    if (recvcounts[p] > 0) {
      BRAID_RETURN_IF_ERROR(
          p2p(CollKind::kRecv, nullptr, static_cast<char*>(recvbuff) + rdispls[p] * es, recvcounts[p], p));
    }
  }
  return Status::ok();
}

}  // namespace braid
