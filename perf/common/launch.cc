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
    {"SLURM_NTASKS", "SLURM_PROCID"},                  // srun
};

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

// The first host of a Slurm hostlist ("node[03-05,9],gpu1" -> "node03"): rank 0's host under srun's default
// block distribution.
std::string firstSlurmHost(const std::string& list) {
  const size_t end = list.find_first_of(",[");
  if (end == std::string::npos || list[end] == ',') return list.substr(0, end);
  const size_t digits = list.find_first_not_of("0123456789", end + 1);
  return list.substr(0, end) + list.substr(end + 1, (digits == std::string::npos ? list.size() : digits) - end - 1);
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
    info->localRank = procRank;
    for (const char* name : kLocalRankVars) {
      if (parseNonNegative(std::getenv(name), &info->localRank)) break;
    }
    info->source = std::string(pair.size) + "/" + pair.rank;
    return true;
  }
  return true;
}

void prepareRendezvous(LaunchInfo* info) {
  if (info->source.empty()) return;
  const char* existing = std::getenv("NCCL_COMM_ID");
  if (existing != nullptr && *existing != '\0') {
    info->commId = existing;
    info->commIdFromUser = true;
    return;
  }
  std::string addr = envOr("MASTER_ADDR", "");
  if (addr.empty() && info->source.rfind("SLURM", 0) == 0) {
    addr = firstSlurmHost(envOr("SLURM_STEP_NODELIST", envOr("SLURM_JOB_NODELIST", "")));
  }
  if (addr.empty()) addr = kDefaultMasterAddr;
  if (addr.find(':') != std::string::npos && addr.front() != '[') addr = "[" + addr + "]";  // IPv6 literal
  info->commId = addr + ":" + envOr("MASTER_PORT", kDefaultMasterPort);
  setenv("NCCL_COMM_ID", info->commId.c_str(), 1);
}

}  // namespace braid::perf
