// GPUs as the driver sees them (NVML), for discovery to place under the PCI tree hwloc found.
//
// NVML is loaded with dlopen("libnvidia-ml.so.1"), so braid builds and runs without a driver: no library (or no
// device) gives an empty list, never an error. Tests inject ProbedGpu lists instead (discoverXml's `gpus`).
#pragma once

#include <string>
#include <vector>

namespace braid {

struct ProbedNvlink {
  enum class Remote { kGpu, kCpu, kSwitch };
  std::string remoteBusId;  // "0000:18:00.0"
  Remote remote = Remote::kSwitch;
  int count = 0;  // active links to that remote
};

struct ProbedGpu {
  int dev = 0;        // NVML index
  std::string busId;  // "0000:18:00.0", lower case
  int sm = 0;         // compute capability x 10
  bool gdr = false;   // GPUDirect RDMA usable (nvidia-peermem loaded)
  std::vector<ProbedNvlink> nvlinks;
};

// The driver's GPUs, or an empty list when there is no driver. `why` (optional) says why the list is empty.
std::vector<ProbedGpu> probeGpusNvml(std::string* why);

// "00000000:18:00.0" or "0000:18:00.0" (any case) -> "0000:18:00.0"; "" if it is not a bus id.
std::string normalizeBusId(const std::string& busId);

}  // namespace braid
