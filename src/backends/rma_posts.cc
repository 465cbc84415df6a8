#include "src/backends/rma_posts.h"

#include <algorithm>

#include "src/common/logging.h"

namespace braid {

void RmaPosts::expect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++expected_;
}

void RmaPosts::post(const RmaStep& s, std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      queue_.push_back(Item{s, std::move(done)});
      cv_.notify_one();
      return;
    }
    if (expected_ > 0) --expected_;
  }
  BRAID_WARN(
      "rank %d: a one-sided operation toward rank %d was reached on its stream after the communicator ended: "
      "dropped",
      rank_, s.peer);
  if (done) done();
}

bool RmaPosts::next(Item* out, std::chrono::microseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, wait, [&] { return !queue_.empty(); })) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void RmaPosts::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  if (expected_ > 0) --expected_;
}

bool RmaPosts::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expected_ == 0 && queue_.empty();
}

size_t RmaPosts::close() {
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    dropped.swap(queue_);
    expected_ -= std::min<uint64_t>(expected_, dropped.size());
  }
  for (Item& it : dropped) {
    if (it.done) it.done();
  }
  return dropped.size();
}

}  // namespace braid
