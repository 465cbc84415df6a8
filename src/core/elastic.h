// Fault-tolerant communicators (NCCL 2.27-2.28): ncclCommShrink and ncclCommRevoke, on host and CUDA communicators.
//
// Revoke stops what a communicator is doing and closes it to new operations while keeping it alive for the calls
// that build a new one from it (split, shrink) and for destruction. Shrink builds a communicator of the ranks that
// remain, which is what a job does after one of its ranks died: the dead rank takes no part, so nothing waits for it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "src/core/comm.h"

namespace braid {

// ncclCommRevoke: stops the work in flight (a CUDA communicator's kernels through the abort word; a host operation
// blocked on another thread returns with an error, and its peers' with it), waits until `quiet()` says no other call
// is inside the communicator (at most BRAID_TIMEOUT), then refuses collectives from then on. Destruction, split and
// shrink still work. Errors: kRemoteError when the communicator is not quiet by the deadline.
[[nodiscard]] Status revokeComm(Communicator& comm, const std::function<bool()>& quiet);

// ncclCommShrink on one of the remaining ranks: a new communicator of `parent`'s ranks but `exclude`, ranked in the
// parent's order. Collective over the remaining ranks only: the first of them sends the new communicator's id to the
// others over the parent's bootstrap, point to point. abortFirst (NCCL_SHRINK_ABORT): the parent is revoked first,
// so work still waiting for an excluded rank stops. Errors: kInvalidArgument for an exclude list that names a rank
// out of range or twice, kInvalidUsage when it names this rank (excluded ranks do not call ncclCommShrink), and the
// new communicator's init errors (a remaining rank that does not come within BRAID_TIMEOUT).
[[nodiscard]] Status shrinkComm(Communicator& parent, const std::vector<int>& exclude, bool abortFirst,
                                const std::function<bool()>& quiet, const CommConfig& config,
                                std::unique_ptr<Communicator>* out);

// ncclCommGetUniqueId: a new id for growing `comm` (its root listener runs from now on). Errors: kInvalidUsage while
// the previous one has not been used by an ncclCommGrow.
[[nodiscard]] Status growId(Communicator& comm, char out[kUniqueIdBytes]);

// ncclCommGrow on an existing rank: a communicator of nRanks ranks in which this rank keeps its rank and the ranks
// from parent.nranks() up are new ones (which call ncclCommInitRank's path with the id). Collective over the
// parent's ranks (one of them, the root, passes the id ncclCommGetUniqueId gave it; the others null) and the new
// ones. Errors: kInvalidArgument for nRanks not above the parent's size, kInvalidUsage when not exactly one rank
// passed an id, and the new communicator's init errors.
[[nodiscard]] Status growComm(Communicator& parent, int nRanks, const char* id, const CommConfig& config,
                              std::unique_ptr<Communicator>* out);

}  // namespace braid
