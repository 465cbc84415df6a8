// The price of braid's NVLS-style ("direct") collectives on GPUs, for the selector of a CUDA communicator.
//
// braid's GPU direct schedules are shaped like NCCL's symmetric kernels (2.27+): one-shot and two-shot all-reduce,
// all-gather and reduce-scatter by loads and stores over peer pointers (LSA), in as many CTAs as the communicator has
// channels ("lanes"). So they are priced with NCCL's model of those kernels (sym_kernels.cc, queryModel_lsa, 2.30):
//     time = baseLat + softplus(busBytes / softmin(lanes x ctaBw, peakBw) - 1)
// with NCCL's constants for its LSA kernels (Hopper: 7.8 us, 65 GiB/s per CTA for all-reduce and 44 for the others,
// peak 320 GiB/s; Blackwell: 19.5 us for all-reduce and 13 for the others, 55 GiB/s per CTA, peak 600), and braid's
// schedules' bus bytes, for the selector's size convention (all-reduce: the buffer, S; all-gather and
// reduce-scatter: one rank's part, S):
//   all-reduce up to kGpuDirectOneShotBytes: one-shot, every rank loads every peer's input: (n-1) S;
//   all-reduce above: two-shot, 2 (n-1)/n S;
//   all-gather and reduce-scatter: (n-1) S;
// plus staging, which NCCL's in-place kernels do not have: braid first copies each rank's input (S; n S for
// reduce-scatter) into its own direct area, the lanes at the per-CTA rate, at most kStageCapBytesPerUs. Registered
// windows skip that copy; the price keeps it, so the selector errs towards the FIFO path. The switch (NVLS multicast)
// is not priced: it serves only some dtype and op pairs and only rounds whose inputs are all staged, and the choice
// is made for a size, whatever the dtype; so the price is that of peer pointers, an upper bound.
//
// As in NCCL (ncclSymkAvailable: isAllDirectNvlink), the path is priced only where every pair of the communicator's
// GPUs is joined by NVLink (path NVL, NVSwitch included) and the communicator is on one host; and only when every rank
// set BRAID_GPU_DIRECT_AUTO=1 (byModel), since the path has not run on a GPU yet. Elsewhere the price is -1 and the
// selector keeps the FIFO path unless NCCL_ALGO or a tuning-file pin asks for NVLS.
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
  bool allNvlink = false;  // every pair of the communicator's GPUs on NVLink (NCCL's isAllDirectNvlink)
  bool byModel = false;    // BRAID_GPU_DIRECT_AUTO=1 on every rank
};

// Why the direct path is not priced ("" when it is): "not every pair of GPUs is joined by NVLink", ...
const char* directGpuUnpriced(const DirectGpuShape& s, FilterColl c);

// Predicted microseconds of an NVLS-style `c` of nBytes (all-reduce: the buffer; all-gather and reduce-scatter: one
// rank's part, as the selector counts them), or -1 when directGpuUnpriced says why not.
double predictDirectGpuUs(const DirectGpuShape& s, FilterColl c, size_t nBytes);

}  // namespace braid
