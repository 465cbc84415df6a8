// A CUDA stream's half of a one-sided operation toward a rank of another host (ncclPutSignal, ncclSignal whose
// RmaStep::via is the messenger of src/core/rma_net.h): the put's data is copied, in stream order, into a pinned stage
// (so the caller may reuse its buffer once the stream passed the put, as after any stream operation), then a host
// function hands the put to the messenger's sender thread when the stream gets there. The stage goes back to
// `memory` once sent. A large put goes in pieces, each staged and handed over on its own, within the messenger's
// budget of staged bytes (RmaPosts, BRAID_RMA_STAGE_BYTES): the call waits for room while earlier pieces are unsent.
#pragma once

#include "src/backends/backend.h"
#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/launch_memory.h"
#include "src/common/status.h"
#include "src/common/wait.h"

namespace braid {

// Enqueues s on `run` (the caller's context current), waiting for room under `wait`. Errors name the driver call or
// the budget; pieces enqueued before an error are sent, without the signal (the last piece carries it).
[[nodiscard]] Status postRmaOnStream(const CuApi* api, LaunchMemory* memory, const RmaStep& s, CUstream run,
                                     const WaitContext& wait);

}  // namespace braid
