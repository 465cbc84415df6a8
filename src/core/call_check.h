// Mismatched collectives (BRAID_CHECK_CALLS=1): before a group runs, every rank sends the others what collectives it
// queued (kind, count, datatype, reduction, root, and an ncclCollConfig_t's algorithm selection and channel bounds),
// and every rank compares. Ranks that called different collectives,
// counts, datatypes, ops or roots all get ncclInvalidUsage naming the ranks and both calls, instead of a hang or
// wrong data. Sends and receives are not compared (a send matches a receive on another rank).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/core/planner.h"

namespace braid {

// One queued collective as the ranks compare it (plain data: it travels through the bootstrap).
struct CallDesc {
  int32_t kind;   // CollKind
  int32_t dtype;  // DType
  int32_t op;     // OpKind for reductions, -1 otherwise (PreMulSum's scalar may differ per rank)
  int32_t root;   // rooted collectives; 0 otherwise
  uint64_t count;
  // ncclCollConfig_t: a hash of the call's algorithm selection (0: none) and its channel bounds (0: none).
  uint64_t selection;
  int32_t minChannels, maxChannels;
  int32_t nvlsChannels;  // nvlsCTAs (0: none)
  int32_t pad;
};

// The collectives among `pending`, in queue order.
std::vector<CallDesc> describeCalls(const std::vector<PendingOp>& pending);
// "AllReduce(count 4, float, sum)", "Broadcast(count 8, int8, root 1)".
std::string describeCall(const CallDesc& c);
// all[r] is rank r's list. Ok when every rank's matches; else kInvalidUsage naming the first difference from
// `rank`'s point of view (its own call and the other rank's), the same text on every rank.
[[nodiscard]] Status compareCalls(const std::vector<std::vector<CallDesc>>& all);

}  // namespace braid
