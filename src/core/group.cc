#include "src/core/group.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "src/common/thread_scratch.h"

namespace braid {
namespace {

struct GroupJob {
  const void* key;  // jobs of one key run in order, on one thread
  std::function<Status()> run;
};

struct GroupState {
  std::vector<std::shared_ptr<Communicator>> comms;
  std::vector<GroupJob> jobs;
  Status error;
  std::vector<Communicator*> raw;  // groupEnd's scratch: the per-call path allocates nothing
};

// Through threadScratch: one TLS lookup per use, where a thread_local with a constructor costs two per access and
// GCC derives its address again after each call.
GroupState& groupState() {
  return threadScratch<GroupState, GroupState>();
}
// Apart from the state: a plain int needs no TLS guard, so inGroup(), which every call asks, is one lookup.
thread_local int tlsGroupDepth = 0;

// groupEnd and groupSimulateEnd (simulatedUs non-null: price and drop instead of running).
Status groupEndImpl(double* simulatedUs);

// Every handle ever returned (live or a tombstone): a pointer that is not in it was never a communicator, and is
// refused before anything reads through it. Read on every call, written at init only.
struct HandleRegistry {
  std::shared_mutex mu;
  std::unordered_set<const ncclComm*> known;
};
HandleRegistry& handles() {
  static HandleRegistry* r = new HandleRegistry();  // never destroyed: calls may come during exit
  return *r;
}

bool knownHandle(const ncclComm* h) {
  // Handles are never removed from the registry (tombstones stay), so a handle this thread found once is known for
  // good: the latency path's calls, which use one communicator over and over, skip the lock.
  thread_local const ncclComm* lastKnown = nullptr;
  if (h == lastKnown) return true;
  HandleRegistry& r = handles();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  if (r.known.count(h) == 0) return false;
  lastKnown = h;
  return true;
}

}  // namespace

ncclComm* registerComm(std::shared_ptr<Communicator> comm) {
  auto* h = new ncclComm();  // never deleted: see the tombstone note in group.h
  {
    std::lock_guard<SpinLock> lock(h->mu);
    h->impl = std::move(comm);
    h->live = true;
  }
  HandleRegistry& r = handles();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.known.insert(h);
  return h;
}

Result<std::shared_ptr<Communicator>> lookupComm(const ncclComm* handle, const char* argName) {
  if (handle == nullptr) return invalidArgument("%s is NULL", argName);
  if (!knownHandle(handle)) {
    return invalidArgument("%s=%p is not a communicator (never returned by an ncclCommInit* call)", argName,
                           static_cast<const void*>(handle));
  }
  std::lock_guard<SpinLock> lock(const_cast<ncclComm*>(handle)->mu);
  if (!handle->live || !handle->impl) {
    return invalidArgument("%s=%p was destroyed or aborted (use after ncclCommDestroy/ncclCommAbort)", argName,
                           static_cast<const void*>(handle));
  }
  return handle->impl;
}

std::shared_ptr<Communicator> retireComm(ncclComm* handle) {
  if (handle == nullptr || !knownHandle(handle)) return nullptr;
  std::lock_guard<SpinLock> lock(handle->mu);
  if (!handle->live) return nullptr;
  handle->live = false;
  return std::move(handle->impl);
}

void groupStart() {
  ++tlsGroupDepth;
}
bool inGroup() {
  return tlsGroupDepth > 0;
}
int groupDepth() {
  return tlsGroupDepth;
}

void groupAddComm(const std::shared_ptr<Communicator>& comm) {
  auto& v = groupState().comms;
  if (std::find(v.begin(), v.end(), comm) == v.end()) v.push_back(comm);
}

void groupAddJob(std::function<Status()> job, const void* key) {
  groupState().jobs.push_back(GroupJob{key, std::move(job)});
}

void groupRecordError(const Status& st) {
  GroupState& g = groupState();
  if (g.error.isOk() && !st.isOk()) g.error = st;
}

Status groupEnd() {
  return groupEndImpl(nullptr);
}

Status groupSimulateEnd(double* estimatedUs) {
  *estimatedUs = 0;
  return groupEndImpl(estimatedUs);
}

namespace {

Status groupEndImpl(double* simulatedUs) {
  if (tlsGroupDepth <= 0) {
    return invalidUsage("%s called without a matching ncclGroupStart",
                        simulatedUs != nullptr ? "ncclGroupSimulateEnd" : "ncclGroupEnd");
  }
  if (--tlsGroupDepth > 0) return Status::ok();
  GroupState& g = groupState();
  std::vector<GroupJob> jobs = std::move(g.jobs);
  std::vector<std::shared_ptr<Communicator>> comms = std::move(g.comms);
  Status error = g.error;
  g.jobs.clear();
  g.comms.clear();
  g.error = Status();

  // Grouped inits (and window registrations) rendezvous with each other, so they must run concurrently: a thread
  // per key, running that key's jobs in the order they were added (one communicator's collective calls in order).
  if (!jobs.empty()) {
    std::vector<std::vector<size_t>> lanes;
    std::vector<const void*> keys;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const void* k = jobs[i].key;
      auto at = k == nullptr ? keys.end() : std::find(keys.begin(), keys.end(), k);
      if (at == keys.end()) {
        keys.push_back(k);
        lanes.emplace_back();
        at = keys.end() - 1;
      }
      lanes[static_cast<size_t>(at - keys.begin())].push_back(i);
    }
    std::vector<Status> results(jobs.size());
    std::vector<std::thread> threads;
    for (const std::vector<size_t>& lane : lanes) {
      threads.emplace_back([&jobs, &results, &lane] {
        for (size_t i : lane) {
          results[i] = jobs[i].run();
          if (!results[i].isOk()) break;  // the later ones depend on it
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : results) {
      if (error.isOk() && !st.isOk()) error = st;
    }
  }
  if (!error.isOk()) {
    for (auto& c : comms) c->clearPending();
    return error;
  }
  if (simulatedUs != nullptr) {
    for (auto& c : comms) *simulatedUs = std::max(*simulatedUs, c->simulatePending());
    return Status::ok();
  }
  std::vector<Communicator*>& raw = g.raw;
  raw.clear();
  for (auto& c : comms) {
    if (!c->pending().empty()) raw.push_back(c.get());
  }
  Status result = raw.empty() ? Status::ok() : Communicator::launch(raw);
  if (g.comms.empty()) {  // hand the storage back for the next group
    comms.clear();
    g.comms.swap(comms);
  }
  return result;
}

}  // namespace

}  // namespace braid
