// The price of braid's NVLS-style ("direct") collectives on GPUs, for the selector of a CUDA communicator.
//
// braid's GPU direct schedules are shaped like NCCL's symmetric kernels (2.27+): one-shot and two-shot all-reduce,
// all-gather and reduce-scatter by loads and stores over peer pointers (LSA), or through an NVLS multicast object,
// in as many CTAs as the communicator has channels ("lanes"). So they are priced with NCCL's model of those kernels
// (sym_kernels.cc, queryModel_lsa, 2.30; reference/nccl-2.27-2.32.md section 1.2):
//     time = baseLat + softplus(busBytes / softmin(lanes x ctaBw x busMultiplier, peakBw) - 1)
// with NCCL's constants (Hopper: 7.8 us, 65 GiB/s per CTA for all-reduce and 44 for the others, peaks 320 GiB/s and
// 480 for the multicast all-reduce; Blackwell: 19.5 us for all-reduce and 13 for the others, 55 GiB/s per CTA,
// peaks 600 and 1000), and braid's schedules' bus bytes:
//   all-reduce up to kGpuDirectOneShotBytes: one-shot, every rank loads every peer's input: (n-1) S;
//   all-reduce above: two-shot, 2 (n-1)/n S over peer pointers; S/n + S at n x the bus through the switch;
//   all-gather and reduce-scatter: (n-1) S/n, through the switch at 0.55 n x the bus (NCCL's multipliers);
// plus staging, which NCCL's in-place kernels do not have: braid first copies each rank's input into its own
// direct area (the lanes at the same per-CTA rate, at most kStageCapGBps). Registered windows skip that copy; the
// price keeps it, so the selector errs towards the FIFO path.
//
// As in NCCL (ncclSymkAvailable: isAllDirectNvlink), the path is priced only where every pair of the host's GPUs
// is joined by NVLink (path NVL, NVSwitch included) and the communicator is on one host; elsewhere the price is -1
// and the selector keeps the FIFO path unless NCCL_ALGO or a tuning-file pin asks for NVLS.
#pragma once

#include <cstddef>

#include "algorithms/selector/algo_filter.h"

namespace braid {

// Inputs up to this size run one-shot (the CUDA backend's rule, src/backends/cuda/cuda_direct.cc).
constexpr size_t kGpuDirectOneShotBytes = 256 << 10;

struct DirectGpuShape {
  int nRanks = 1;
  int nNodes = 1;
  int minSm = 90;
  int lanes = 0;           // CTAs of a direct launch (the communicator's channels); 0: no direct path priced
  bool multicast = false;  // NVLS multicast set up (every rank agreed)
  bool allNvlink = false;  // every pair of the host's GPUs on NVLink (NCCL's isAllDirectNvlink)
};

// Why the direct path is not priced ("" when it is): "not on every pair of GPUs over NVLink", ...
const char* directGpuUnpriced(const DirectGpuShape& s, FilterColl c);

// Predicted microseconds of an NVLS-style `c` whose largest buffer is nBytes (all-reduce: the buffer; all-gather:
// the output; reduce-scatter: the input), or -1 when directGpuUnpriced says why not.
double predictDirectGpuUs(const DirectGpuShape& s, FilterColl c, size_t nBytes);

}  // namespace braid
