#include "perf/common/launch.h"

#include <cstdlib>

#include "nccl.h"

namespace braid::perf {

bool detectLaunch(LaunchInfo* info, std::string* error) {
  *info = LaunchInfo();
  // The library reads the launcher's variables (braidGetLaunchEnv), so the perf tools, braid-train and any program
  // using it agree on ranks, the default port and torchrun's rule.
  braidLaunchEnv_t env;
  if (braidGetLaunchEnv(&env) != ncclSuccess) {
    *error = ncclGetLastError(nullptr);
    return false;
  }
  info->worldSize = env.nranks;
  info->procRank = env.rank;
  info->localRank = env.localRank;
  info->localSize = env.localSize;
  info->source = env.source;
  info->masterAddr = env.masterAddr;
  info->masterPort = env.masterPort;
  info->masterPortError = env.rendezvousError;
  info->rendezvous = env.commId;
  info->commIdFromUser = env.commIdFromUser != 0;
  return true;
}

bool prepareRendezvous(LaunchInfo* info, std::string* error) {
  if (info->source.empty()) return true;
  if (info->rendezvous.empty()) {
    *error = info->masterPortError;
    return false;
  }
  info->commId = info->rendezvous;
  if (!info->commIdFromUser) setenv("NCCL_COMM_ID", info->commId.c_str(), 1);
  return true;
}

}  // namespace braid::perf
