// Registered buffers that the direct (NVLS-style) kernel reads in place (src/backends/common/direct_kernel.h):
// for each buffer this rank registered with ncclCommRegister, where every rank's process maps it; and, serving the
// peers of other processes, the mappings this process made of the buffers they registered.
//
// What can be read in place: ncclMemAlloc memory (cuMem, exportable as a POSIX descriptor), as NCCL's default
// (NCCL_LEGACY_CUDA_REGISTER=0) registers only cuMem buffers. A rank of this process reads it at its own address
// when its GPU has access (ncclMemAlloc maps for every device with peer access); a rank of another process maps it
// once, at registration: the owner exports the allocation and calls that process's registry service (fd_share.h),
// whose server thread imports and maps it for the rank's GPU and answers the address there. ncclCommDeregister
// (and destruction) asks the peers to unmap. So nothing is exchanged per operation: a launch only writes the peers'
// addresses into its work. A registration no peer can map this way is still a registration, staged as before, and
// INFO (REG) says why.
//
// Thread safety: every method may be called from any thread (registrations from the user's, launches from the
// communicator's, the service from the process's descriptor server).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/device_memory.h"
#include "src/common/fd_share.h"

namespace braid {

class DirectRegistry {
 public:
  // What this rank knows of every rank of the communicator (from the direct areas' exchange).
  struct Rank {
    int32_t pid = 0;
    int device = -1;
    FdTicket service;  // its registry service (ranks of other processes); token 0: none
  };

  DirectRegistry(const CuApi* api, const CudaDeviceMemory* memory, int rank, double timeoutSec);
  ~DirectRegistry();  // asks peers to unmap this rank's registrations, unmaps the peers' ones, stops the service

  // Serves the peers of other processes (before the exchange that hands them the ticket).
  Result<FdTicket> startService();
  // Every rank's identity, once exchanged (before the first registration).
  void setRanks(std::vector<Rank> ranks) { ranks_ = std::move(ranks); }

  // ncclCommRegister of [base, base + bytes) as `handle`: mapped by every peer, or staged (said at INFO).
  void add(const void* handle, const void* base, size_t bytes);
  // ncclCommDeregister: the peers unmap it.
  void remove(const void* handle);
  // Where every rank's process maps [p, p + bytes) (out: one address per rank), when it lies in a registration
  // every peer reads in place.
  bool peerAddresses(const void* p, size_t bytes, uint64_t* out) const;

 private:
  struct Mine {
    const char* base;
    size_t bytes;
    uint64_t id;
    std::vector<uint64_t> at;   // [nranks] the base in each rank's process
    std::vector<int> imported;  // ranks of other processes that mapped it
  };
  // The service: maps (or unmaps) a peer's registration here.
  Result<std::string> serve(const std::vector<int>& fds, const std::string& request);
  // Asks `rank` to unmap registration `id` of this rank (best effort: a peer that is gone has nothing mapped).
  void unmapAt(int rank, uint64_t id) const;

  const CuApi* api_;
  const CudaDeviceMemory* memory_;
  int rank_;
  double timeoutSec_;
  std::vector<Rank> ranks_;
  FdTicket service_;
  bool serving_ = false;

  mutable std::mutex mu_;  // mine_, nextId_
  std::map<const void*, Mine> mine_;
  uint64_t nextId_ = 1;

  std::mutex importsMu_;                                               // imports_
  std::map<std::pair<int, uint64_t>, std::shared_ptr<void>> imports_;  // (owner rank, its id) -> the mapping
};

}  // namespace braid
