#include "src/core/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "src/common/dtype.h"
#include "src/common/json_text.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/common/wait.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace braid {
namespace {

// Every live recorder of the process. Never destroyed: a dump may run while the process exits.
struct Registry {
  std::mutex mu;  // held for a whole dump, so a recorder is never freed under it (its destructor waits)
  std::vector<const FlightRecorder*> live;
  // The records of communicators that failed or were aborted and have been destroyed since (a program usually
  // destroys a failed communicator before it exits): later dumps keep them. The last kMaxRetired.
  std::vector<std::pair<pid_t, std::string>> retired;  // (the process that made it, the record)
};
constexpr size_t kMaxRetired = 16;
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

std::string jsonMicros(int64_t us) {
  return us == 0 ? "null" : std::to_string(us);
}

// Timestamps on the operation path cost one TSC read where the TSC is invariant (constant_tsc and nonstop_tsc: the
// same rate on every core, through sleep states), else a steady-clock read (about 3 times the cost); a dump turns
// them into wall-clock microseconds against an anchor taken when the first recorder was made.
class TickClock {
 public:
  TickClock() : tsc_(invariantTsc()) {
    anchorSteady_ = Clock::now();
    anchorWallUs_ = wallMicros();
    anchorTicks_ = now();
  }
  uint64_t now() const {
#if defined(__x86_64__)
    if (tsc_) return __rdtsc();
#endif
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
  }
  // Ticks per microsecond, measured from the anchor to now (at least a millisecond, so the estimate is good to
  // a few parts per million).
  double ticksPerUs() const {
    if (!tsc_) return 1000.0;
    std::chrono::duration<double, std::micro> elapsed = Clock::now() - anchorSteady_;
    if (elapsed.count() < 1000) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      elapsed = Clock::now() - anchorSteady_;
    }
    return static_cast<double>(now() - anchorTicks_) / elapsed.count();
  }
  int64_t wallUs(uint64_t ticks, double perUs) const {
    if (ticks == 0) return 0;
    return anchorWallUs_ +
           static_cast<int64_t>((static_cast<double>(ticks) - static_cast<double>(anchorTicks_)) / perUs);
  }

 private:
  static bool invariantTsc() {
#if defined(__x86_64__)
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (f == nullptr) return false;
    char line[4096];
    bool constant = false, nonstop = false;
    while (fgets(line, sizeof(line), f) != nullptr && !(constant && nonstop)) {
      if (strncmp(line, "flags", 5) != 0) continue;
      constant = strstr(line, " constant_tsc") != nullptr;
      nonstop = strstr(line, " nonstop_tsc") != nullptr;
      break;
    }
    fclose(f);
    return constant && nonstop;
#else
    return false;
#endif
  }
  bool tsc_;
  Clock::time_point anchorSteady_;
  int64_t anchorWallUs_ = 0;
  uint64_t anchorTicks_ = 0;
};
const TickClock& ticks() {
  static const TickClock* c = new TickClock();
  return *c;
}

// The self-pipe SIGUSR1 writes to; a thread waiting on it writes the dump (nothing in a handler may allocate).
std::atomic<int> gSignalWriteFd{-1};  // lock-free, so the handler may read it

void onSignal(int) {
  const int saved = errno;
  const char b = 1;
  const int fd = gSignalWriteFd.load(std::memory_order_relaxed);
  if (fd >= 0) (void)!write(fd, &b, 1);
  errno = saved;
}

void dumpThread(int fd) {
  for (;;) {
    char b;
    const ssize_t n = read(fd, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    Result<std::string> path = flightDump("SIGUSR1");
    if (!path.isOk()) {
      BRAID_WARN("flight recorder: SIGUSR1 dump failed: %s", path.status().message().c_str());
    } else if (!path.value().empty()) {
      BRAID_INFO(kLogInit, "flight recorder: SIGUSR1: wrote %s", path.value().c_str());
    }
  }
}

}  // namespace

const char* flightStateName(FlightState s) {
  switch (s) {
    case FlightState::kQueued:
      return "queued";
    case FlightState::kStarted:
      return "started";
    case FlightState::kFinished:
      return "finished";
    case FlightState::kFailed:
      return "failed";
    case FlightState::kDropped:
      return "not run";
  }
  return "?";
}

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

size_t roundUpPow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return n == 0 ? 0 : p;
}

