#include "src/backends/cuda/emu/cta_emulator.h"

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

// Waits are sliced so a failure anywhere in the launch reaches every waiter soon, without a lock order between
// the blocks' mutexes.
constexpr auto kWaitSlice = std::chrono::milliseconds(20);

// Unwinds a simulated thread once its launch has failed; never leaves the emulator.
struct EmuTrap {};

const char* baseName(const char* file) {
  if (file == nullptr) return "?";
  const char* slash = strrchr(file, '/');
  return slash != nullptr ? slash + 1 : file;
}

enum class Where : int { kStarting, kBarrier, kRelax, kRunning, kFinished };

// Where one simulated thread was last seen, for deadlock reports (read by other threads while it runs).
struct Seen {
  std::atomic<int> where{static_cast<int>(Where::kStarting)};
  std::atomic<const char*> file{nullptr};
  std::atomic<int> line{0};
  void set(Where w, const char* f, int l) {
    file.store(f, std::memory_order_relaxed);
    line.store(l, std::memory_order_relaxed);
    where.store(static_cast<int>(w), std::memory_order_release);
  }
  std::string describe() const {
    const Where w = static_cast<Where>(where.load(std::memory_order_acquire));
    const std::string at =
        strPrintf("%s:%d", baseName(file.load(std::memory_order_relaxed)), line.load(std::memory_order_relaxed));
    switch (w) {
      case Where::kStarting:
        return "not started";
      case Where::kBarrier:
        return "at the barrier " + at;
      case Where::kRelax:
        return "spinning (back-off at " + at + ")";
      case Where::kRunning:
        return "running, last past " + at;
      default:
        return "finished";
    }
  }
};

// "threads 0-3,7 <what>; thread 4 <what>": threads grouped by what they were doing.
std::string groupThreads(const std::vector<Seen>& seen) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t t = 0; t < seen.size(); ++t) {
    const std::string d = seen[t].describe();
    auto it = groups.begin();
    while (it != groups.end() && it->first != d) ++it;
    if (it == groups.end()) {
      groups.push_back({d, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(static_cast<int>(t));
  }
  std::string out;
  for (const auto& g : groups) {
    std::string ids;
    for (size_t i = 0; i < g.second.size(); ++i) {
      size_t j = i;
      while (j + 1 < g.second.size() && g.second[j + 1] == g.second[j] + 1) ++j;
      if (!ids.empty()) ids += ",";
      ids += j == i ? std::to_string(g.second[i]) : strPrintf("%d-%d", g.second[i], g.second[j]);
      i = j;
    }
    if (!out.empty()) out += "; ";
    out += (g.second.size() == 1 ? "thread " : "threads ") + ids + " " + g.first;
  }
  return out;
}

}  // namespace

struct EmuDevice::State {
  std::mutex mu;
  std::condition_variable cv;
  int slots = 0;
  int free = 0;
};

EmuDevice::EmuDevice(int slots) : state_(std::make_unique<State>()) {
  state_->slots = slots < 1 ? 1 : slots;
  state_->free = state_->slots;
}
EmuDevice::~EmuDevice() = default;
int EmuDevice::slots() const {
  return state_->slots;
}

// One launch: the failure every thread checks, and its blocks.
class EmuRun {
 public:
  explicit EmuRun(const EmuLaunchConfig& cfg) : cfg(cfg), start(Clock::now()) {}

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The first failure wins; the others are consequences.
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = why;
    failed_.store(true, std::memory_order_release);
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  Clock::time_point deadlineFrom(Clock::time_point t) const {
    return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.deadlineSec));
  }

  // A resident slot of the device, or false when none came free before the deadline (or the launch failed).
  bool acquireSlot(int block) {
    if (cfg.device == nullptr) return true;
    EmuDevice::State& d = *cfg.device->state_;
    const auto deadline = deadlineFrom(Clock::now());
    std::unique_lock<std::mutex> lock(d.mu);
    while (d.free == 0) {
      if (failed()) return false;
      if (Clock::now() > deadline) {
        lock.unlock();
        fail(
            strPrintf("%s: CTA %d waited %.0f s for a resident slot: all %d slots of the device are held (kernels "
                      "that need each other co-resident deadlock on a GPU too)",
                      cfg.name.c_str(), block, cfg.deadlineSec, d.slots));
        return false;
      }
      d.cv.wait_for(lock, kWaitSlice);
    }
    --d.free;
    return true;
  }
  void releaseSlot() {
    if (cfg.device == nullptr) return;
    EmuDevice::State& d = *cfg.device->state_;
    {
      std::lock_guard<std::mutex> lock(d.mu);
      ++d.free;
    }
    d.cv.notify_all();
  }

  const EmuLaunchConfig& cfg;
  const Clock::time_point start;

 private:
  std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::string error_;
};

