// The signal kernel of one-sided operations on CUDA communicators (src/core/windows.h): one thread that raises
// signals and waits for them, in step order, on the user's stream. A put's data goes first, by the copy engine
// (cuMemcpyAsync on the same stream), so a signal this kernel raises after it implies the data is there. Written
// once over the CTA concept and compiled by nvcc (kernels/braid_kernel.cu) and by g++ for the CTA emulator.
//
// A signal word has one writer (the sender) and one reader (the receiver): the sender stores its running count with
// release at system scope; the receiver waits until an acquire load reaches the count it expects. A wait ends, with
// the reason in the launch's DevStatus, when the abort word is set (ncclCommAbort, ncclCommRevoke) or nothing arrives
// for timeoutNs (BRAID_TIMEOUT).
#pragma once

#include <cstdint>

#include "src/backends/common/kernel_main.h"
#include "src/backends/common/mem_order.h"
#include "src/common/host_device.h"

namespace braid {

// What a step does with its word.
enum : uint32_t {
  kRmaStepStore = 0,  // store `value` (release): a signal's running count
  kRmaStepWait = 1,   // wait until the word reaches `value` (acquire)
  kRmaStepAdd = 2,    // add `value` (release, an atomic): a GIN VA signal from another host (src/api/gin_net.h)
};

struct RmaKernelStep {
  uint64_t* word = nullptr;  // a signal: the peer's word for this rank; a wait: this rank's word for the peer
  uint64_t value = 0;        // what the signal stores or adds / the wait awaits
  int32_t peer = -1;
  uint32_t op = kRmaStepStore;
};

struct RmaKernelWork {
  const RmaKernelStep* steps = nullptr;
  uint32_t nsteps = 0;
};

constexpr const char* kRmaKernelName = "braidKernelRma";

// The kernel's only working thread is thread 0 of CTA 0.
template <class Cta>
BRAID_HOST_DEVICE void rmaKernelMain(const Cta& cta, const KernelArgs& a) {
  if (cta.tid() != 0) return;
  const RmaKernelWork& w = *a.rma;
  for (uint32_t i = 0; i < w.nsteps; ++i) {
    const RmaKernelStep& s = w.steps[i];
    if (s.op == kRmaStepStore) {
      storeRelease(s.word, s.value);
      continue;
    }
    if (s.op == kRmaStepAdd) {
      (void)fetchAddRelease(s.word, s.value);
      continue;
    }
    uint64_t since = 0;
    DevStatusCode code = DevStatusCode::kRunning;
    while (loadAcquire(s.word) < s.value) {
      if (a.abortFlag != nullptr && loadAcquire(a.abortFlag) != 0) {
        code = DevStatusCode::kAborted;
        break;
      }
      const uint64_t now = cta.nowNs();
      if (since == 0) since = now;
      if (a.timeoutNs != 0 && now - since > a.timeoutNs) {
        code = DevStatusCode::kTimeout;
        break;
      }
      cta.relax();
    }
    if (code == DevStatusCode::kRunning) continue;
    if (a.status != nullptr && fetchAddRelease(&a.status->claimed, 1u) == 0) {
      a.status->channel = 0;
      a.status->item = static_cast<int32_t>(i);
      a.status->conn = s.peer;  // a rank (KernelArgs::rma says so)
      a.status->step = 0;
      a.status->tile = loadAcquire(s.word);  // what had arrived
      storeRelease(&a.status->code, static_cast<uint32_t>(code));
    }
    return;
  }
}

}  // namespace braid
