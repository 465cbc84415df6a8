// Groups (ncclGroupStart/End) and the registry of live communicator handles.
//
// Group state is per thread: a depth counter, the communicators with queued operations, and deferred init jobs.
// Every collective outside a group runs as a group of one. At the outermost ncclGroupEnd, init jobs are joined
// first, then the queued operations of all communicators are planned, connected and executed together, so one
// thread can drive several ranks of a clique and grouped send/recv never deadlocks.
#pragma once

#include <functional>
#include <memory>

#include "src/common/spin_lock.h"
#include "src/core/comm.h"

// The object behind ncclComm_t. Handles are never freed: a destroyed handle stays a tombstone, so using it after
// ncclCommDestroy is reported as an error instead of touching freed memory.
struct ncclComm {
  braid::SpinLock mu;  // guards impl and live; per handle, so ranks driven by different threads never contend
  std::shared_ptr<braid::Communicator> impl;
  bool live = false;
};

namespace braid {

ncclComm* registerComm(std::shared_ptr<Communicator> comm);
// The communicator behind a live handle, or an error naming the argument.
Result<std::shared_ptr<Communicator>> lookupComm(const ncclComm* handle, const char* argName);
// Marks the handle dead and returns its communicator (null if it was not live).
std::shared_ptr<Communicator> retireComm(ncclComm* handle);

void groupStart();
bool inGroup();
int groupDepth();
// Ends one level; at depth 0 runs everything queued. Returns the first error.
Status groupEnd();
// ncclGroupSimulateEnd: ends one level like groupEnd, but at depth 0 runs only the grouped inits; the queued
// operations are priced and dropped. *estimatedUs: the group's predicted time, each communicator's operations one
// after another, communicators side by side (the slowest); 0 when something is still nested.
Status groupSimulateEnd(double* estimatedUs);
// Queues the communicator for execution at the outermost group end.
void groupAddComm(const std::shared_ptr<Communicator>& comm);
// A job run at the outermost group end before any operation (a grouped ncclCommInitRank, window registration or
// host signal wait). Jobs run concurrently, but those with the same non-null key (their communicator) one after
// another in the order added; after one of them fails, the rest of its key do not run.
void groupAddJob(std::function<Status()> job, const void* key = nullptr);
// The first error of an operation queued in the current group (reported by ncclGroupEnd).
void groupRecordError(const Status& st);

}  // namespace braid
