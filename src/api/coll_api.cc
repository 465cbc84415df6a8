// Collectives, point-to-point, groups and reduction operators: handle lookup and the implicit group here; the checks
// and the queuing in the core (src/core/enqueue.h).
#include <cstddef>

#include "src/api/api.h"
#include "src/core/enqueue.h"
#include "src/core/group.h"

namespace braid {
namespace {

// Runs `body` as a group of its own unless the caller opened one. A call that fails its checks queues nothing.
template <typename F>
Status withImplicitGroup(F&& body) {
  groupStart();
  Status st = body();
  Status end = groupEnd();
  return st.isOk() ? end : st;
}

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
  const ncclCollConfig_t* config = nullptr;  // the nccl*Config variants' (NULL: the plain call)

  CollRequest request() const {
    CollRequest r{fn, kind, sendbuff, recvbuff, count, static_cast<int>(datatype), op, root, comm, stream};
    if (config != nullptr) {
      r.userTag = config->userProfilerTag;
      r.algSelection = config->algSelection;
      r.forceAlgSelection = config->forceAlgSelection != 0;
      r.minChannels = config->minCTAs != NCCL_CONFIG_UNDEF_INT ? config->minCTAs : 0;
      r.maxChannels = config->maxCTAs != NCCL_CONFIG_UNDEF_INT ? config->maxCTAs : 0;
      r.nvlsChannels = config->nvlsCTAs != NCCL_CONFIG_UNDEF_INT ? config->nvlsCTAs : 0;
    }
    return r;
  }
};

// A per-collective configuration (ncclCollConfig_t): made from NCCL_COLLCONFIG_INITIALIZER, every field valid, and
// only what braid honours set. Vendor options are accepted (braid owns none); the profiler tag reaches a v7 profiler
// plugin's events; algSelection restricts the call's algorithms (enqueueColl), minCTAs/maxCTAs its FIFO-path
// channels (the planner) and nvlsCTAs the CTAs (lanes) of a CUDA communicator's NVLS-style launch.
Status checkCollConfig(const ncclCollConfig_t* cc) {
  if (cc == nullptr) return Status::ok();
  const ncclCollConfig_t init = NCCL_COLLCONFIG_INITIALIZER;
  // 2.31's layout (without launchCompletionEvent) is a prefix of 2.32's: programs built against either work.
  if (cc->magic != init.magic || cc->size < offsetof(ncclCollConfig_t, launchCompletionEvent)) {
    return invalidArgument(
        "config=%p was not initialized with NCCL_COLLCONFIG_INITIALIZER (size %zu, magic 0x%x; expected at least %zu "
        "and 0x%x)",
        static_cast<const void*>(cc), cc->size, cc->magic, offsetof(ncclCollConfig_t, launchCompletionEvent),
        init.magic);
  }
  if (cc->forceAlgSelection != 0 && cc->forceAlgSelection != 1) {
    return invalidArgument("config->forceAlgSelection=%d must be 0 or 1", cc->forceAlgSelection);
  }
  if (cc->CTAPolicy != NCCL_CONFIG_UNDEF_INT &&
      (cc->CTAPolicy & ~(NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO))) {
    return invalidArgument("config->CTAPolicy=%d is not a combination of NCCL_CTA_POLICY_*", cc->CTAPolicy);
  }
  if (cc->cgaClusterSize != NCCL_CONFIG_UNDEF_INT && (cc->cgaClusterSize < 0 || cc->cgaClusterSize > 8)) {
    return invalidArgument("config->cgaClusterSize=%d must be in 0..8", cc->cgaClusterSize);
  }
  for (const auto& bound : {std::make_pair("minCTAs", cc->minCTAs), std::make_pair("maxCTAs", cc->maxCTAs),
                            std::make_pair("nvlsCTAs", cc->nvlsCTAs)}) {
    if (bound.second != NCCL_CONFIG_UNDEF_INT && (bound.second < 1 || bound.second > 64)) {
      return invalidArgument("config->%s=%d must be in 1..64 (or NCCL_CONFIG_UNDEF_INT)", bound.first, bound.second);
    }
  }
  if (cc->minCTAs != NCCL_CONFIG_UNDEF_INT && cc->maxCTAs != NCCL_CONFIG_UNDEF_INT && cc->minCTAs > cc->maxCTAs) {
    return invalidArgument("config->minCTAs=%d exceeds config->maxCTAs=%d", cc->minCTAs, cc->maxCTAs);
  }
  return Status::ok();
}

// NCCL 2.32's launchCompletionEvent of a config (null when the config is 2.31's size or has none).
void* launchEventOf(const ncclCollConfig_t* cc) {
  if (cc == nullptr || cc->size < offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof(cudaEvent_t)) {
    return nullptr;
  }
  return cc->launchCompletionEvent;
}

// Records the config's launch event, if any, before the call queues its work: in stream order the event then
// precedes the collective's kernel.
Status recordLaunchEvent(Communicator& c, const CollArgs& a) {
  void* event = launchEventOf(a.config);
  if (event == nullptr) return Status::ok();
  return c.backend().recordUserEvent(event, static_cast<void*>(a.stream));
}

ncclResult_t collective(const CollArgs& a) {
  return apiCall(a.fn, [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkCollConfig(a.config));
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(a.comm, "comm"));
    BRAID_RETURN_IF_ERROR(recordLaunchEvent(*c, a));
    return runLone(c, a.request());
  });
}

