#include "src/backends/cuda/emu/emu_kernels.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "src/common/params.h"

namespace braid {
namespace {

template <ProtoId kProto>
void runKernel(const EmuCta& cta, const KernelArgs& args) {
  KernelEnv env;
  kernelMain<OnlyProto<kProto>>(cta, env, args, static_cast<uint32_t>(cta.blockId()));
}

const EmuKernel kKernels[] = {
    {kernelName(ProtoId::kSimple), &runKernel<ProtoId::kSimple>},
    {kernelName(ProtoId::kLL), &runKernel<ProtoId::kLL>},
    {kernelName(ProtoId::kLL128), &runKernel<ProtoId::kLL128>},
};

constexpr uint32_t kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);
const char* const kNames[kNumKernels] = {kKernels[0].name, kKernels[1].name, kKernels[2].name};
const uint32_t kParamBytes[kNumKernels] = {sizeof(KernelArgs), sizeof(KernelArgs), sizeof(KernelArgs)};
constexpr double kDeadlineMarginSec = 30;

EmuDevice* deviceFor(int ordinal, int slots) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<EmuDevice>> devices;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<EmuDevice>& d = devices[ordinal];
  if (!d) d = std::make_unique<EmuDevice>(slots);
  return d.get();
}

int launchFromImage(uint32_t kernel, int device, int residentSlots, uint32_t grid, uint32_t block, const void* param,
                    char* err, size_t errBytes) {
  auto say = [&](const std::string& m) {
    if (err != nullptr && errBytes > 0) snprintf(err, errBytes, "%s", m.c_str());
    return 1;
  };
  if (kernel >= kNumKernels || param == nullptr) return say("emulator: bad kernel index or parameter");
  KernelArgs args;
  memcpy(&args, param, sizeof(args));
  if (grid != args.nchannels) {
    return say(strPrintf("%s: launched with %u CTAs for %u channels", kNames[kernel], grid, args.nchannels));
  }
  EmuLaunchConfig cfg;
  cfg.device = deviceFor(device, residentSlots);
  const double timeoutSec = static_cast<double>(args.timeoutNs) / 1e9;
  cfg.deadlineSec = (timeoutSec > 0 ? timeoutSec : 300) + kDeadlineMarginSec;
  cfg.chaosSeed = static_cast<uint64_t>(params::EmuChaos());
  Status st = emuRunKernel(kNames[kernel], args, static_cast<int>(block), cfg);
  return st.isOk() ? 0 : say(st.message());
}

const EmuImage kImage = {
    {'B', 'R', 'A', 'I', 'D', 'E', 'M', 'U'}, kEmuImageVersion, kNumKernels, kNames, kParamBytes, &launchFromImage};

}  // namespace

const EmuImage* emuImage() {
  return &kImage;
}

const EmuKernel* findEmuKernel(const char* name) {
  for (const EmuKernel& k : kKernels) {
    if (name != nullptr && strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

Status emuRunKernel(const char* name, const KernelArgs& args, int threads, EmuLaunchConfig cfg) {
  const EmuKernel* k = findEmuKernel(name);
  if (k == nullptr) return invalidArgument("emulator: no kernel named '%s'", name != nullptr ? name : "(null)");
  cfg.grid = static_cast<int>(args.nchannels);
  cfg.block = threads;
  cfg.name = name;
  return emuLaunch(cfg, [&](const EmuCta& cta) { k->run(cta, args); });
}

}  // namespace braid
