// A thread that watches the processes of a CUDA communicator's peers on this host while its kernels run. A kernel
// waiting for a peer that was killed only learns it at its deadline (BRAID_TIMEOUT, a minute by default); the host
// can see at once that the process is gone. When a watched process has exited and work is still in flight a grace
// period later (so a kernel that was only finishing what the peer had already sent is not stopped), onGone runs
// once, on this thread: the backend records why and sets the abort word its kernels poll.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace braid {

class PeerWatch {
 public:
  // `peers`: (rank, pid) of each peer process to watch. `busy`: whether work is in flight. Both callbacks run on
  // the watch thread; onGone at most once.
  PeerWatch(std::vector<std::pair<int, pid_t>> peers, std::function<bool()> busy,
            std::function<void(int rank, pid_t pid)> onGone, double graceSec = 3.0);
  ~PeerWatch();  // stops the thread and waits for it
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

 private:
  void run();

  std::vector<std::pair<int, pid_t>> peers_;
  std::function<bool()> busy_;
  std::function<void(int, pid_t)> onGone_;
  double graceSec_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace braid