ncclResult_t pattern(P2pPattern p, const CollArgs& a) {
  return apiCall(a.fn, [&]() {
    BRAID_RETURN_IF_ERROR(checkCollConfig(a.config));
    return withImplicitGroup([&]() -> Status {
      BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(a.comm, "comm"));
      BRAID_RETURN_IF_ERROR(recordLaunchEvent(*c, a));
      return enqueuePattern(c, p, a.request());
    });
  });
}

}  // namespace
}  // namespace braid

using namespace braid;

extern "C" __attribute__((visibility("default"))) ncclResult_t braidAlltoAllv(
    const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
    const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return apiCall("braidAlltoAllv", [&]() {
    return withImplicitGroup([&]() -> Status {
      BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
      return enqueueAlltoAllv(c, AlltoAllvRequest{sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                                                  static_cast<int>(datatype), comm, stream});
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
  return pattern(P2pPattern::kAlltoAll, CollArgs{"ncclAlltoAll", CollKind::kAlltoAll, sendbuff, recvbuff, count,
                                                 datatype, -1, 0, comm, stream});
}

BRAID_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  return pattern(P2pPattern::kGather,
                 CollArgs{"ncclGather", CollKind::kRecv, sendbuff, recvbuff, count, datatype, -1, root, comm, stream});
}

BRAID_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  return pattern(P2pPattern::kScatter,
                 CollArgs{"ncclScatter", CollKind::kSend, sendbuff, recvbuff, count, datatype, -1, root, comm, stream});
}

// The NCCL 2.31 variants with a per-collective configuration.
BRAID_API(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
          const ncclCollConfig_t* config) {
  return collective(CollArgs{"ncclAllReduceConfig", CollKind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0,
                             comm, stream, config});
}

BRAID_API(ncclResult_t, ncclBroadcastConfig, const void* sendbuff, void* recvbuff, size_t count,
          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return collective(CollArgs{"ncclBroadcastConfig", CollKind::kBroadcast, sendbuff, recvbuff, count, datatype, -1, root,
                             comm, stream, config});
}

BRAID_API(ncclResult_t, ncclReduceConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return collective(CollArgs{"ncclReduceConfig", CollKind::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm,
                             stream, config});
}

BRAID_API(ncclResult_t, ncclAllGatherConfig, const void* sendbuff, void* recvbuff, size_t sendcount,
          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return collective(CollArgs{"ncclAllGatherConfig", CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, -1,
                             0, comm, stream, config});
}

BRAID_API(ncclResult_t, ncclReduceScatterConfig, const void* sendbuff, void* recvbuff, size_t recvcount,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
          const ncclCollConfig_t* config) {
  return collective(CollArgs{"ncclReduceScatterConfig", CollKind::kReduceScatter, sendbuff, recvbuff, recvcount,
                             datatype, op, 0, comm, stream, config});
}

BRAID_API(ncclResult_t, ncclAlltoAllConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return pattern(P2pPattern::kAlltoAll, CollArgs{"ncclAlltoAllConfig", CollKind::kAlltoAll, sendbuff, recvbuff, count,
                                                 datatype, -1, 0, comm, stream, config});
}

BRAID_API(ncclResult_t, ncclGatherConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return pattern(P2pPattern::kGather, CollArgs{"ncclGatherConfig", CollKind::kRecv, sendbuff, recvbuff, count, datatype,
                                               -1, root, comm, stream, config});
}

BRAID_API(ncclResult_t, ncclScatterConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return pattern(P2pPattern::kScatter, CollArgs{"ncclScatterConfig", CollKind::kSend, sendbuff, recvbuff, count,
                                                datatype, -1, root, comm, stream, config});
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
  return apiCall("ncclGroupSimulateEnd", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(simInfo, "ncclGroupSimulateEnd", "simInfo"));
    const ncclSimInfo_t init = NCCL_SIM_INFO_INITIALIZER;
    if (simInfo->magic != init.magic || simInfo->size < sizeof(ncclSimInfo_t)) {
      return invalidArgument(
          "simInfo=%p was not initialized with NCCL_SIM_INFO_INITIALIZER (size %zu, magic 0x%x; expected at least %zu "
          "and 0x%x)",
          static_cast<void*>(simInfo), simInfo->size, simInfo->magic, sizeof(ncclSimInfo_t), init.magic);
    }
    double us = 0;
    BRAID_RETURN_IF_ERROR(groupSimulateEnd(&us));
    simInfo->estimatedTime = static_cast<float>(us);
    return Status::ok();
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
