// Deadlines and abort flags for every blocking wait in the library. A wait never blocks forever: it polls the
// communicator's abort flag and gives up at its deadline with an error that says what it was waiting for.
//
// WaitContext is the one deadline context: the communicator (or the bootstrap, before there is one) reads
// BRAID_TIMEOUT and BRAID_SPIN_COUNT once and passes them down in it; no layer below reads those knobs again.
// WaitLoop is the one wait loop's policy for waits that poll shared memory: spin, then give the CPU up the way the
// caller says (yield, sleep, a futex), check abort at every round past the spin and the caller's failure checks
// (dead or aborted peers) at a fixed interval, and fail once nothing has progressed for the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

#include "src/common/status.h"

namespace braid {

using Clock = std::chrono::steady_clock;

// One polite spin of a busy wait: lets a sibling hyperthread run and avoids the pipeline flush on loop exit.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

struct WaitContext {
  const std::atomic<bool>* abort = nullptr;  // set by ncclCommAbort (may be null)
  // A wait in which nothing progresses for this long fails (BRAID_TIMEOUT; <= 0: no limit). WaitLoop measures it
  // from the last progress; withTimeout() also turns it into `deadline`, for waits with no progress to measure.
  double timeoutSec = 0;
  Clock::time_point deadline = Clock::time_point::max();  // an absolute end, whatever progresses
  int spinCount = 2000;                                   // BRAID_SPIN_COUNT: idle rounds spun before yielding
  int rank = -1;                                          // the waiting rank, for messages (-1: none)
  // [rank] the pid of each peer on this host (0: on another host, or this process), so a timeout can name a peer
  // that is stopped (SIGSTOP, a debugger) rather than the neighbour that waits for it. Null: not known.
  const int32_t* localPids = nullptr;
  int nLocalPids = 0;

  // A context whose deadline is `seconds` from now (<= 0: none).
  static WaitContext withTimeout(const std::atomic<bool>* abortFlag, double seconds) {
    WaitContext w;
    w.abort = abortFlag;
    w.timeoutSec = seconds;
    if (seconds > 0) {
      w.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    }
    return w;
  }
  bool aborted() const { return abort != nullptr && abort->load(std::memory_order_relaxed); }
  bool expired() const { return deadline != Clock::time_point::max() && Clock::now() >= deadline; }
  // Milliseconds left, capped at capMs (for poll()).
  int pollMs(int capMs) const {
    if (deadline == Clock::time_point::max()) return capMs;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) return 0;
    return left < capMs ? static_cast<int>(left) : capMs;
  }
};

// The status every wait returns when ncclCommAbort interrupts it.
inline Status abortedWait(const WaitContext& ctx) {
  return invalidUsage("rank %d: operation interrupted by ncclCommAbort", ctx.rank);
}

// Whether process `pid` (on this host) has exited: gone, or a zombie its parent has not reaped yet (a launcher that
// waits for one child at a time leaves the others' dead ranks as zombies, which kill(pid, 0) still finds).
bool processGone(int32_t pid);

// A peer on this host whose process is stopped (state T or t in /proc/<pid>/stat): an error naming it, else ok.
// Ranks stalled behind a stopped rank all see the same cause, not just its neighbours.
[[nodiscard]] Status stoppedPeer(const WaitContext& ctx);

// One wait: call progressed() after a round that moved something and idle() after one that did not.
class WaitLoop {
 public:
  explicit WaitLoop(const WaitContext& ctx, std::chrono::milliseconds checkEvery = std::chrono::milliseconds(50))
      : ctx_(ctx), checkEvery_(checkEvery) {}

  void progressed() { idle_ = 0; }

  // The first spinCount idle rounds spin. Past them, every round checks abort, `check(bool timedOut)` runs
  // every checkEvery (not at once: a short stall costs no system calls) (timedOut: nothing progressed for timeoutSec,
  // or the deadline passed; check returns the error that names what was awaited, or ok for a generic one), and
  // `sleep(n)` gives the CPU up for the n-th round past the spin. A non-ok return ends the wait.
  template <class Check, class Sleep>
  [[nodiscard]] Status idle(Check&& check, Sleep&& sleep) {
    if (++idle_ < ctx_.spinCount) {
      cpuRelax();
      return Status::ok();
    }
    const int past = idle_ - ctx_.spinCount;
    const Clock::time_point now = Clock::now();
    if (past == 0) {
      stalledSince_ = now;
      lastCheck_ = now;
    }
    if (ctx_.aborted()) return abortedWait(ctx_);
    if (now - lastCheck_ >= checkEvery_) {
      lastCheck_ = now;
      const bool timedOut =
          (ctx_.timeoutSec > 0 && now - stalledSince_ > std::chrono::duration<double>(ctx_.timeoutSec)) ||
          now >= ctx_.deadline;
      if (timedOut) BRAID_RETURN_IF_ERROR(stoppedPeer(ctx_));
      BRAID_RETURN_IF_ERROR(std::forward<Check>(check)(timedOut));
      if (timedOut) return remoteError("rank %d: no progress for %.0f s (BRAID_TIMEOUT)", ctx_.rank, ctx_.timeoutSec);
    }
    std::forward<Sleep>(sleep)(past);
    return Status::ok();
  }

 private:
  const WaitContext& ctx_;
  const std::chrono::milliseconds checkEvery_;
  int idle_ = 0;
  Clock::time_point stalledSince_{};
  Clock::time_point lastCheck_{};
};

}  // namespace braid
