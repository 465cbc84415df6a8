#include "src/backends/rma_posts.h"

#include <algorithm>

#include "src/common/logging.h"

namespace braid {

Status RmaPosts::expect(uint64_t bytes, const WaitContext& wait) {
  std::unique_lock<std::mutex> lock(mu_);
  const Clock::time_point start = Clock::now();
  while (held_ > 0 && held_ + bytes > budget_) {
    if (wait.aborted()) return abortedWait(wait);
    if (wait.timeoutSec > 0 && Clock::now() - start > std::chrono::duration<double>(wait.timeoutSec)) {
      return remoteError(
          "rank %d: puts toward ranks of other hosts held %llu staged bytes, not sent, for BRAID_TIMEOUT=%g s "
          "(BRAID_RMA_STAGE_BYTES=%llu; a peer that takes nothing, or a stream that never reaches them)",
          rank_, static_cast<unsigned long long>(held_), wait.timeoutSec, static_cast<unsigned long long>(budget_));
    }
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  held_ += bytes;
  ++expected_;
  return Status::ok();
}

uint64_t RmaPosts::pieceBytes() const {
  return std::max<uint64_t>(budget_ / 16, 64 << 10);
}

void RmaPosts::post(const RmaStep& s, uint64_t staged, std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      queue_.push_back(Item{s, staged, std::move(done)});
      cv_.notify_all();
      return;
    }
    if (expected_ > 0) --expected_;
    held_ -= std::min(held_, staged);
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

void RmaPosts::finished(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (expected_ > 0) --expected_;
  held_ -= std::min(held_, bytes);
  cv_.notify_all();  // a call waiting for room
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
    for (const Item& it : dropped) held_ -= std::min(held_, it.staged);
  }
  for (Item& it : dropped) {
    if (it.done) it.done();
  }
  return dropped.size();
}

}  // namespace braid
