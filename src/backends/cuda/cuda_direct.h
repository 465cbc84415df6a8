// The CUDA backend's NVLS-style (direct) collectives over peer pointers: each rank's direct area (control words
// and two stages, src/backends/common/direct_kernel.h) in its own GPU's memory, mapped by every rank of the
// communicator at init, and the launch images of the direct kernel.
//
// Set up only when every rank is on this host and every pair of ranks reaches each other's GPU memory (the P2P
// decisions after the self-test: same GPU, peer access, or memory another process exported). Ranks of this
// process map an area by its address (the owner grants their devices access when it allocates); ranks of other
// processes import it from a POSIX descriptor the owner offers (src/common/fd_share.h). Every rank reports
// whether it mapped every area, so all ranks agree on whether the communicator has direct collectives.
//
// Thread safety: created and used on the communicator's thread (launches); the areas live until destruction.
// A communicator's areas must outlive its peers' kernels: destroy communicators after their work finished, as
// NCCL requires.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/backends/backend.h"
#include "src/backends/common/direct_kernel.h"
#include "src/backends/cuda/cuda_multicast.h"
#include "src/backends/cuda/device_memory.h"
#include "src/backends/cuda/direct_registry.h"
#include "src/backends/cuda/window_mc_table.h"
#include "src/common/fd_share.h"

namespace braid {

class CudaDirect {
 public:
  // Collective over the communicator's ranks (allGather; every rank calls it with the same decision inputs).
  // nullptr (not an error) with *why set when the communicator cannot run direct collectives; every rank returns
  // the same. nlanes: CTAs of a direct launch (the communicator's channels).
  static Result<std::unique_ptr<CudaDirect>> create(const CudaDeviceMemory& memory, const std::vector<PeerInfo>& peers,
                                                    int rank, int nlanes, const std::vector<uint8_t>& p2pPeers,
                                                    const AllGatherFn& allGather, double timeoutSec, std::string* why,
                                                    int nvlsHostMode = 0);
  ~CudaDirect();

  // The bytes a launch image of `nops` operations takes, and the image itself, written at `image` (pinned memory
  // the kernel reads): the returned arguments point into it (status, abort word and timeout are the caller's).
  size_t imageBytes(size_t nops) const;
  KernelArgs writeImage(const std::vector<DirectOp>& ops, char* image) const;

  const DirectLayout& layout() const { return layout_; }
  size_t areaBytes() const { return areaBytes_; }  // this rank's area, as mapped
  // The buffers this rank registered that its peers read in place (ncclCommRegister).
  DirectRegistry& registry() { return *registry_; }
  // Whether the areas are bound to a multicast object (the same on every rank), and every rank's process and
  // device, for the windows' own objects (cuda_windows.h).
  bool multicast() const { return mc_ != nullptr; }
  const std::string& multicastWhy() const { return mcWhy_; }  // why not, when not
  const std::vector<CudaMulticast::Rank>& multicastRanks() const { return mcRanks_; }
  // The windows with a multicast mapping of their own (shared with each binding's holder, which may outlive this).
  const std::shared_ptr<WindowMcTable>& windowMcs() const { return windowMcs_; }
  // The communicator's multicast objects alive (the areas' and its windows'), which BRAID_NVLS_OBJECTS bounds.
  const std::shared_ptr<std::atomic<int>>& multicastCount() const { return mcCount_; }

 private:
  CudaDirect() = default;
  // Whether the peers read d's input in place (peerSend: where each rank's process maps it).
  bool readInPlace(const DirectOpDesc& d, uint64_t* peerSend) const;
  // Sets d's symmetric fields (mcSend, mcRecv, symKey) when its buffers lie in windows with multicast mappings.
  void findSymmetric(DirectOpDesc* d) const;

  int rank_ = 0;
  int nranks_ = 0;
  DirectLayout layout_;
  size_t areaBytes_ = 0;
  std::vector<char*> areas_;                 // every rank's area as this process maps it
  std::vector<std::shared_ptr<void>> held_;  // this rank's area and the imported ones
  FdTicket ticket_;
  bool offered_ = false;
  std::unique_ptr<DirectRegistry> registry_;
  std::vector<CudaMulticast::Rank> mcRanks_;
  std::string mcWhy_;
  std::shared_ptr<WindowMcTable> windowMcs_ = std::make_shared<WindowMcTable>();
  std::shared_ptr<std::atomic<int>> mcCount_ = std::make_shared<std::atomic<int>>(0);
  bool noSymmetricMultimem_ = false;   // ncclConfig_t.nvlsHostMode: no multicast rounds on windows
  std::unique_ptr<CudaMulticast> mc_;  // last: unbound and released before the areas go
};

// All-reduce's shot for `bytes` on `nranks` ranks: one-shot (every rank reduces everything: one exchange) for
// small operations, two-shot (reduce-scatter then all-gather through the areas) above.
DirectCollective cudaDirectShot(size_t bytes, int nranks);

}  // namespace braid
