// NVLSTree on host memory (nvls_tree.cc says how it runs): an all-reduce over several hosts as a reduce-scatter
// inside each host, an all-reduce across hosts, and an all-gather inside each host, each on a sub-communicator
// split from the parent at init. This object owns those sub-communicators.
#pragma once

#include <memory>
#include <vector>

#include "src/common/status.h"
#include "src/core/comm.h"

namespace braid {

class NvlsTree {
 public:
  // Collective over `parent` at init: null (not an error) when NVLSTree cannot run there (one host, uneven hosts,
  // one rank per host, BRAID_DIRECT=0, NCCL_SHM_DISABLE=1, NCCL_ALGO, or some host's ranks cannot share memory);
  // the INFO log says why.
  static Result<std::unique_ptr<NvlsTree>> create(Communicator& parent);

  // The model's time for an all-reduce of `bytes` this way.
  double predictUs(size_t bytes) const;
  // Runs one all-reduce of the parent (`nranks` ranks) through the sub-communicators.
  Status run(const PendingOp& op, int nranks);
  // The sub-communicators (their links are the parent's to release and account, suspend.cc).
  std::vector<Communicator*> comms() const { return {host_.get(), cross_.get()}; }

 private:
  NvlsTree() = default;
  std::unique_ptr<Communicator> host_;   // this rank's host (NVLS-style inside it)
  std::unique_ptr<Communicator> cross_;  // the ranks with this rank's local index on every host (the network)
};

}  // namespace braid
