// Collectives, point-to-point, groups and reduction operators: argument checks, then a queued PendingOp.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "src/api/api.h"
#include "src/core/group.h"

namespace braid {
namespace {

struct CollArgs {
  const char* fn;
  CollKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t datatype;
  int op;  // -1: no reduction
  int root;
  ncclComm_t comm;
  cudaStream_t stream;
};

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

// Validates and queues one operation (the checks NCCL does at call time, with messages that name the value).
Status enqueue(const CollArgs& a) {
  BRAID_ASSIGN_OR_RETURN(auto comm, lookupComm(a.comm, "comm"));
  int asyncErr = comm->asyncError().load();
  if (asyncErr == ncclInProgress) {
    return invalidUsage("comm=%p is still initializing (poll ncclCommGetAsyncError until it returns ncclSuccess)",
                        static_cast<void*>(a.comm));
  }
  if (asyncErr != ncclSuccess) {
    return invalidUsage("comm=%p is unusable after an earlier error (%d); destroy or abort it",
                        static_cast<void*>(a.comm), asyncErr);
  }
  if (comm->finalized.load()) {
    return invalidUsage("comm=%p was finalized with ncclCommFinalize; only ncclCommDestroy may follow",
                        static_cast<void*>(a.comm));
  }
  if (a.stream != nullptr) {
    return invalidUsage(
        "stream=%p: this communicator works on host memory, where operations complete before the call returns; "
        "pass a NULL stream (braid's CUDA backend is not built yet)",
        static_cast<void*>(a.stream));
  }
  if (static_cast<int>(a.datatype) < 0 || static_cast<int>(a.datatype) >= ncclNumTypes) {
    return invalidArgument("datatype=%d is not a valid ncclDataType_t (0..%d)", static_cast<int>(a.datatype),
                           ncclNumTypes - 1);
  }
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
  if (a.count > static_cast<size_t>(PTRDIFF_MAX) / es / blocks) {
    return invalidArgument("count=%zu (%lld as a signed value) is negative or too large for datatype %s", a.count,
                           static_cast<long long>(a.count), dtypeName(dtype));
  }
  ReduceOp op;
  op.dtype = dtype;
  op.nranks = n;
  if (a.op >= 0) {
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
  BRAID_INFO(kLogColl, "%s: opCount comm %p rank %d sendbuff %p recvbuff %p count %zu datatype %d op %d root %d", a.fn,
             static_cast<void*>(a.comm), rank, a.sendbuff, a.recvbuff, a.count, static_cast<int>(a.datatype), a.op,
             a.root);
  BRAID_RETURN_IF_ERROR(comm->checkAlgorithms(a.kind));
  if (a.count == 0) return Status::ok();  // nothing moves; NCCL accepts and ignores it
  comm->pending().push_back(PendingOp{a.kind, a.sendbuff, a.recvbuff, a.count, dtype, op, a.root});
  groupAddComm(comm);
  return Status::ok();
}

// Runs `body` as a group of its own unless the caller opened one. A call that fails its checks queues nothing.
template <typename F>
Status withImplicitGroup(F&& body) {
  groupStart();
  Status st = body();
  Status end = groupEnd();
  return st.isOk() ? end : st;
}

ncclResult_t collective(const CollArgs& a) {
  return apiCall(a.fn, [&]() { return withImplicitGroup([&]() { return enqueue(a); }); });
}

// All-to-all, gather and scatter are groups of sends and receives, as NCCL builds them.
Status p2pPattern(const char* fn, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream, bool sendsAll, bool recvsAll, bool rooted) {
  BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
  const int n = c->nranks();
  const int rank = c->rank();
  if (rooted && (root < 0 || root >= n)) {
    return invalidArgument("root=%d is out of range for a communicator of %d ranks", root, n);
  }
  if (static_cast<int>(datatype) < 0 || static_cast<int>(datatype) >= ncclNumTypes) {
    return invalidArgument("datatype=%d is not a valid ncclDataType_t (0..%d)", static_cast<int>(datatype),
                           ncclNumTypes - 1);
  }
  const size_t es = dtypeSize(static_cast<DType>(datatype));
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
  // Every rank's block is read by one peer while another peer's block lands on it: an all-to-all whose buffers
  // overlap (in place) reads from a snapshot taken now, which the caller may not modify until completion anyway.
  if (sendsAll && recvsAll && count > 0) {
    const char* s = static_cast<const char*>(sendbuff);
    const char* r = static_cast<const char*>(recvbuff);
    const size_t total = bytes * static_cast<size_t>(n);
    if (s < r + total && r < s + total) sendbuff = c->stageCopy(sendbuff, total);
    // The log-step schedule is one collective (queued in the same order on every rank, like the others).
    if (!rooted && c->useBruck(bytes)) {
      return enqueue(CollArgs{fn, CollKind::kAlltoAll, sendbuff, recvbuff, count, datatype, -1, 0, comm, stream});
    }
  }
  auto sendAt = [&](int peer) { return static_cast<const char*>(sendbuff) + (sendsAll ? bytes * peer : 0); };
  auto recvAt = [&](int peer) { return static_cast<char*>(recvbuff) + (recvsAll ? bytes * peer : 0); };
  auto p2p = [&](CollKind kind, const void* s, void* r, int peer) {
    return enqueue(CollArgs{fn, kind, s, r, count, datatype, -1, peer, comm, stream});
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

// braidAlltoAllv: sends and receives per peer, each with its own count and displacement.
Status alltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                 const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                 cudaStream_t stream) {
  const char* fn = "braidAlltoAllv";
  BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
  const int n = c->nranks();
  if (static_cast<int>(datatype) < 0 || static_cast<int>(datatype) >= ncclNumTypes) {
    return invalidArgument("datatype=%d is not a valid ncclDataType_t (0..%d)", static_cast<int>(datatype),
                           ncclNumTypes - 1);
  }
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
  for (int p = 0; p < n; ++p) {
    if (sendcounts[p] > 0) {
      BRAID_RETURN_IF_ERROR(enqueue(CollArgs{fn, CollKind::kSend, static_cast<const char*>(sendbuff) + sdispls[p] * es,
                                             nullptr, sendcounts[p], datatype, -1, p, comm, stream}));
    }
    if (recvcounts[p] > 0) {
      BRAID_RETURN_IF_ERROR(
          enqueue(CollArgs{fn, CollKind::kRecv, nullptr, static_cast<char*>(recvbuff) + rdispls[p] * es, recvcounts[p],
                           datatype, -1, p, comm, stream}));
    }
  }
  return Status::ok();
}

}  // namespace
}  // namespace braid

using namespace braid;

extern "C" __attribute__((visibility("default"))) ncclResult_t braidAlltoAllv(
    const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
    const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return apiCall("braidAlltoAllv", [&]() {
    return withImplicitGroup([&]() {
      return alltoAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream);
    });
  });
}

BRAID_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(
      CollArgs{"ncclAllReduce", CollKind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream});
}

