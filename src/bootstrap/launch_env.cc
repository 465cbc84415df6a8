#include "src/bootstrap/launch_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "src/common/params.h"

namespace braid {
namespace {

struct Pair {
  const char* size;
  const char* rank;
};

constexpr Pair kLaunchers[] = {
    {"WORLD_SIZE", "RANK"},                            // braidrun, torchrun
    {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},  // Open MPI
    {"PMI_SIZE", "PMI_RANK"},                          // MPICH, Intel MPI, Slurm's PMI
    {"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"},          // srun
};
constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                          "SLURM_LOCALID"};
constexpr const char* kLocalSizeVars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                          "SLURM_NTASKS_PER_NODE"};

// A decimal integer in [0, INT_MAX] and nothing else.
bool parseCount(const std::string& text, int* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX || text[0] == '+' || text[0] == '-' || text[0] == ' ') {
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

void rendezvous(LaunchEnv* env) {
  std::string addr = launcherVariable("MASTER_ADDR");
  if (addr.empty() && env->source.rfind("SLURM", 0) == 0) {
    std::string list = launcherVariable("SLURM_STEP_NODELIST");
    if (list.empty()) list = launcherVariable("SLURM_JOB_NODELIST");
    addr = firstSlurmHost(list);
  }
  env->masterAddr = addr.empty() ? "127.0.0.1" : addr;
  const std::string portText = launcherVariable("MASTER_PORT");
  int port = kDefaultMasterPort;
  if (!portText.empty() && (!parseCount(portText, &port) || port < 1 || port > 65535)) {
    env->rendezvousError = "MASTER_PORT='" + portText + "' is not a port number (1..65535)";
    port = 0;
  } else if (env->torchrun && port == 65535) {
    env->rendezvousError =
        "MASTER_PORT=65535 under torchrun: braid listens on MASTER_PORT + 1 (torchrun's store holds MASTER_PORT); "
        "pick a lower port or set NCCL_COMM_ID";
    port = 0;
  } else if (env->torchrun) {
    ++port;
  }
  env->masterPort = port;
  const std::string user = params::CommId();
  if (!user.empty()) {
    env->commId = user;
    env->commIdFromUser = true;
    return;
  }
  if (port == 0) return;
  std::string host = env->masterAddr;
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";  // an IPv6 literal
  env->commId = host + ":" + std::to_string(port);
}

}  // namespace

std::string firstSlurmHost(const std::string& list) {
  std::string host;
  for (size_t i = 0; i < list.size() && list[i] != ','; ++i) {
    if (list[i] != '[') {
      host += list[i];
      continue;
    }
    // A bracket group: its first value ("[07,09]" and "[1-2]" give "07" and "1").
    const size_t close = list.find(']', i);
    const size_t valueEnd = list.find_first_of(",-]", i + 1);
    host += list.substr(i + 1, valueEnd == std::string::npos ? std::string::npos : valueEnd - i - 1);
    if (close == std::string::npos) break;
    i = close;
  }
  return host;
}

Result<LaunchEnv> detectLaunchEnv() {
  LaunchEnv env;
  env.torchrun = !launcherVariable("TORCHELASTIC_RUN_ID").empty();
  for (const Pair& p : kLaunchers) {
    const std::string size = launcherVariable(p.size), rank = launcherVariable(p.rank);
    if (size.empty() || rank.empty()) continue;
    if (!parseCount(size, &env.nranks) || env.nranks < 1) {
      return invalidArgument("%s='%s' is not a positive integer", p.size, size.c_str());
    }
    if (!parseCount(rank, &env.rank) || env.rank >= env.nranks) {
      return invalidArgument("%s='%s' is not a rank below %s=%s", p.rank, rank.c_str(), p.size, size.c_str());
    }
    env.source = std::string(p.size) + "/" + p.rank;
    break;
  }
  env.localRank = env.rank;
  for (const char* name : kLocalRankVars) {
    if (parseCount(launcherVariable(name), &env.localRank)) break;
  }
  for (const char* name : kLocalSizeVars) {
    int n = 0;
    if (parseCount(launcherVariable(name), &n) && n > 0) {
      env.localSize = n;
      break;
    }
  }
  if (env.source.empty() && env.localSize == 0) env.localSize = 1;  // one process, alone on its host
  rendezvous(&env);
  return env;
}

}  // namespace braid