// One CTA: its barrier (generation, AND-fold, the site of the current generation) and its threads' whereabouts.
class EmuBlock {
 public:
  EmuBlock(EmuRun* run, int id, int n) : run_(run), id_(id), n_(n), seen_(static_cast<size_t>(n)) {
    rng_.resize(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
      rng_[static_cast<size_t>(t)] =
          run->cfg.chaosSeed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(id) * 7919 + static_cast<uint64_t>(t) + 1;
    }
  }

  int id() const { return id_; }
  int size() const { return n_; }
  EmuRun* run() const { return run_; }
  Seen& seen(int tid) { return seen_[static_cast<size_t>(tid)]; }
  const std::vector<Seen>& allSeen() const { return seen_; }

  // Chaos: a seeded, per-thread choice of nothing, a yield or a short sleep.
  void chaos(int tid) {
    if (run_->cfg.chaosSeed == 0) return;
    uint64_t& x = rng_[static_cast<size_t>(tid)];
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint64_t r = x % 16;
    if (r < 4) {
      sched_yield();
    } else if (r == 4) {
      timespec ts{0, static_cast<long>(20000 + x % 80000)};
      nanosleep(&ts, nullptr);
    }
  }

  void checkFailed() const {
    if (run_->failed()) throw EmuTrap{};
  }

  bool arrive(int tid, bool v, const char* file, int line) {
    chaos(tid);
    checkFailed();
    seen(tid).set(Where::kBarrier, file, line);
    std::unique_lock<std::mutex> lock(mu_);
    if (count_ == 0) {
      siteFile_ = file;
      siteLine_ = line;
    } else if (siteLine_ != line || strcmp(siteFile_, file) != 0) {
      const std::string why = strPrintf(
          "%s: divergent barriers in CTA %d: thread %d reached the barrier at %s:%d while %d thread(s) wait at %s:%d "
          "(every thread of a CTA must reach the same __syncthreads)",
          run_->cfg.name.c_str(), id_, tid, baseName(file), line, count_, baseName(siteFile_), siteLine_);
      lock.unlock();
      run_->fail(why);
      throw EmuTrap{};
    }
    acc_ = acc_ && v;
    if (++count_ == n_) {
      const bool r = acc_;
      result_ = r;
      acc_ = true;
      count_ = 0;
      ++gen_;
      lock.unlock();
      cv_.notify_all();
      seen(tid).set(Where::kRunning, file, line);
      return r;
    }
    const uint64_t gen = gen_;
    const auto deadline = run_->deadlineFrom(Clock::now());
    while (gen_ == gen) {
      if (run_->failed()) throw EmuTrap{};
      if (Clock::now() > deadline) {
        lock.unlock();
        run_->fail(strPrintf("%s: deadlock in CTA %d: the barrier at %s:%d waited %.0f s; %s", run_->cfg.name.c_str(),
                             id_, baseName(file), line, run_->cfg.deadlineSec, groupThreads(seen_).c_str()));
        throw EmuTrap{};
      }
      cv_.wait_for(lock, kWaitSlice);
    }
    const bool r = result_;
    lock.unlock();
    seen(tid).set(Where::kRunning, file, line);
    return r;
  }

  void relax(int tid, const char* file, int line) {
    seen(tid).set(Where::kRelax, file, line);
    checkFailed();
    if (run_->cfg.chaosSeed != 0) {
      chaos(tid);
    } else {
      sched_yield();
    }
  }

 private:
  EmuRun* run_;
  const int id_;
  const int n_;
  std::vector<Seen> seen_;
  std::vector<uint64_t> rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t gen_ = 0;
  int count_ = 0;
  bool acc_ = true;
  bool result_ = true;
  const char* siteFile_ = "";
  int siteLine_ = 0;
};

int EmuCta::nthreads() const {
  return block_->size();
}
int EmuCta::blockId() const {
  return block_->id();
}
void EmuCta::sync(const char* file, int line) const {
  (void)block_->arrive(tid_, true, file, line);
}
bool EmuCta::syncAll(bool v, const char* file, int line) const {
  return block_->arrive(tid_, v, file, line);
}
void EmuCta::relax(const char* file, int line) const {
  block_->relax(tid_, file, line);
}
uint64_t EmuCta::nowNs() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

EmuCta::McView EmuCta::mcView(const void* mc, size_t bytes) const {
  const EmuLaunchConfig& cfg = block_->run()->cfg;
  McView v;
  v.n = cfg.multicast == nullptr
            ? -1
            : cfg.multicast(mc, bytes, cfg.deviceOrdinal, reinterpret_cast<void**>(v.uc), kMaxMcBuffers);
  if (v.n <= 0) {
    throw std::runtime_error(
        strPrintf("multimem access to %zu bytes at %p on device %d: not inside a multicast "
                  "mapping this device may use (a GPU faults there)",
                  bytes, mc, cfg.deviceOrdinal));
  }
  return v;
}