BRAID_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(
      CollArgs{"ncclBroadcast", CollKind::kBroadcast, sendbuff, recvbuff, count, datatype, -1, root, comm, stream});
}

BRAID_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream) {
  return collective(CollArgs{"ncclBcast", CollKind::kBroadcast, buff, buff, count, datatype, -1, root, comm, stream});
}

BRAID_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(
      CollArgs{"ncclReduce", CollKind::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream});
}

BRAID_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream) {
  return collective(
      CollArgs{"ncclAllGather", CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, -1, 0, comm, stream});
}

BRAID_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(CollArgs{"ncclReduceScatter", CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op,
                             0, comm, stream});
}

BRAID_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
          ncclComm_t comm, cudaStream_t stream) {
  return collective(CollArgs{"ncclSend", CollKind::kSend, sendbuff, nullptr, count, datatype, -1, peer, comm, stream});
}

BRAID_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream) {
  return collective(CollArgs{"ncclRecv", CollKind::kRecv, nullptr, recvbuff, count, datatype, -1, peer, comm, stream});
}

BRAID_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream) {
  return apiCall("ncclAlltoAll", [&]() {
    return withImplicitGroup([&]() {
      return p2pPattern("ncclAlltoAll", sendbuff, recvbuff, count, datatype, 0, comm, stream, true, true, false);
    });
  });
}

BRAID_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  return apiCall("ncclGather", [&]() {
    return withImplicitGroup([&]() {
      return p2pPattern("ncclGather", sendbuff, recvbuff, count, datatype, root, comm, stream, false, true, true);
    });
  });
}

BRAID_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  return apiCall("ncclScatter", [&]() {
    return withImplicitGroup([&]() {
      return p2pPattern("ncclScatter", sendbuff, recvbuff, count, datatype, root, comm, stream, true, false, true);
    });
  });
}

BRAID_API(ncclResult_t, ncclGroupStart) {
  return apiCall("ncclGroupStart", [&]() {
    groupStart();
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclGroupEnd) {
  return apiCall("ncclGroupEnd", [&]() { return groupEnd(); });
}

BRAID_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return apiCall("ncclGroupSimulateEnd", [&]() {
    return notSupported("ncclGroupSimulateEnd",
                        "the cost model's estimate of a group is not reported through ncclSimInfo_t yet");
  });
}

BRAID_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
          ncclScalarResidence_t residence, ncclComm_t comm) {
  return apiCall("ncclRedOpCreatePreMulSum", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(op, "ncclRedOpCreatePreMulSum", "op"));
    BRAID_RETURN_IF_ERROR(checkNotNull(scalar, "ncclRedOpCreatePreMulSum", "scalar"));
    if (static_cast<int>(datatype) < 0 || static_cast<int>(datatype) >= ncclNumTypes) {
      return invalidArgument("datatype=%d is not a valid ncclDataType_t", static_cast<int>(datatype));
    }
    if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice) {
      return invalidArgument("residence=%d is not a valid ncclScalarResidence_t", static_cast<int>(residence));
    }
    BRAID_ASSIGN_OR_RETURN(
        int id, c->createPreMulSum(scalar, static_cast<DType>(datatype), residence == ncclScalarHostImmediate));
    *op = static_cast<ncclRedOp_t>(id);
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return apiCall("ncclRedOpDestroy", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    return c->destroyOp(static_cast<int>(op));
  });
}
