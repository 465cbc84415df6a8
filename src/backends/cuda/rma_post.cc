#include "src/backends/cuda/rma_post.h"

#include <memory>

#include "src/backends/rma_posts.h"

namespace braid {
namespace {

// A put or signal toward a rank of another host, from the call to the moment its stream reaches it.
struct PostedRma {
  std::shared_ptr<RmaPosts> posts;
  RmaStep step;           // its data (if any) in `stage`
  void* stage = nullptr;  // pinned, from `memory`; back there once sent
  LaunchMemory* memory = nullptr;
};

// A host function (cuLaunchHostFunc): may call no CUDA function and should not block, so it only hands the put to
// the messenger's sender thread.
void postWhenReached(void* arg) {
  std::unique_ptr<PostedRma> p(static_cast<PostedRma*>(arg));
  LaunchMemory* memory = p->memory;
  void* stage = p->stage;
  p->posts->post(p->step, [memory, stage] {
    if (stage != nullptr) memory->give(stage);
  });
}

}  // namespace

Status postRmaOnStream(const CuApi* api, LaunchMemory* memory, const RmaStep& s, CUstream run) {
  auto p = std::make_unique<PostedRma>();
  p->posts = s.via->posts();
  p->step = s;
  p->memory = memory;
  if (s.kind == RmaStep::Kind::kPut && s.bytes > 0) {
    // The caller may reuse its buffer once the stream passed the put: its data goes to a stage first, in stream
    // order after what the stream wrote before.
    BRAID_ASSIGN_OR_RETURN(p->stage, memory->takePinned(s.bytes, "a put's stage toward another host"));
    Status copied = api->check(
        api->memcpyAsync(reinterpret_cast<CUdeviceptr>(p->stage), reinterpret_cast<CUdeviceptr>(s.src), s.bytes, run),
        "cuMemcpyAsync (ncclPutSignal toward another host)");
    if (!copied.isOk()) {
      memory->give(p->stage);
      return copied;
    }
    p->step.src = p->stage;
  }
  p->posts->expect();
  const CUresult r = api->launchHostFunc(run, &postWhenReached, p.get());
  if (r != kCuSuccess) {
    p->posts->finished();
    if (p->stage != nullptr) memory->give(p->stage);
    return api->check(r, "cuLaunchHostFunc (ncclPutSignal toward another host)");
  }
  (void)p.release();  // the host function's now
  return Status::ok();
}

}  // namespace braid
