// The planner: a pure function from a communicator's shape and its queued operations (each with the selector's
// choice) to a plan: per operation and channel, the Program and its buffers (PlannedWork, backends/backend.h), plus
// the links the plan uses. No connectors, no allocation of buffers: scratch the plan needs is a size in the plan,
// provided by the backend at launch. Every rank plans the same group alike, so peers' programs match.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/selector/selector.h"
#include "algorithms/tree/tree.h"
#include "src/backends/backend.h"
#include "src/common/coll_types.h"
#include "src/common/dtype.h"
#include "src/common/status.h"

namespace braid {

// Programs of one channel on different lanes use separate connectors to the same peer (the double binary tree's
// second tree is lane 1).
constexpr int kLanes = 2;

// One queued operation of the current group (validated at call time, run at group end).
class Selector;

struct PendingOp {
  CollKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // the unit count (see RingParams)
  DType dtype;
  ReduceOp op;
  int root;                             // root for rooted collectives, peer for send/recv
  uint64_t flightToken = ~uint64_t(0);  // its flight recorder entry (FlightRecorder::queued), or none
  void* stream = nullptr;               // the user's CUDA stream (a streams backend; null: the legacy stream)
  // A profiler plugin's events (src/core/profiler_plugin.h): the API call's (the parent) and the operation's own.
  void* profApi = nullptr;
  mutable void* profEvent = nullptr;
  mutable uint64_t profSeq = ~uint64_t(0);  // its Coll event's seqNumber, once it has one
  uint64_t userTag = 0;                     // ncclCollConfig_t.userProfilerTag
  // ncclCollConfig_t: the selector of the call's algSelection (null: the communicator's), its channel bounds on the
  // FIFO path (0: none), and the lanes of an NVLS-style launch on a CUDA communicator (nvlsCTAs; 0: all).
  const Selector* selector = nullptr;
  int minChannels = 0, maxChannels = 0;
  int nvlsChannels = 0;
};

// Bytes of one queued operation's unit (NCCL's count times the type size).
size_t unitBytes(const PendingOp& op);

// One direction of one (channel, peer, lane) link.
struct Link {
  int channel, peer, lane;
  bool operator<(const Link& o) const;
};

// The rings and trees a communicator's schedules follow (from the topology search, fixed at init).
struct CommSchedules {
  std::vector<std::vector<int>> rings;  // [channel] ranks in ring order
  std::vector<int> treeOrder;           // trees are built over positions: position i is rank treeOrder[i]
  std::vector<int> treePos;             // [rank] its position
  bool hostTrees = false;               // several hosts: NCCL's trees (chains in hosts, binary across), from myTree
  TreeNode myTree[2];                   // this rank's place in those two trees
};

// The FIFO slot sizes every rank agreed on.
struct FifoSizes {
  size_t slotBytes = 0;    // one Simple slot
  size_t llSlotBytes = 0;  // one LL slot (lines)
};

// What planning needs to know of the communicator.
struct PlanShape {
  int rank = 0;
  int nranks = 1;
  int nChannels = 1;
  FifoSizes fifo;
  const CommSchedules* sched = nullptr;
  bool deterministic = false;  // BRAID_DETERMINISTIC: one tree, fixed order
};

struct PlanOp {
  const PendingOp* op = nullptr;
  FifoChoice choice;
};

struct Plan {
  std::vector<PlannedWork> works;  // in execution order per channel
  std::vector<Link> sendLinks;     // every link the works send on, once each
  std::vector<Link> recvLinks;
  size_t totalBytes = 0;  // bytes the operations move (their unit bytes, per rank for per-rank collectives)
};

// Plans `ops` (in the order given: the caller puts collectives before point-to-point, as NCCL schedules a group).
[[nodiscard]] Status planOps(const PlanShape& shape, const std::vector<PlanOp>& ops, Plan* plan);

}  // namespace braid
