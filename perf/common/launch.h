// How a perf tool finds its peers.
//
// Launched by braidrun, torchrun, mpirun or srun, a process is rank RANK of WORLD_SIZE processes (the first complete
// pair of WORLD_SIZE/RANK, OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK, PMI_SIZE/PMI_RANK, SLURM_STEP_NUM_TASKS/
// SLURM_PROCID) and runs -t ranks as threads: global rank = RANK * t + thread, nranks = WORLD_SIZE * t.
// The library reads those variables (braidGetLaunchEnv in include/nccl.h, which documents them), so the perf tools
// and braid-train agree. Rendezvous is NCCL's own: unless NCCL_COMM_ID is already set, it is set to
// MASTER_ADDR:MASTER_PORT (default 127.0.0.1:29500; MASTER_PORT + 1 under torchrun; under srun without
// MASTER_ADDR, the first host of SLURM_STEP_NODELIST, where rank 0 runs); every process then calls ncclGetUniqueId
// (which derives the id from that address) and global rank 0's ncclCommInitRank starts the root listener there. In an
// MPI build under mpirun (Open MPI, MPICH/PMI) the id is broadcast with MPI instead, as in nccl-tests' MPI build, so a
// hostfile alone spans hosts. Without those variables there is one process, and the id comes from ncclGetUniqueId in
// the main thread.
#pragma once

#include <string>

namespace braid::perf {

struct LaunchInfo {
  int worldSize = 1;            // processes
  int procRank = 0;             // this process
  int localRank = 0;            // this process among those of its host (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
                                // MPI_LOCALRANKID, SLURM_LOCALID; procRank when none is set): picks its GPUs
  int localSize = 1;            // processes on this host (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE,
                                // MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE); 0 when a launcher started us but none
                                // of those says
  std::string source;           // the variables it came from ("WORLD_SIZE/RANK"), empty for a single process
  std::string commId;           // NCCL_COMM_ID used for the rendezvous, empty for a single process
  std::string rendezvous;       // the rendezvous braid derived (NCCL_COMM_ID or MASTER_ADDR:port); empty: unusable
  bool commIdFromUser = false;  // NCCL_COMM_ID was set before we started
  std::string masterAddr;       // rank 0's host: MASTER_ADDR, Slurm's first host, or 127.0.0.1
  int masterPort = 29500;       // where rank 0 listens: MASTER_PORT, plus one under torchrun (see below); 0: unusable
  std::string masterPortError;  // why MASTER_PORT is unusable; an error only where the port is needed
};

// Reads the launcher's environment. Returns false (with *error) when the variables are present but malformed.
// Under torchrun (TORCHELASTIC_RUN_ID set) the agent's own store already listens on MASTER_PORT, so rank 0
// listens on MASTER_PORT + 1; NCCL_COMM_ID overrides either.
bool detectLaunch(LaunchInfo* info, std::string* error);

// For a multi-process launch: sets NCCL_COMM_ID from MASTER_ADDR/MASTER_PORT when it is not set already; false
// (with *error) when MASTER_PORT is needed and malformed.
bool prepareRendezvous(LaunchInfo* info, std::string* error);

}  // namespace braid::perf
