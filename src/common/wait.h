// Deadlines and abort flags for every blocking wait in the library. A wait never blocks forever: it polls the
// communicator's abort flag and gives up at its deadline with an error that says what it was waiting for.
#pragma once

#include <atomic>
#include <chrono>

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
  Clock::time_point deadline = Clock::time_point::max();

  static WaitContext withTimeout(const std::atomic<bool>* abortFlag, double seconds) {
    WaitContext w;
    w.abort = abortFlag;
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

}  // namespace braid
