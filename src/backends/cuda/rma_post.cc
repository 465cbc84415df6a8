#include "src/backends/cuda/rma_post.h"

#include <algorithm>
#include <memory>

#include "src/backends/rma_posts.h"

namespace braid {
namespace {

// A piece of a put (or a signal) toward a rank of another host, from the call to the moment its stream reaches it.
struct PostedRma {
  std::shared_ptr<RmaPosts> posts;
  RmaStep step;           // its data (if any) in `stage`
  void* stage = nullptr;  // pinned, from `memory`; back there once sent
  LaunchMemory* memory = nullptr;
};

// A host function (cuLaunchHostFunc): may call no CUDA function and should not block, so it only hands the piece to
// the messenger's sender thread.
void postWhenReached(void* arg) {
  std::unique_ptr<PostedRma> p(static_cast<PostedRma*>(arg));
  LaunchMemory* memory = p->memory;
  void* stage = p->stage;
  p->posts->post(p->step, p->step.kind == RmaStep::Kind::kPut ? p->step.bytes : 0, [memory, stage] {
    if (stage != nullptr) memory->give(stage);
  });
}

// One piece: `s` with its data (s.bytes from s.src, maybe none) copied to a stage on `run`, then the host function.
Status postPiece(const CuApi* api, LaunchMemory* memory, const std::shared_ptr<RmaPosts>& posts, const RmaStep& s,
                 CUstream run, const WaitContext& wait) {
  const uint64_t staged = s.kind == RmaStep::Kind::kPut ? s.bytes : 0;
  BRAID_RETURN_IF_ERROR(posts->expect(staged, wait));  // room in the budget, or an error naming it
  auto p = std::make_unique<PostedRma>();
  p->posts = posts;
  p->step = s;
  p->memory = memory;
  auto undo = [&](Status st) {
    posts->finished(staged);
    if (p->stage != nullptr) memory->give(p->stage);
    return st;
  };
  if (staged > 0) {
    Result<void*> stage = memory->takePinned(s.bytes, "a put's stage toward another host");
    if (!stage.isOk()) return undo(stage.status());
    p->stage = stage.value();
    Status copied = api->check(
        api->memcpyAsync(reinterpret_cast<CUdeviceptr>(p->stage), reinterpret_cast<CUdeviceptr>(s.src), s.bytes, run),
        "cuMemcpyAsync (ncclPutSignal toward another host)");
    if (!copied.isOk()) return undo(copied);
    p->step.src = p->stage;
  }
  const CUresult r = api->launchHostFunc(run, &postWhenReached, p.get());
  if (r != kCuSuccess) {
    if (p->stage != nullptr) (void)api->streamSynchronize(run);  // the copy into the stage may still be queued
    return undo(api->check(r, "cuLaunchHostFunc (ncclPutSignal toward another host)"));
  }
  (void)p.release();  // the host function's now
  return Status::ok();
}

}  // namespace

Status postRmaOnStream(const CuApi* api, LaunchMemory* memory, const RmaStep& s, CUstream run,
                       const WaitContext& wait) {
  std::shared_ptr<RmaPosts> posts = s.via->posts();
  if (posts == nullptr) return invalidUsage("the communicator is ending: it takes no more one-sided operations");
  if (s.kind != RmaStep::Kind::kPut || s.bytes == 0) return postPiece(api, memory, posts, s, run, wait);
  // Pieces of at most a part of the budget, so a put of any size holds bounded pinned memory; only the last carries
  // the signal (value 0: none), and the pieces go in order, so the signal still comes after all of the data.
  const uint64_t piece = posts->pieceBytes();
  RmaStep part = s;
  for (uint64_t done = 0; done < s.bytes;) {
    const uint64_t len = std::min<uint64_t>(piece, s.bytes - done);
    part.src = static_cast<const char*>(s.src) + done;
    part.offset = s.offset + done;
    part.bytes = len;
    part.value = done + len == s.bytes ? s.value : 0;
    BRAID_RETURN_IF_ERROR(postPiece(api, memory, posts, part, run, wait));
    done += len;
  }
  return Status::ok();
}

}  // namespace braid
