// Queuing operations on a communicator: the checks NCCL makes at call time, each error naming the argument and its
// value, then a PendingOp that the outermost group end plans and runs. All-to-all, gather, scatter and
// braidAlltoAllv become groups of sends and receives here (or the all-to-all's log-step schedule), as NCCL builds
// them. src/api only maps handles to communicators and opens the implicit group around these calls.
#pragma once

#include <cstddef>
#include <memory>

#include "src/common/coll_types.h"
#include "src/common/status.h"

namespace braid {

class Communicator;

// One call's arguments, in the API's terms (datatype and op are ncclDataType_t / ncclRedOp_t values, checked here).
struct CollRequest {
  const char* fn;  // the API function, for the INFO line
  CollKind kind;   // (enqueuePattern sets it per send and receive)
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int datatype;
  int op;              // read by reducing collectives only (any value, negative ones too, is checked there)
  int root;            // the root, or the peer of a send or receive
  const void* handle;  // the caller's ncclComm_t, named in errors
  const void* stream;  // must be null on a host communicator
  // The flight recorder entry of the call this one is part of (an all-to-all's sends and receives share it); none:
  // enqueueColl records the call itself.
  uint64_t flightToken = ~uint64_t(0);
  // The profiler's event of the call this one is part of (null: enqueueColl reports the call itself), and the
  // call's ncclCollConfig_t.userProfilerTag.
  void* profApi = nullptr;
  bool apiReported = false;  // profApi is the call's event (null when the profiler did not want one)
  uint64_t userTag = 0;
  // ncclCollConfig_t's algorithm selection (null or "": the communicator's) and whether one that leaves nothing is an
  // error (forceAlgSelection) rather than ignored; its channel bounds (0: none); its NVLS-style CTAs (nvlsCTAs; 0:
  // the communicator's).
  const char* algSelection = nullptr;
  bool forceAlgSelection = true;
  int minChannels = 0, maxChannels = 0;
  int nvlsChannels = 0;
};

// Whether the communicator takes operations now on `stream`: errors (kInvalidUsage) for one still initialising,
// failed, finalized or revoked, a non-null stream on a host communicator, a stream the backend cannot order after,
// and the failure of earlier work.
[[nodiscard]] Status checkUsable(Communicator& comm, const void* handle, const void* stream);
// A valid ncclDataType_t value, or an error naming it.
[[nodiscard]] Status checkDatatype(int datatype);

// Checks and queues one operation; a count of 0 is checked and queues nothing. Errors: kInvalidArgument (a bad
// datatype, op, root/peer, count or buffer, or overlapping buffers outside the in-place positions), kInvalidUsage
// (a communicator still initialising, failed, finalized, or a non-null stream on a host communicator).
[[nodiscard]] Status enqueueColl(const std::shared_ptr<Communicator>& comm, const CollRequest& req);
// One call outside any group (ncclAllReduce and the others, ncclSend, ncclRecv): checks it as enqueueColl does and
// runs it as a group of its own would, without the thread's group state (the latency path). Inside a group it
// queues, as enqueueColl does. Errors: enqueueColl's, then the launch's.
[[nodiscard]] Status runLone(const std::shared_ptr<Communicator>& comm, const CollRequest& req);

// NCCL's collectives built from sends and receives: all-to-all (every rank sends and receives a block per peer),
// gather (the root receives a block from every rank) and scatter (the root sends a block to every rank).
enum class P2pPattern { kAlltoAll, kGather, kScatter };
[[nodiscard]] Status enqueuePattern(const std::shared_ptr<Communicator>& comm, P2pPattern pattern,
                                    const CollRequest& req);

// braidAlltoAllv's arguments (counts and displacements in elements, one entry per rank).
struct AlltoAllvRequest {
  const void* sendbuff;
  const size_t* sendcounts;
  const size_t* sdispls;
  void* recvbuff;
  const size_t* recvcounts;
  const size_t* rdispls;
  int datatype;
  const void* handle;
  const void* stream;
};
[[nodiscard]] Status enqueueAlltoAllv(const std::shared_ptr<Communicator>& comm, const AlltoAllvRequest& req);

}  // namespace braid
