// The P2P self-test at communicator init (issue 15: a PCIe path that drops writes must become a fallback, not a
// hang). Every rank writes a token into the GPU memory of each peer it would reach over P2P, through the same
// mappings the p2p transport uses (cuMem, imported from an exported descriptor for a peer process), and checks
// within a deadline that its peers' tokens arrived in its own memory. A pair keeps P2P only when both directions
// arrived; both ends learn that from one all-gather, so they always agree. A pair that fails gets a WARN naming
// both GPUs and goes through host memory.
//
// The writes are copy-engine copies (cuMemcpyAsync device to peer device), not SM stores: they test the mapping
// and the path, not the kernels' code.
#pragma once

#include <cstdint>
#include <vector>

#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/device_memory.h"
#include "transports/shm/shared_segment.h"  // AllGatherFn
#include "transports/transport.h"

namespace braid {

struct P2pTestContext {
  const CuApi* api = nullptr;
  CUcontext ctx = nullptr;
  CudaDeviceMemory* memory = nullptr;  // its stream carries the copies
  int rank = 0;
  const std::vector<PeerInfo>* peers = nullptr;
  AllGatherFn allGather;
  double timeoutSec = 60;  // BRAID_TIMEOUT: how long a token may take to arrive
};

// Collective: every rank of the communicator calls it, once. Clears (*p2p)[r] for each peer r whose pair failed.
// Errors: a driver call or an all-gather failed (not a failed pair, which is a fallback).
[[nodiscard]] Status selfTestP2p(const P2pTestContext& c, std::vector<uint8_t>* p2p);

}  // namespace braid