// Entry::packed's bytes.
enum PackedByte { kKindByte, kP2pByte, kDtypeByte, kOpByte, kChosenByte, kAlgoByte, kProtoByte, kStateByte };
uint64_t withByte(uint64_t word, PackedByte b, unsigned value) {
  const int shift = 8 * static_cast<int>(b);
  return (word & ~(uint64_t{0xff} << shift)) | (uint64_t{value & 0xffu} << shift);
}
unsigned byteOf(uint64_t word, PackedByte b) {
  return static_cast<unsigned>(word >> (8 * static_cast<int>(b))) & 0xffu;
}

// `packed` with the planner's choice recorded.
uint64_t withChoice(uint64_t packed, AlgoId algo, ProtoId proto) {
  packed = withByte(packed, kChosenByte, 1);
  packed = withByte(packed, kAlgoByte, static_cast<unsigned>(algo));
  return withByte(packed, kProtoByte, static_cast<unsigned>(proto));
}

constexpr auto kRelaxed = std::memory_order_relaxed;

}  // namespace

// The owner's write of one slot: `seq` odd from construction to destruction. Only the owner writes a slot, so its
// own relaxed reads of it are exact.
class FlightRecorder::Writing {
 public:
  explicit Writing(Slot& s) : s_(s), seq_(s.seq.load(kRelaxed)) {
    s_.seq.store(seq_ + 1, kRelaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  ~Writing() { s_.seq.store(seq_ + 2, std::memory_order_release); }
  Writing(const Writing&) = delete;
  Writing& operator=(const Writing&) = delete;

 private:
  Slot& s_;
  const uint32_t seq_;
};

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(roundUpPow2(capacity)), mask_(capacity_ == 0 ? 0 : capacity_ - 1), pid_(getpid()) {
  if (capacity_ == 0) return;
  (void)ticks();  // the anchor exists before any timestamp
  slots_.reset(new Slot[capacity_]);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.push_back(this);
}

FlightRecorder::~FlightRecorder() {
  if (capacity_ == 0) return;
  bool failed;
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    failed = !error_.empty();
  }
  std::string record = failed ? toJson(wallMicros()) : std::string();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.erase(std::remove(r.live.begin(), r.live.end(), this), r.live.end());
  if (failed && !record.empty()) {
    if (r.retired.size() == kMaxRetired) r.retired.erase(r.retired.begin());
    r.retired.emplace_back(pid_, std::move(record));
  }
}

uint64_t FlightRecorder::queued(const FlightCall& call) {
  if (capacity_ == 0) return kNone;
  const uint64_t now = ticks().now();
  const uint64_t token = next_.load(kRelaxed);
  uint64_t packed = 0;
  packed = withByte(packed, kKindByte, static_cast<unsigned>(call.kind));
  packed = withByte(packed, kP2pByte, call.p2p ? 1 : 0);
  packed = withByte(packed, kDtypeByte, static_cast<unsigned>(call.dtype));
  packed = withByte(packed, kOpByte, static_cast<unsigned>(call.op));
  packed = withByte(packed, kStateByte, static_cast<unsigned>(FlightState::kQueued));
  const uint64_t collSeq = collSeq_.load(kRelaxed);
  const uint64_t p2pSeq = p2pSeq_.load(kRelaxed);
  Slot& s = slot(token);
  {
    Writing w(s);
    s.token.store(token, kRelaxed);
    s.collSeq.store(collSeq, kRelaxed);
    s.p2pSeq.store(call.p2p ? p2pSeq : 0, kRelaxed);
    s.count.store(call.count, kRelaxed);
    s.fn.store(call.fn, kRelaxed);
    s.packed.store(packed, kRelaxed);
    s.rootPeer.store((uint64_t{static_cast<uint32_t>(call.root)} << 32) | static_cast<uint32_t>(call.peer), kRelaxed);
    s.queued.store(now, kRelaxed);
    s.started.store(0, kRelaxed);
    s.ended.store(0, kRelaxed);
  }
  if (call.p2p) {
    p2pSeq_.store(p2pSeq + 1, kRelaxed);
  } else {
    collSeq_.store(collSeq + 1, kRelaxed);
  }
  next_.store(token + 1, std::memory_order_release);
  return token;
}

void FlightRecorder::nothingToRun(uint64_t token) {
  if (capacity_ == 0 || token == kNone) return;
  Slot& s = slot(token);
  const uint64_t packed = s.packed.load(kRelaxed);
  if (s.token.load(kRelaxed) != token || byteOf(packed, kStateByte) != static_cast<unsigned>(FlightState::kQueued)) {
    return;
  }
  Writing w(s);
  s.packed.store(withByte(packed, kStateByte, static_cast<unsigned>(FlightState::kFinished)), kRelaxed);
  s.started.store(s.queued.load(kRelaxed), kRelaxed);
  s.ended.store(s.queued.load(kRelaxed), kRelaxed);
}

void FlightRecorder::chose(uint64_t token, AlgoId algo, ProtoId proto) {
  if (capacity_ == 0 || token == kNone) return;
  Slot& s = slot(token);
  if (s.token.load(kRelaxed) != token) return;
  const uint64_t packed = withChoice(s.packed.load(kRelaxed), algo, proto);
  Writing w(s);
  s.packed.store(packed, kRelaxed);
}

// Inline: each caller's stamp member and states are then constants, so the latency path's one-entry moves cost no
// more than writing the entry directly.
inline void FlightRecorder::move(uint64_t from, uint64_t to, FlightState when, FlightState becomes,
                                 std::atomic<uint64_t> Slot::*stamp, uint64_t now) {
  for (uint64_t t = std::max(from, oldest(next_.load(kRelaxed))); t < to; ++t) {
    Slot& s = slot(t);
    const uint64_t packed = s.packed.load(kRelaxed);
    if (byteOf(packed, kStateByte) != static_cast<unsigned>(when)) continue;
    Writing w(s);
    s.packed.store(withByte(packed, kStateByte, static_cast<unsigned>(becomes)), kRelaxed);
    if (stamp != nullptr) (s.*stamp).store(now == kAtQueued ? s.queued.load(kRelaxed) : now, kRelaxed);
  }
}

void FlightRecorder::started(bool atQueued) {
  if (capacity_ == 0) return;
  const uint64_t next = next_.load(kRelaxed);
  if (next == unstarted_) return;  // nothing queued since the last launch: no clock read
  move(unstarted_, next, FlightState::kQueued, FlightState::kStarted, &Slot::started,
       atQueued ? kAtQueued : ticks().now());
  unstarted_ = next;
}

void FlightRecorder::startedChosen(uint64_t token, AlgoId algo, ProtoId proto) {
  if (capacity_ == 0) return;
  Slot& s = slot(token);
  uint64_t packed = s.packed.load(kRelaxed);
  if (token != unstarted_ || next_.load(kRelaxed) != token + 1 || s.token.load(kRelaxed) != token ||
      byteOf(packed, kStateByte) != static_cast<unsigned>(FlightState::kQueued)) {
    started(true);
    chose(token, algo, proto);
    return;
  }
  packed = withChoice(withByte(packed, kStateByte, static_cast<unsigned>(FlightState::kStarted)), algo, proto);
  {
    Writing w(s);
    s.packed.store(packed, kRelaxed);
    s.started.store(s.queued.load(kRelaxed), kRelaxed);
  }
  unstarted_ = token + 1;
}

void FlightRecorder::ended(const Status& result) {
  if (capacity_ == 0) return;
  if (!pendingLaunches_.empty()) pendingLaunches_.clear();  // everything started ends here
  if (unended_ != unstarted_) {
    move(unended_, unstarted_, FlightState::kStarted, result.isOk() ? FlightState::kFinished : FlightState::kFailed,
         &Slot::ended, ticks().now());
    unended_ = unstarted_;
  }
  if (!result.isOk()) {
    std::lock_guard<std::mutex> lock(infoMu_);
    if (error_.empty()) error_ = result.message();
  }
}

void FlightRecorder::launched(uint64_t issued) {
  if (capacity_ == 0) return;
  pendingLaunches_.emplace_back(issued, unstarted_);
}

void FlightRecorder::finishedLaunches(uint64_t finished) {
  while (!pendingLaunches_.empty() && pendingLaunches_.front().first <= finished) {
    const uint64_t to = std::min(pendingLaunches_.front().second, unstarted_);
    pendingLaunches_.pop_front();
    if (to <= unended_) continue;
    move(unended_, to, FlightState::kStarted, FlightState::kFinished, &Slot::ended, ticks().now());
    unended_ = to;
  }
}

void FlightRecorder::dropped() {
  if (capacity_ == 0) return;
  const uint64_t next = next_.load(kRelaxed);
  if (next != unstarted_) move(unstarted_, next, FlightState::kQueued, FlightState::kDropped, nullptr, 0);
  unstarted_ = next;
  if (pendingLaunches_.empty()) unended_ = next;  // calls of a launch still running end when it finishes
}

void FlightRecorder::identify(FlightIdentity id) {
  std::lock_guard<std::mutex> lock(infoMu_);
  id_ = std::move(id);
}

void FlightRecorder::aborted() {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(infoMu_);
  if (error_.empty()) error_ = "ncclCommAbort";
}

FlightRecorder::Entry FlightRecorder::load(uint64_t token) const {
  const Slot& s = slot(token);
  Entry e;
  for (;;) {
    const uint32_t before = s.seq.load(std::memory_order_acquire);
    if ((before & 1) != 0) {
      std::this_thread::yield();
      continue;
    }
    e.token = s.token.load(kRelaxed);
    e.collSeq = s.collSeq.load(kRelaxed);
    e.p2pSeq = s.p2pSeq.load(kRelaxed);
    e.call.count = s.count.load(kRelaxed);
    e.call.fn = s.fn.load(kRelaxed);
    const uint64_t packed = s.packed.load(kRelaxed);
    const uint64_t rootPeer = s.rootPeer.load(kRelaxed);
    e.queued = s.queued.load(kRelaxed);
    e.started = s.started.load(kRelaxed);
    e.ended = s.ended.load(kRelaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(kRelaxed) != before) continue;
    e.call.kind = static_cast<CollKind>(byteOf(packed, kKindByte));
    e.call.p2p = byteOf(packed, kP2pByte) != 0;
    e.call.dtype = static_cast<DType>(byteOf(packed, kDtypeByte));
    e.call.op = static_cast<int8_t>(byteOf(packed, kOpByte));
    e.chosen = byteOf(packed, kChosenByte) != 0;
    e.algo = static_cast<AlgoId>(byteOf(packed, kAlgoByte));
    e.proto = static_cast<ProtoId>(byteOf(packed, kProtoByte));
    e.state = static_cast<FlightState>(byteOf(packed, kStateByte));
    e.call.root = static_cast<int32_t>(static_cast<uint32_t>(rootPeer >> 32));
    e.call.peer = static_cast<int32_t>(static_cast<uint32_t>(rootPeer));
    break;
  }
  if (e.token != token) e.token = kNone;
  return e;
}

std::string FlightRecorder::toJson(int64_t nowUs) const {
  const TickClock& clock = ticks();
  const double perUs = clock.ticksPerUs();
  auto wall = [&](uint64_t t) { return jsonMicros(clock.wallUs(t, perUs)); };
  const uint64_t next = next_.load(std::memory_order_acquire);
  std::string error;
  FlightIdentity id;
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    error = error_;
    id = id_;
  }
  if (id.nranks == 0) return std::string();  // not identified yet: its init has not got that far
  std::string s = strPrintf("{\"comm_id\": \"0x%016llx\", \"name\": %s, \"rank\": %d, \"nranks\": %d, ",
                            static_cast<unsigned long long>(id.commId), jsonQuote(id.name).c_str(), id.rank, id.nranks);
  s += strPrintf("\"capacity\": %zu, \"next_coll_seq\": %llu, \"next_p2p_seq\": %llu, \"error\": %s, ", capacity_,
                 static_cast<unsigned long long>(collSeq_.load(kRelaxed)),
                 static_cast<unsigned long long>(p2pSeq_.load(kRelaxed)),
                 error.empty() ? "null" : jsonQuote(error).c_str());
  s += strPrintf("\"time_us\": %lld,\n   \"ops\": [", static_cast<long long>(nowUs));
  bool first = true;
  for (uint64_t t = oldest(next); t < next; ++t) {
    const Entry e = load(t);
    if (e.token == kNone) continue;  // overwritten while the dump ran
    const FlightCall& c = e.call;
    s += first ? "\n    " : ",\n    ";
    first = false;
    s += strPrintf("{\"coll_seq\": %llu, \"p2p_seq\": %s, \"fn\": \"%s\", \"count\": %zu, \"datatype\": \"%s\", ",
                   static_cast<unsigned long long>(e.collSeq), c.p2p ? std::to_string(e.p2pSeq).c_str() : "null", c.fn,
                   c.count, dtypeName(c.dtype));
    s += strPrintf("\"op\": %s, \"root\": %d, \"peer\": %d, ",
                   c.op >= 0 ? jsonQuote(opKindName(static_cast<OpKind>(c.op))).c_str() : "null", c.root, c.peer);
    if (e.chosen) {
      s += strPrintf("\"algorithm\": \"%s\", \"protocol\": \"%s\", ", algoName(e.algo), protoName(e.proto));
    } else {
      s += "\"algorithm\": null, \"protocol\": null, ";
    }
    s += strPrintf("\"state\": \"%s\", \"queued_us\": %s, \"started_us\": %s, \"ended_us\": %s}",
                   flightStateName(e.state), wall(e.queued).c_str(), wall(e.started).c_str(), wall(e.ended).c_str());
  }
  s += first ? "]}" : "\n   ]}";
  return s;
}