namespace {
// A multimem access of a word not aligned to its size faults on a GPU; the emulator says so instead.
void requireMcAligned(const EmuCta::McView& v, size_t off, size_t wordBytes, const char* what) {
  if (reinterpret_cast<uintptr_t>(v.uc[0] + off) % wordBytes != 0) {
    throw std::runtime_error(strPrintf(
        "multimem %s of a %zu-byte word at offset %zu is misaligned (a GPU faults there)", what, wordBytes, off));
  }
}
}  // namespace

uint64_t EmuCta::mcLoadReduce(const McView& v, size_t off, McOp op) const {
  uint64_t words[kMaxMcBuffers];
  const size_t wb = mcWordBytes(op);
  requireMcAligned(v, off, wb, "load-reduce");
  for (int i = 0; i < v.n; ++i) {
    words[i] = 0;
    // Relaxed loads, as multimem.ld_reduce.relaxed: the direct kernel's barriers order them.
    if (wb == 8) {
      words[i] = __atomic_load_n(reinterpret_cast<const uint64_t*>(v.uc[i] + off), __ATOMIC_RELAXED);
    } else {
      words[i] = __atomic_load_n(reinterpret_cast<const uint32_t*>(v.uc[i] + off), __ATOMIC_RELAXED);
    }
  }
  block_->chaos(tid_);
  return mcCombine(op, words, v.n);
}

void EmuCta::mcStore(const McView& v, size_t off, uint64_t word, size_t bytes, int order) const {
  requireMcAligned(v, off, bytes, "store");
  for (int i = 0; i < v.n; ++i) {
    if (bytes == 8) {
      __atomic_store_n(reinterpret_cast<uint64_t*>(v.uc[i] + off), word, order);
    } else {
      __atomic_store_n(reinterpret_cast<uint32_t*>(v.uc[i] + off), static_cast<uint32_t>(word), order);
    }
  }
}

Status emuLaunch(const EmuLaunchConfig& cfg, const std::function<void(const EmuCta&)>& body) {
  if (cfg.grid < 1 || cfg.block < 1) {
    return invalidArgument("%s: launch of %d CTAs of %d threads: both must be at least 1", cfg.name.c_str(), cfg.grid,
                           cfg.block);
  }
  EmuRun run(cfg);
  std::vector<std::unique_ptr<EmuBlock>> blocks;
  std::vector<std::thread> threads;
  std::mutex doneMu;
  std::condition_variable doneCv;
  int running = 0;  // threads not yet finished
  std::vector<int> left(static_cast<size_t>(cfg.grid), cfg.block);

  auto threadMain = [&](EmuBlock* b, int tid) {
    try {
      EmuCta cta(b, tid);
      body(cta);
    } catch (const EmuTrap&) {
      // The launch failed elsewhere; its message says why.
    } catch (const std::exception& e) {
      run.fail(strPrintf("%s: thread %d of CTA %d threw: %s", cfg.name.c_str(), tid, b->id(), e.what()));
    } catch (...) {
      run.fail(strPrintf("%s: thread %d of CTA %d threw an unknown exception", cfg.name.c_str(), tid, b->id()));
    }
    b->seen(tid).set(Where::kFinished, nullptr, 0);
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(doneMu);
      last = --left[static_cast<size_t>(b->id())] == 0;
      --running;
    }
    if (last) run.releaseSlot();
    doneCv.notify_all();
  };

  for (int b = 0; b < cfg.grid && !run.failed(); ++b) {
    if (!run.acquireSlot(b)) break;
    blocks.push_back(std::make_unique<EmuBlock>(&run, b, cfg.block));
    {
      std::lock_guard<std::mutex> lock(doneMu);
      running += cfg.block;
    }
    for (int t = 0; t < cfg.block; ++t) threads.emplace_back(threadMain, blocks.back().get(), t);
  }

  // The launch as a whole has a deadline too, twice the barriers' (so a stuck barrier is reported as such first):
  // threads that spin (back-off) without end are reported by where each one was, and unwound at their next
  // back-off or barrier.
  {
    const auto deadline = run.deadlineFrom(run.deadlineFrom(run.start));
    std::unique_lock<std::mutex> lock(doneMu);
    while (running != 0) {
      if (Clock::now() > deadline && !run.failed()) {
        std::string where;
        for (const auto& b : blocks) {
          where += strPrintf("%sCTA %d: %s", where.empty() ? "" : " | ", b->id(), groupThreads(b->allSeen()).c_str());
        }
        lock.unlock();
        run.fail(strPrintf("%s: still running after %.1f s: %s", cfg.name.c_str(), 2 * cfg.deadlineSec, where.c_str()));
        lock.lock();
      }
      doneCv.wait_for(lock, kWaitSlice);
    }
  }
  for (std::thread& t : threads) t.join();
  if (run.failed()) return internalError("%s", run.error().c_str());
  return Status::ok();
}

}  // namespace braid
