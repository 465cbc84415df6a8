#include "algorithms/selector/sym_model.h"

#include <algorithm>
#include <cmath>

namespace braid {
namespace {

// NCCL states its per-CTA and peak rates in GiB/s; the model works in bytes per microsecond.
constexpr double kGiBps = 1073741824.0 / 1e6;
// Staging is a copy within one GPU's memory: the lanes copy at their per-CTA rate up to this (bytes/us; HBM3 reads
// and writes the copy, about half its 3.35 TB/s).
constexpr double kStageCapBytesPerUs = 1500e3;

// A smooth min(x, ceiling) and max(0, x): the shapes NCCL fits its symmetric kernels' measurements with (the
// bandwidth saturates gradually as CTAs are added; the time leaves baseLat gradually as bytes grow).
double softMin(double x, double ceiling, double softness) {
  return ceiling - softness * std::log1p(std::expm1(ceiling / softness) * std::exp(-x / softness));
}
double softPlus(double x, double softness) {
  const double z = x / softness;
  return z >= 100 ? x : softness * std::log1p(std::exp(z));
}

}  // namespace

const char* directGpuUnpriced(const DirectGpuShape& s, FilterColl c) {
  if (c != FilterColl::kAllReduce && c != FilterColl::kAllGather && c != FilterColl::kReduceScatter) {
    return "no NVLS-style schedule for this collective";
  }
  if (s.lanes < 1) return "no NVLS-style path on this communicator";
  if (s.nNodes != 1) return "the NVLS-style path runs on one host";
  if (s.nRanks < 2) return "one rank";
  if (!s.allNvlink) return "not every pair of GPUs is joined by NVLink (NCCL's rule for symmetric kernels)";
  if (!s.byModel) return "BRAID_GPU_DIRECT_AUTO is not 1 on every rank (the path has not run on a GPU yet)";
  return "";
}

double predictDirectGpuUs(const DirectGpuShape& s, FilterColl c, size_t nBytes) {
  if (*directGpuUnpriced(s, c) != '\0') return -1;
  const double n = s.nRanks;
  const double bytes = static_cast<double>(nBytes);
  const bool allReduce = c == FilterColl::kAllReduce;
  const bool blackwell = s.minSm >= 100;
  double busBytes = 0, input = bytes;
  if (allReduce && nBytes <= kGpuDirectOneShotBytes) {
    busBytes = (n - 1) * bytes;
  } else if (allReduce) {
    busBytes = 2 * (n - 1) / n * bytes;
  } else {
    busBytes = (n - 1) * bytes;
    if (c == FilterColl::kReduceScatter) input = n * bytes;  // every destination's part is staged
  }
  double baseLat, ctaBw, peakBw;
  if (!blackwell) {
    baseLat = 7.8;
    ctaBw = (allReduce ? 65 : 44) * kGiBps;
    peakBw = 320 * kGiBps;
  } else {
    baseLat = allReduce ? 19.5 : 13.0;
    ctaBw = 55 * kGiBps;
    peakBw = 600 * kGiBps;
  }
  const double bw = softMin(s.lanes * ctaBw, peakBw, ctaBw);
  const double stageUs = input / std::min(s.lanes * ctaBw, kStageCapBytesPerUs);
  return baseLat + softPlus(busBytes / bw - 1, 1) + stageUs;
}

}  // namespace braid
