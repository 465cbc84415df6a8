#include "src/backends/cuda/emu/emu_kernels.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "src/backends/common/direct_kernel.h"
#include "src/backends/common/ll128_ops.h"
#include "src/backends/common/rma_kernel.h"
#include "src/common/params.h"

namespace braid {
namespace {

template <ProtoId kProto>
void runKernel(const EmuCta& cta, const KernelArgs& args) {
  KernelEnv env;
  kernelMain<OnlyProto<kProto>>(cta, env, args, static_cast<uint32_t>(cta.blockId()));
}

void runDirectKernel(const EmuCta& cta, const KernelArgs& args) {
  KernelEnv env;
  directKernelMain(cta, env, args, static_cast<uint32_t>(cta.blockId()));
}

void runRmaKernel(const EmuCta& cta, const KernelArgs& args) {
  rmaKernelMain(cta, args);
}

const EmuKernel kKernels[] = {
    {kernelName(ProtoId::kSimple), &runKernel<ProtoId::kSimple>},
    {kernelName(ProtoId::kLL), &runKernel<ProtoId::kLL>},
    {kernelName(ProtoId::kLL128), &runKernel<ProtoId::kLL128>},
    {kDirectKernelName, &runDirectKernel},
    {kRmaKernelName, &runRmaKernel},
};

constexpr uint32_t kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);
const char* const kNames[kNumKernels] = {kKernels[0].name, kKernels[1].name, kKernels[2].name, kKernels[3].name,
                                         kKernels[4].name};
const uint32_t kParamBytes[kNumKernels] = {sizeof(KernelArgs), sizeof(KernelArgs), sizeof(KernelArgs),
                                           sizeof(KernelArgs), sizeof(KernelArgs)};
constexpr double kDeadlineMarginSec = 30;

EmuDevice* deviceFor(int ordinal, int slots) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<EmuDevice>> devices;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<EmuDevice>& d = devices[ordinal];
  if (!d) d = std::make_unique<EmuDevice>(slots);
  return d.get();
}

