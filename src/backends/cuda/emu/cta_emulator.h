// The CTA emulator: runs a kernel written over the CTA concept (src/backends/common/kernel_main.h) on host threads,
// one std::thread per simulated GPU thread, so the code a GPU runs is exercised on machines without one
// (docs/cuda.md, "The emulator"). It is CI's GPU, and stricter than one in the ways a CPU would otherwise hide:
//   - barrier sites: every thread of a CTA must reach the same sync() call (file and line); divergent barriers,
//     which a Volta+ GPU may silently pair, fail the launch and name the sites and threads;
//   - deadlock reports: a barrier that waits longer than the deadline, or a launch that runs twice as long, fails,
//     naming the stuck threads and where each was last seen, instead of hanging the job;
//   - resident slots: a device has a fixed number of CTA slots shared by every kernel on it; a CTA waits for a free
//     one, so two kernels that need each other co-resident deadlock here as on a GPU (and are reported);
//   - independent scheduling: the threads run freely (no lockstep), and a chaos seed adds random yields and short
//     sleeps at barriers and back-offs to widen the interleavings on a two-core machine;
//   - ThreadSanitizer: the emulator tests also build with -fsanitize=thread (the shared layer's atomics are GCC
//     builtins, which TSan sees).
// A failed launch unwinds every simulated thread at its next barrier or back-off (an exception internal to the
// emulator) and returns an error; a thread that spins without either is the one case that cannot be stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "src/backends/common/multimem.h"
#include "src/backends/cuda/emu/emu_image.h"
#include "src/common/status.h"

namespace braid {

class EmuBlock;

// One simulated device's resident CTA slots (a GPU: SMs x CTAs per SM for the kernel's footprint). Shared by every
// launch on the device; thread-safe.
class EmuDevice {
 public:
  explicit EmuDevice(int slots);
  ~EmuDevice();
  EmuDevice(const EmuDevice&) = delete;
  EmuDevice& operator=(const EmuDevice&) = delete;
  int slots() const;

 private:
  friend class EmuRun;
  struct State;
  std::unique_ptr<State> state_;
};

struct EmuLaunchConfig {
  int grid = 1;                 // CTAs
  int block = 1;                // threads per CTA
  EmuDevice* device = nullptr;  // resident slots; null: every CTA resident at once
  double deadlineSec = 60;      // a barrier, a slot wait or the whole launch longer than this fails
  uint64_t chaosSeed = 0;       // non-zero: random yields and sleeps at barriers and back-offs
  std::string name = "kernel";  // for messages
  // The driver's answer to "which buffers does this multicast address stand for" (the fake's), and the device
  // launched on; null: a multimem access fails the launch, as it faults on a GPU.
  EmuMulticastFn multicast = nullptr;
  int deviceOrdinal = -1;
};

// A simulated thread's view of its CTA: the CTA concept of kernel_main.h and step_engine.h.
class EmuCta {
 public:
  static constexpr bool kSerial = false;
  EmuCta(EmuBlock* block, int tid) : block_(block), tid_(tid) {}
  int tid() const { return tid_; }
  int nthreads() const;
  int blockId() const;
  // The call site is part of the barrier: every thread must arrive at the same one.
  void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const;
  bool syncAll(bool v, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const;
  void relax(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const;
  uint64_t nowNs() const;
  // Multicast (multimem.h): the bound buffers behind a range of a multicast mapping, resolved once through the
  // driver (EmuLaunchConfig::multicast), in its order. A range that is not one fails the launch.
  static constexpr int kMaxMcBuffers = 72;
  struct McView {
    int n = 0;
    char* uc[kMaxMcBuffers];
  };
  McView mcView(const void* mc, size_t bytes) const;
  uint64_t mcLoadReduce(const McView& v, size_t off, McOp op) const;
  // Stores to every bound buffer in `order` (a GCC __ATOMIC_ order): relaxed as multimem.st.relaxed, release as
  // multimem.st.release.
  void mcStore(const McView& v, size_t off, uint64_t word, size_t bytes, int order = __ATOMIC_RELAXED) const;
  // fence.proxy.alias: host threads see one proxy of memory, so only the compiler is held back.
  void mcFence() const { std::atomic_signal_fence(std::memory_order_seq_cst); }

 private:
  EmuBlock* block_;
  int tid_;
};

// Runs body(cta) on every thread of every CTA and returns when all have finished, or fails (divergent barrier,
// deadlock, a slot never free, an exception out of the body) with a message that names what was stuck.
[[nodiscard]] Status emuLaunch(const EmuLaunchConfig& cfg, const std::function<void(const EmuCta&)>& body);

}  // namespace braid
