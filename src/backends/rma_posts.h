// One-sided messages handed over later than their call: a CUDA stream reaches a ncclPutSignal toward another host
// after the call returned, and its host function gives the put (its data already copied into a stage) to the
// messenger (src/core/rma_net.h), whose sender thread sends it. RmaPosts is the queue between the two.
//
// Order: posts are sent in the order they are queued, which is stream order for one stream. Lifetime: expect() at
// the call counts a post that will come, so the messenger's end waits for the stream to reach it (under
// BRAID_TIMEOUT); after close(), posts are dropped (their `done` runs at once, with a WARN), so a stream that runs
// after its communicator ended touches nothing freed: the host function holds the queue by shared_ptr.
// Memory: expect() also counts the bytes the post holds staged until sent, and waits while that would pass the
// budget (BRAID_RMA_STAGE_BYTES), so a put of any size holds a bounded amount of pinned memory.
//
// Thread safety: every member from any thread. post() never blocks beyond the queue's mutex and calls no CUDA
// function (a host function may not).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "src/backends/backend.h"
#include "src/common/status.h"
#include "src/common/wait.h"

namespace braid {

class RmaPosts {
 public:
  struct Item {
    RmaStep step;
    uint64_t staged = 0;         // what expect() counted for it
    std::function<void()> done;  // after the send (or the drop): the step's data may be freed
  };
  RmaPosts(int rank, uint64_t budgetBytes) : rank_(rank), budget_(budgetBytes) {}

  // At the call: one more post will come, holding `bytes` staged until it is sent. Waits while the posts' staged
  // bytes would pass the budget (never when none are held). Errors: the wait's deadline (naming the budget and its
  // knob) or ncclCommAbort; nothing is counted then.
  [[nodiscard]] Status expect(uint64_t bytes, const WaitContext& wait);
  // The largest piece a put should be staged in: a sixteenth of the budget, at least 64 KB.
  uint64_t pieceBytes() const;
  // When the stream reaches it: queued for the sender. A post the communicator's end already gave up on is dropped.
  void post(const RmaStep& s, uint64_t staged, std::function<void()> done);
  // The sender: the oldest post, waiting up to `wait` for one; false when none came. finished() after handling it.
  bool next(Item* out, std::chrono::microseconds wait);
  void finished(uint64_t bytes);
  // Whether every expected post came and was handled.
  bool idle() const;
  // From now on posts are dropped; items still queued are dropped now. Returns how many were dropped.
  size_t close();

 private:
  int rank_;
  uint64_t budget_;
  uint64_t held_ = 0;  // staged bytes of expected posts
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t expected_ = 0;  // announced by expect() and not yet handled
  bool closed_ = false;
};

}  // namespace braid