// Every address the kernel will be led to by its parameter, as the driver classifies it: what a GPU would fault on
// (pageable host memory, another device's memory, past an allocation) is named before anything runs. The data
// buffers are checked at their first element (their extent is the program's business).
std::string checkReach(const KernelArgs& a, int device, EmuClassifyFn classify) {
  std::string problem;
  auto check = [&](const void* p, size_t bytes, const std::string& what) {
    if (!problem.empty() || p == nullptr || bytes == 0) return;
    const int c = classify(p, bytes, device);
    if (c == kReachable) return;
    const char* why = c == kOtherDevice  ? "memory of another device"
                      : c == kPastTheEnd ? "a range past the end of its allocation"
                                         : "pageable host memory (neither device memory nor pinned host memory)";
    problem = strPrintf("%s at %p is %s: a GPU would fault there", what.c_str(), p, why);
  };
  // What a GPU needs aligned and a CPU forgives: its atomic words (a misaligned one faults, or tears across lines on
  // a host), LL's 8-byte flag stores, LL128's 128-byte line stores.
  auto aligned = [&](const void* p, size_t to, const std::string& what) {
    if (!problem.empty() || p == nullptr || reinterpret_cast<uintptr_t>(p) % to == 0) return;
    problem =
        strPrintf("%s at %p is not %zu-byte aligned: a GPU faults on it (or tears its stores)", what.c_str(), p, to);
  };
  aligned(a.status, alignof(DevStatus), "the status word");
  aligned(a.abortFlag, sizeof(uint32_t), "the abort word");
  if (a.direct == nullptr && a.rma == nullptr) {
    check(a.channels, sizeof(ChannelWorkDesc) * a.nchannels, "the channel table");
  }
  check(a.status, sizeof(DevStatus), "the status word");
  check(a.abortFlag, sizeof(uint32_t), "the abort word");
  if (a.rma != nullptr) {
    check(a.rma, sizeof(RmaKernelWork), "the signal work");
    check(a.rma->steps, sizeof(RmaKernelStep) * a.rma->nsteps, "the signal steps");
    for (uint32_t i = 0; i < a.rma->nsteps && problem.empty(); ++i) {
      const RmaKernelStep& s = a.rma->steps[i];
      check(s.word, sizeof(uint64_t), strPrintf("signal step %u's word", i));
      aligned(s.word, sizeof(uint64_t), strPrintf("signal step %u's word", i));
    }
    return problem;
  }
  if (a.direct != nullptr) {
    const DirectKernelWork& w = *a.direct;
    check(a.direct, sizeof(DirectKernelWork), "the direct work");
    check(w.areas, sizeof(char*) * w.nranks, "the direct areas' table");
    for (uint32_t p = 0; p < w.nranks && problem.empty(); ++p) {
      check(w.areas[p], w.layout.bytes(), strPrintf("rank %u's direct area", p));
      aligned(w.areas[p], DirectLayout::kLineBytes, strPrintf("rank %u's direct area", p));
    }
    check(w.ops, sizeof(DirectOpDesc) * w.nops, "the direct operations");
    for (uint32_t o = 0; o < w.nops && problem.empty(); ++o) {
      const DirectOpDesc& op = w.ops[o];
      const std::string what = strPrintf("direct operation %u's ", o);
      check(op.reduceOps, sizeof(ReduceOp) * w.nranks, what + "reduction ops");
      check(op.send, dtypeSize(op.stageOp.dtype), what + "send buffer");
      check(op.recv, dtypeSize(op.stageOp.dtype), what + "receive buffer");
      check(op.stageOp.scalarPtr, dtypeSize(op.stageOp.dtype), what + "PreMulSum scalar");
      // Where the peers map this rank's input: the table is read here; the addresses are the peers' to reach.
      check(op.peerSend, sizeof(uint64_t) * w.nranks, what + "peers' addresses of its input");
    }
    return problem;
  }
  for (uint32_t c = 0; c < a.nchannels && problem.empty(); ++c) {
    const ChannelWorkDesc& ch = a.channels[c];
    check(ch.items, sizeof(WorkDesc) * ch.nitems, strPrintf("channel %u's work items", c));
    check(ch.states, sizeof(ItemState) * ch.nitems, strPrintf("channel %u's item states", c));
    check(ch.conns, sizeof(ConnSlot) * ch.nconns, strPrintf("channel %u's connector table", c));
    for (uint32_t j = 0; j < ch.nconns && problem.empty(); ++j) {
      const ConnSlot& k = ch.conns[j];
      check(k.view.ctrl, sizeof(FifoCtrl), strPrintf("channel %u connector %u's FIFO control", c, j));
      check(k.view.slots, 1, strPrintf("channel %u connector %u's FIFO slots", c, j));
      check(k.cursor, sizeof(FifoCursor), strPrintf("channel %u connector %u's cursor", c, j));
      aligned(k.view.ctrl, alignof(FifoCtrl), strPrintf("channel %u connector %u's FIFO control", c, j));
      // Slots start on LL128 lines (and so on LL's 8-byte flags), and whole lines long (a network's LL travels in
      // the Simple slot, whole messages: its LL slots are not used).
      aligned(k.view.slots, kLl128LineBytes, strPrintf("channel %u connector %u's FIFO slots", c, j));
      const bool lines =
          k.view.slotBytes % kLl128LineBytes == 0 && (k.wholeMessages || k.view.llSlotBytes % kLl128LineBytes == 0);
      if (problem.empty() && !lines) {
        problem = strPrintf("channel %u connector %u's FIFO slots are %llu and %llu bytes, not whole %zu-byte lines", c,
                            j, static_cast<unsigned long long>(k.view.slotBytes),
                            static_cast<unsigned long long>(k.view.llSlotBytes), kLl128LineBytes);
      }
      aligned(k.cursor, alignof(FifoCursor), strPrintf("channel %u connector %u's cursor", c, j));
    }
    for (uint32_t i = 0; i < ch.nitems && problem.empty(); ++i) {
      const WorkDesc& w = ch.items[i];
      const std::string item = strPrintf("channel %u item %u's ", c, i);
      check(w.prog.steps, sizeof(Step) * w.prog.nsteps, item + "steps");
      check(w.sendConn, sizeof(int32_t) * w.prog.nsteps, item + "send connectors");
      check(w.recvConn, sizeof(int32_t) * w.prog.nsteps, item + "receive connectors");
      check(w.blockers, sizeof(uint32_t) * w.nblockers, item + "blockers");
      check(w.prog.packOffsets, sizeof(uint32_t), item + "pack offsets");
      check(w.input, w.elemSize, item + "input buffer");
      check(w.output, w.elemSize, item + "output buffer");
      check(w.llRecv, 1, item + "LL receive staging");
      check(w.llSend, 1, item + "LL send staging");
      check(w.op.scalarPtr, dtypeSize(w.op.dtype), item + "PreMulSum scalar");
    }
  }
  return problem;
}

int launchFromImage(uint32_t kernel, int device, int residentSlots, uint32_t grid, uint32_t block, const void* param,
                    const EmuDriverHooks* hooks, char* err, size_t errBytes) {
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
  if (hooks != nullptr && hooks->classify != nullptr) {
    const std::string problem = checkReach(args, device, hooks->classify);
    if (!problem.empty()) return say(strPrintf("%s: %s", kNames[kernel], problem.c_str()));
  }
  EmuLaunchConfig cfg;
  cfg.device = deviceFor(device, residentSlots);
  const double timeoutSec = static_cast<double>(args.timeoutNs) / 1e9;
  cfg.deadlineSec = (timeoutSec > 0 ? timeoutSec : 300) + kDeadlineMarginSec;
  cfg.chaosSeed = static_cast<uint64_t>(params::EmuChaos());
  cfg.multicast = hooks != nullptr ? hooks->multicast : nullptr;
  cfg.deviceOrdinal = device;
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
