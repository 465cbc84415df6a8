// A CUDA stream's half of a one-sided operation toward a rank of another host (ncclPutSignal, ncclSignal whose
// RmaStep::via is the messenger of src/core/rma_net.h): the put's data is copied, in stream order, into a pinned stage
// (so the caller may reuse its buffer once the stream passed the put, as after any stream operation), then a host
// function hands the put to the messenger's sender thread when the stream gets there. The stage goes back to
// `memory` once sent.
#pragma once

#include "src/backends/backend.h"
#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/launch_memory.h"
#include "src/common/status.h"

namespace braid {

// Enqueues s on `run` (the caller's context current). Errors name the driver call; nothing is enqueued for s then.
[[nodiscard]] Status postRmaOnStream(const CuApi* api, LaunchMemory* memory, const RmaStep& s, CUstream run);

}  // namespace braid
