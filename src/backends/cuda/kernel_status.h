// What a failed kernel's DevStatus word says (kernel_main.h), as the error the communicator reports: which entry,
// where it stopped (channel, lane, or the signal it waited for), the peer it waited on, and why.
#pragma once

#include <cstddef>
#include <string>

#include "src/backends/common/kernel_main.h"
#include "src/common/status.h"

namespace braid {

struct KernelFailureContext {
  int rank = 0;
  double timeoutSec = 0;                  // BRAID_TIMEOUT, for the message
  const std::string* peerGone = nullptr;  // "rank 1 (process 4242) exited" when a watched peer died, else empty
};

// The error for status `s` (its code is not kRunning) of a launch with `args` (entry `proto` for the FIFO kernels);
// the kernel's work is read through the host's copy, `toHost` bytes from the device addresses in args.
Status kernelFailure(const DevStatus& s, const KernelArgs& args, ProtoId proto, ptrdiff_t toHost,
                     const KernelFailureContext& ctx);

}  // namespace braid
