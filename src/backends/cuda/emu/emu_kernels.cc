#include "src/backends/cuda/emu/emu_kernels.h"

#include <cstring>

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

}  // namespace

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
