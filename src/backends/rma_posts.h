// One-sided messages handed over later than their call: a CUDA stream reaches a ncclPutSignal toward another host
// after the call returned, and its host function gives the put (its data already copied into a stage) to the
// messenger (src/core/rma_net.h), whose sender thread sends it. RmaPosts is the queue between the two.
//
// Order: posts are sent in the order they are queued, which is stream order for one stream. Lifetime: expect() at
// the call counts a post that will come, so the messenger's end waits for the stream to reach it (under
// BRAID_TIMEOUT); after close(), posts are dropped (their `done` runs at once, with a WARN), so a stream that runs
// after its communicator ended touches nothing freed: the host function holds the queue by shared_ptr.
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

namespace braid {

class RmaPosts {
 public:
  struct Item {
    RmaStep step;
    std::function<void()> done;  // after the send (or the drop): the step's data may be freed
  };
  explicit RmaPosts(int rank) : rank_(rank) {}

  // At the call: one more post will come.
  void expect();
  // When the stream reaches it: queued for the sender. A post the communicator's end already gave up on is dropped.
  void post(const RmaStep& s, std::function<void()> done);
  // The sender: the oldest post, waiting up to `wait` for one; false when none came. finished() after handling it.
  bool next(Item* out, std::chrono::microseconds wait);
  void finished();
  // Whether every expected post came and was handled.
  bool idle() const;
  // From now on posts are dropped; items still queued are dropped now. Returns how many were dropped.
  size_t close();

 private:
  int rank_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t expected_ = 0;  // announced by expect() and not yet handled
  bool closed_ = false;
};

}  // namespace braid
