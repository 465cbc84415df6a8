// Profiler plugins (include/nccl_profiler.h, NCCL_PROFILER_PLUGIN): the library is loaded once per process and
// speaks whichever ABI version (4 to 7) it exports; each communicator opens a CommProfiler, which calls the
// plugin's init() and, when destroyed, its finalize(), and turns the communicator's groups and operations into the
// plugin's events (the order and parents are in include/nccl_profiler.h).
//
// Thread safety: one CommProfiler is driven by the thread that owns its communicator at the time (the caller of the
// collectives, or the group's launch thread), as the rest of the communicator's per-group state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/coll_types.h"

namespace braid {

struct ProfilerCommInfo {
  uint64_t commId = 0;
  std::string commName;
  int nNodes = 1;
  int nranks = 1;
  int rank = 0;
};

// What the profiler is told of one API call or operation.
struct ProfiledOp {
  CollKind kind = CollKind::kAllReduce;  // the operation's; for an API call, what the call is (kAlltoAll, ...)
  const char* func = nullptr;            // NCCL's name when it is not the kind's ("Gather", "Scatter"); null: kind's
  size_t count = 0;
  DType dtype = DType::kFloat32;
  int root = -1;  // root, or the peer of a send or receive
  const void* sendBuff = nullptr;
  void* recvBuff = nullptr;
  void* stream = nullptr;
  uint64_t userTag = 0;  // ncclCollConfig_t.userProfilerTag
};

class ProfilerLibrary;

class CommProfiler {
 public:
  // The communicator's profiler, or null: no plugin (NCCL_PROFILER_PLUGIN, once per process), or its init()
  // failed (WARN: the communicator runs unprofiled).
  static std::unique_ptr<CommProfiler> open(const ProfilerCommInfo& info);
  ~CommProfiler();
  CommProfiler(const CommProfiler&) = delete;
  CommProfiler& operator=(const CommProfiler&) = delete;

  // An API call of the current group (`groupDepth`: the caller's nesting): the group's GroupApi event on its
  // first call, then the call's CollApi/P2pApi event, started and stopped. Returns that event's handle, the parent
  // of the call's operations (null when the mask wants neither).
  void* apiCall(const ProfiledOp& call, int groupDepth);
  // The group launches: GroupEndApiStart, and the Group event starts.
  void groupLaunch();
  // An operation starts running with this algorithm and protocol ("RING", "SIMPLE"; null for send/receive); the
  // returned event is stopped by opStop. `api` is apiCall's result for the call it came from. `seq` (collectives):
  // the operation's seqNumber, ~0 the first time (then set), so an attempt started again keeps its number.
  void* opStart(const ProfiledOp& op, void* api, int nChannels, const char* algo, const char* proto, uint64_t* seq);
  void opStop(void* event);
  // A streams backend launches the group's kernels on `stream` (v5+): the KernelLaunch event, stopped by opStop
  // once the launch call returned (as NCCL brackets cuLaunchKernel).
  void* kernelLaunch(void* stream);
  // The group is done (finished, failed or dropped): its Group and GroupApi events stop.
  void groupDone();

 private:
  CommProfiler(std::shared_ptr<ProfilerLibrary> lib, void* ctx, int rank)
      : lib_(std::move(lib)), ctx_(ctx), rank_(rank) {}
  int mask() const;
  void* start(const void* event);

  std::shared_ptr<ProfilerLibrary> lib_;
  void* ctx_;
  int rank_;
  void* groupApi_ = nullptr;
  bool groupApiOpen_ = false;
  void* group_ = nullptr;
  bool groupOpen_ = false;
  uint64_t seq_[16] = {};  // per collective kind, NCCL's coll.seqNumber
};

}  // namespace braid
