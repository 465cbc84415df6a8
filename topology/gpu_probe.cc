// NVML through dlopen. The declarations below are NVML's documented C API (nvml.h), restated so the build needs no
// CUDA headers; only the calls discovery uses.
#include "topology/gpu_probe.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include "src/common/status.h"

namespace braid {

namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvlinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

struct Nvml {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*getCount)(unsigned int*);
  NvmlReturn (*getHandle)(unsigned int, NvmlDevice*);
  NvmlReturn (*getPci)(NvmlDevice, NvmlPciInfo*);
  NvmlReturn (*getCc)(NvmlDevice, int*, int*);
  NvmlReturn (*linkState)(NvmlDevice, unsigned int, int*);
  NvmlReturn (*linkRemotePci)(NvmlDevice, unsigned int, NvmlPciInfo*);
  NvmlReturn (*linkRemoteType)(NvmlDevice, unsigned int, int*);  // may be absent on old drivers
};

template <typename F>
bool bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

std::string busIdOf(const NvmlPciInfo& p) {
  return strPrintf("%04x:%02x:%02x.0", p.domain & 0xffff, p.bus & 0xff, p.device & 0xff);
}

}  // namespace

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  if (sscanf(busId.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4) return "";
  if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) return "";
  return strPrintf("%04x:%02x:%02x.%x", domain, bus, dev, fn);
}

std::vector<ProbedGpu> probeGpusNvml(std::string* why) {
  std::vector<ProbedGpu> out;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return out;
  }
  Nvml n{};
  bool ok =
      bind(lib, "nvmlInit_v2", &n.init) && bind(lib, "nvmlShutdown", &n.shutdown) &&
      bind(lib, "nvmlDeviceGetCount_v2", &n.getCount) && bind(lib, "nvmlDeviceGetHandleByIndex_v2", &n.getHandle) &&
      bind(lib, "nvmlDeviceGetPciInfo_v3", &n.getPci) && bind(lib, "nvmlDeviceGetCudaComputeCapability", &n.getCc) &&
      bind(lib, "nvmlDeviceGetNvLinkState", &n.linkState) &&
      bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.linkRemotePci);
  bind(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &n.linkRemoteType);
  if (!ok || n.init() != kNvmlSuccess) {
    if (why) *why = ok ? "nvmlInit failed" : "libnvidia-ml.so.1 lacks a needed symbol";
    dlclose(lib);
    return out;
  }
  bool gdr = access("/sys/module/nvidia_peermem", F_OK) == 0 || access("/sys/kernel/mm/memory_peers/nv_mem", F_OK) == 0;
  unsigned count = 0;
  if (n.getCount(&count) != kNvmlSuccess) count = 0;
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice d = nullptr;
    NvmlPciInfo pci{};
    int major = 0, minor = 0;
    if (n.getHandle(i, &d) != kNvmlSuccess || n.getPci(d, &pci) != kNvmlSuccess) continue;
    ProbedGpu g;
    g.dev = static_cast<int>(i);
    g.busId = busIdOf(pci);
    if (n.getCc(d, &major, &minor) == kNvmlSuccess) g.sm = major * 10 + minor;
    g.gdr = gdr;
    std::map<std::string, ProbedNvlink> links;
    for (unsigned l = 0; l < kNvlinkMaxLinks; ++l) {
      int active = 0;
      NvmlPciInfo remote{};
      if (n.linkState(d, l, &active) != kNvmlSuccess || !active) continue;
      if (n.linkRemotePci(d, l, &remote) != kNvmlSuccess) continue;
      int type = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH when the driver cannot tell (NCCL: invisible remote = switch)
      if (n.linkRemoteType) n.linkRemoteType(d, l, &type);
      ProbedNvlink& pl = links[busIdOf(remote)];
      pl.remoteBusId = busIdOf(remote);
      pl.remote = type == 0   ? ProbedNvlink::Remote::kGpu
                  : type == 1 ? ProbedNvlink::Remote::kCpu
                              : ProbedNvlink::Remote::kSwitch;
      ++pl.count;
    }
    for (auto& kv : links) g.nvlinks.push_back(kv.second);
    out.push_back(g);
  }
  n.shutdown();
  // The library stays loaded: unloading NVML while CUDA holds it is not safe.
  if (why && out.empty()) *why = "NVML reports no GPU";
  return out;
}

}  // namespace braid
