#include "src/backends/cuda/peer_watch.h"

#include <chrono>

#include "src/common/wait.h"

namespace braid {

namespace {
constexpr auto kPeriod = std::chrono::milliseconds(100);
}  // namespace

PeerWatch::PeerWatch(std::vector<std::pair<int, pid_t>> peers, std::function<bool()> busy,
                     std::function<void(int, pid_t)> onGone, double graceSec)
    : peers_(std::move(peers)), busy_(std::move(busy)), onGone_(std::move(onGone)), graceSec_(graceSec) {
  if (!peers_.empty()) thread_ = std::thread([this] { run(); });
}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::run() {
  using Clock = std::chrono::steady_clock;
  int goneRank = -1;
  pid_t gonePid = 0;
  Clock::time_point seen;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, kPeriod, [this] { return stop_; })) {
    lock.unlock();
    if (goneRank < 0) {
      for (const auto& [rank, pid] : peers_) {
        if (processGone(pid)) {
          goneRank = rank;
          gonePid = pid;
          seen = Clock::now();
          break;
        }
      }
    }
    // Work in flight after the grace period: it may be waiting for the dead peer.
    if (goneRank >= 0 && busy_() && Clock::now() - seen > std::chrono::duration<double>(graceSec_)) {
      onGone_(goneRank, gonePid);
      return;
    }
    lock.lock();
  }
}

}  // namespace braid
