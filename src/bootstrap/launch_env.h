// The launcher that started this process, read once, in one place: braid's public braidGetLaunchEnv (include/nccl.h)
// answers from it, and braid-train and the perf tools use that instead of reading launcher variables themselves.
//
// Rank and size: the first complete pair of WORLD_SIZE/RANK (braidrun, torchrun), OMPI_COMM_WORLD_SIZE/
// OMPI_COMM_WORLD_RANK (Open MPI), PMI_SIZE/PMI_RANK (MPICH, Intel MPI, Slurm's PMI), SLURM_STEP_NUM_TASKS/
// SLURM_PROCID (srun; a batch script itself has only SLURM_NTASKS). Local rank and size: LOCAL_RANK/
// LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_*, MPI_LOCALRANKID/MPI_LOCALNRANKS, SLURM_LOCALID/SLURM_NTASKS_PER_NODE.
// Rendezvous: NCCL_COMM_ID when set; else MASTER_ADDR (under srun without it, the first host of
// SLURM_STEP_NODELIST, where rank 0 runs; else 127.0.0.1) and MASTER_PORT (default 29500, torchrun's), plus one
// under torchrun (TORCHELASTIC_RUN_ID set): torchrun's agent already listens on MASTER_PORT with its own store.
#pragma once

#include <string>

#include "src/common/status.h"

namespace braid {

constexpr int kDefaultMasterPort = 29500;

struct LaunchEnv {
  int rank = 0;
  int nranks = 1;
  int localRank = 0;            // among its host's processes; rank when no launcher says
  int localSize = 0;            // processes on its host; 0 when no launcher says
  bool torchrun = false;        // TORCHELASTIC_RUN_ID is set
  std::string source;           // the variables rank and size came from ("WORLD_SIZE/RANK"); "" without a launcher
  std::string masterAddr;       // global rank 0's host
  int masterPort = 0;           // where global rank 0's bootstrap listens (0: unusable, see rendezvousError)
  std::string commId;           // "host:port" every rank derives the unique id from; "" when unusable
  bool commIdFromUser = false;  // commId is the user's NCCL_COMM_ID
  std::string rendezvousError;  // why masterPort is 0 (MASTER_PORT malformed, or 65535 under torchrun)
};

// Reads the launcher's variables. Errors (kInvalidArgument) name the variable and its value: a size that is not a
// positive integer, a rank not below the size. A malformed MASTER_PORT is not an error here (an MPI launch may not
// need it): masterPort is then 0, rendezvousError says why, and commId is empty unless NCCL_COMM_ID is set.
[[nodiscard]] Result<LaunchEnv> detectLaunchEnv();

// The first host of a Slurm host list: "rack[1-2]-n[07,09],gpu1" -> "rack1-n07".
std::string firstSlurmHost(const std::string& list);

}  // namespace braid