std::string FlightRecorder::summary() const {
  const TickClock& clock = ticks();
  const double perUs = clock.ticksPerUs();
  const uint64_t now = clock.now();
  const uint64_t next = next_.load(std::memory_order_acquire);
  for (uint64_t t = oldest(next); t < next; ++t) {
    const Entry e = load(t);
    if (e.state != FlightState::kStarted && e.state != FlightState::kQueued && e.state != FlightState::kFailed) {
      continue;
    }
    const uint64_t since = e.started != 0 ? e.started : e.queued;
    std::string what = e.call.p2p
                           ? strPrintf("%s %llu (peer %d, ", e.call.fn, (unsigned long long)e.p2pSeq, e.call.peer)
                           : strPrintf("collective %llu: %s (", (unsigned long long)e.collSeq, e.call.fn);
    return strPrintf("oldest unfinished operation: %scount %zu %s), %s, %s %.1f s before", what.c_str(), e.call.count,
                     dtypeName(e.call.dtype), flightStateName(e.state),
                     e.state == FlightState::kQueued ? "queued" : "started",
                     static_cast<double>(now - since) / perUs / 1e6);
  }
  return strPrintf("no operation in flight (%llu collectives so far)", (unsigned long long)collSeq_.load(kRelaxed));
}

Result<std::string> flightDump(const std::string& trigger) {
  const std::string pattern = params::FlightRecorderFile();
  if (pattern.empty()) return std::string();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string path = expandPathPattern(pattern, host, static_cast<int>(getpid()));
  const int64_t now = wallMicros();
  std::string text = "{\"braid_flight_recorder\": 1, \"host\": " + jsonQuote(host) +
                     strPrintf(", \"pid\": %d, \"time_us\": %lld, \"trigger\": ", static_cast<int>(getpid()),
                               static_cast<long long>(now)) +
                     jsonQuote(trigger) + ",\n \"comms\": [";
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // A child forked after its parent made communicators inherits their records: they are the parent's, not its own.
  const pid_t self = getpid();
  bool first = true;
  for (const auto& record : r.retired) {
    if (record.first != self) continue;
    text += (first ? "\n  " : ",\n  ") + record.second;
    first = false;
  }
  for (const FlightRecorder* live : r.live) {
    if (live->pid() != self) continue;
    const std::string record = live->toJson(now);
    if (record.empty()) continue;
    text += (first ? "\n  " : ",\n  ") + record;
    first = false;
  }
  text += "]}\n";
  // Written beside the target and renamed over it, so a reader never sees half a dump.
  const std::string tmp = path + strPrintf(".tmp%d", static_cast<int>(getpid()));
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return invalidArgument("BRAID_FLIGHT_RECORDER_FILE=%s: cannot create %s: %s", pattern.c_str(), tmp.c_str(),
                           strerror(errno));
  }
  const bool wrote = fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = fclose(f) == 0;
  if (!wrote || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return systemError("BRAID_FLIGHT_RECORDER_FILE=%s: writing %s failed: %s", pattern.c_str(), path.c_str(),
                       strerror(err));
  }
  return path;
}

void flightInstallSignal() {
  // Per process, not once: a child forked after the parent installed inherits the handler and the pipe but not
  // the thread that reads it.
  static std::mutex mu;
  static pid_t installedIn = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (installedIn == getpid() || params::FlightRecorderFile().empty()) return;
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0 || (old.sa_handler != SIG_DFL && old.sa_handler != onSignal)) {
    BRAID_INFO(kLogInit, "flight recorder: SIGUSR1 already has a handler; dumps come on failures and aborts only");
    return;
  }
  // A parent's pipe, inherited across fork, stays open (its read end may be shared); this process gets its own.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  fcntl(fds[0], F_SETFL, 0);  // the reader blocks; the handler's write end never does
  gSignalWriteFd.store(fds[1]);
  std::thread(dumpThread, fds[0]).detach();
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  installedIn = getpid();
  BRAID_INFO(kLogInit, "flight recorder: SIGUSR1 writes %s", params::FlightRecorderFile().c_str());
}

}  // namespace braid
