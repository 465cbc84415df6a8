// A pure schedule checker: runs the Programs of every rank symbolically, without threads or memory traffic, and
// verifies the collective's semantics: every output element of every rank holds exactly the contributions it must
// (each reduced once from every rank, the post-op applied once), every block lands in the right place, no rank
// deadlocks with bounded FIFOs, and no slot is left unconsumed. FIFOs are per (channel, lane, sender, receiver).
#pragma once

#include <vector>

#include "algorithms/ring/ring.h"
#include "algorithms/schedule.h"
#include "src/common/status.h"

namespace braid {

struct CheckSpec {
  CollKind kind;
  int nranks;
  int root = 0;
  size_t count;  // the unit count, as in RingParams
  // programs[rank][i]: run concurrently, as the executor's work items. channels[rank][i] is program i's channel;
  // when empty, every program is on a channel of its own. Programs of one rank, channel and lane that share a
  // peer run in list order.
  std::vector<std::vector<Program>> programs;
  std::vector<std::vector<int>> channels;
};

// OK when the schedule implements the collective; otherwise an error describing the first violation.
Status checkSchedule(const CheckSpec& spec);

}  // namespace braid
