#include "perf/common/launch.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace braid::perf {
namespace {

struct EnvPair {
  const char* size;
  const char* rank;
};

constexpr EnvPair kLaunchers[] = {
    {"WORLD_SIZE", "RANK"},                            // braidrun, torchrun
    {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},  // Open MPI
    {"PMI_SIZE", "PMI_RANK"},                          // MPICH, Intel MPI, Slurm PMI
    {"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"},          // srun (a batch script itself has only SLURM_NTASKS)
};

constexpr const char* kLocalSizeVars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                          "SLURM_NTASKS_PER_NODE"};
constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                          "SLURM_LOCALID"};

constexpr const char* kDefaultMasterAddr = "127.0.0.1";
constexpr const char* kDefaultMasterPort = "29500";

bool parseNonNegative(const char* text, int* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

const char* envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// The first host of a Slurm hostlist: the first value of every bracket group of its first entry
// ("rack[1-2]-n[07,09],gpu1" -> "rack1-n07"), rank 0's host under srun's default block distribution.
std::string firstSlurmHost(const std::string& list) {
  std::string host;
  for (size_t i = 0; i < list.size() && list[i] != ','; ++i) {
    if (list[i] != '[') {
      host += list[i];
      continue;
    }
    const size_t close = list.find(']', i);
    const size_t valueEnd = list.find_first_of(",-]", i + 1);
    host += list.substr(i + 1, valueEnd - i - 1);
    if (close == std::string::npos) break;
    i = close;
  }
  return host;
}

// MASTER_ADDR/MASTER_PORT (or their defaults) as rank 0's listening address.
void rendezvousAddress(LaunchInfo* info) {
  std::string addr = envOr("MASTER_ADDR", "");
  if (addr.empty() && info->source.rfind("SLURM", 0) == 0) {
    addr = firstSlurmHost(envOr("SLURM_STEP_NODELIST", envOr("SLURM_JOB_NODELIST", "")));
  }
  info->masterAddr = addr.empty() ? kDefaultMasterAddr : addr;
  const char* portText = envOr("MASTER_PORT", kDefaultMasterPort);
  int port = 0;
  // A bad port is an error only where it is used (a rendezvous without NCCL_COMM_ID, the Gloo store).
  if (!parseNonNegative(portText, &port) || port < 1 || port > 65535) {
    info->masterPortError = std::string("MASTER_PORT='") + portText + "' is not a port number";
    return;
  }
  const bool torchrun = std::getenv("TORCHELASTIC_RUN_ID") != nullptr;
  if (torchrun && port == 65535) {
    info->masterPortError =
        "MASTER_PORT=65535 under torchrun: braid listens on MASTER_PORT + 1 (torchrun's store holds "
        "MASTER_PORT); pick a lower port or set NCCL_COMM_ID";
    return;
  }
  info->masterPort = torchrun ? port + 1 : port;
}

}  // namespace

bool detectLaunch(LaunchInfo* info, std::string* error) {
  *info = LaunchInfo();
  for (const EnvPair& pair : kLaunchers) {
    const char* size = std::getenv(pair.size);
    const char* rank = std::getenv(pair.rank);
    if (size == nullptr || rank == nullptr) continue;
    int worldSize = 0;
    int procRank = 0;
    if (!parseNonNegative(size, &worldSize) || worldSize < 1) {
      *error = std::string(pair.size) + "='" + size + "' is not a positive integer";
      return false;
    }
    if (!parseNonNegative(rank, &procRank) || procRank >= worldSize) {
      *error = std::string(pair.rank) + "='" + rank + "' is not a rank below " + pair.size + "=" + size;
      return false;
    }
    info->worldSize = worldSize;
    info->procRank = procRank;
    info->source = std::string(pair.size) + "/" + pair.rank;
    rendezvousAddress(info);
    info->localRank = procRank;
    for (const char* name : kLocalRankVars) {
      if (parseNonNegative(std::getenv(name), &info->localRank)) break;
    }
    info->localSize = 0;  // unknown unless a launcher says
    for (const char* name : kLocalSizeVars) {
      if (parseNonNegative(std::getenv(name), &info->localSize) && info->localSize > 0) break;
      info->localSize = 0;
    }
    return true;
  }
  rendezvousAddress(info);  // one process: the Gloo baseline's store still needs an address
  return true;
}

bool prepareRendezvous(LaunchInfo* info, std::string* error) {
  if (info->source.empty()) return true;
  const char* existing = std::getenv("NCCL_COMM_ID");
  if (existing != nullptr && *existing != '\0') {
    info->commId = existing;
    info->commIdFromUser = true;
    return true;
  }
  if (!info->masterPortError.empty()) {
    *error = info->masterPortError;
    return false;
  }
  std::string addr = info->masterAddr;
  if (addr.find(':') != std::string::npos && addr.front() != '[') addr = "[" + addr + "]";  // IPv6 literal
  info->commId = addr + ":" + std::to_string(info->masterPort);
  setenv("NCCL_COMM_ID", info->commId.c_str(), 1);
  return true;
}

}  // namespace braid::perf
