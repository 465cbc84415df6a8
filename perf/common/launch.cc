#include "perf/common/launch.h"

#include <cstdlib>

#include "src/bootstrap/launch_env.h"

namespace braid::perf {

bool detectLaunch(LaunchInfo* info, std::string* error) {
  *info = LaunchInfo();
  // braid's one reader of launcher variables (src/bootstrap/launch_env.h, public as braidGetLaunchEnv), so the
  // perf tools, braid-train and the library agree on ranks, the default port and torchrun's rule. It is linked in
  // statically rather than called through braidGetLaunchEnv: these tools also run against NVIDIA's libnccl.so.2,
  // which has no braid extension.
  Result<LaunchEnv> found = detectLaunchEnv();
  if (!found.isOk()) {
    *error = found.status().message();
    return false;
  }
  const LaunchEnv& env = found.value();
  info->worldSize = env.nranks;
  info->procRank = env.rank;
  info->localRank = env.localRank;
  info->localSize = env.localSize;
  info->source = env.source;
  info->masterAddr = env.masterAddr;
  info->masterPort = env.masterPort;
  info->masterPortError = env.rendezvousError;
  info->rendezvous = env.commId;
  info->commIdFromUser = env.commIdFromUser;
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
