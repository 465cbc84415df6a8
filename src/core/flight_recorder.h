// The flight recorder: every communicator keeps its last N operations (BRAID_FLIGHT_RECORDER_ENTRIES), each with
// its sequence number, API call, count, datatype, op, root or peer, algorithm, protocol, state and timings. When an
// operation fails (a timeout, a dead peer, ncclCommAbort), at ncclCommAbort, and on SIGUSR1 (what
// `braid-info --dump` sends), the process writes every live communicator's record as JSON to
// BRAID_FLIGHT_RECORDER_FILE (%h host, %p pid). `braid-info --analyze` reads the dumps of all ranks and names the
// ranks that never reached the operation the others wait in (docs/hardening.md, "When a job hangs").
//
// Sequence numbers: collectives (including all-to-all, gather and scatter, which every rank calls) are numbered
// 0, 1, 2, ... per communicator, so the same number means the same call on every rank; sends and receives get their
// own numbers per rank, and carry the number of the next collective.
//
// Thread safety: the communicator's calling thread (the owner) writes; a dump may read from any thread at any time
// and never blocks the owner (a seqlock per entry). Cost: a TSC read at queue, start and end of each operation and
// a few plain stores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/coll_types.h"
#include "src/common/status.h"

namespace braid {

enum class FlightState : uint8_t { kQueued, kStarted, kFinished, kFailed, kDropped };
const char* flightStateName(FlightState s);  // "queued", "started", "finished", "failed", "not run"

// What one queued call was (the recorder adds sequence numbers, state and times).
struct FlightCall {
  const char* fn = "";  // the API function (a static string)
  CollKind kind = CollKind::kAllReduce;
  bool p2p = false;  // ncclSend / ncclRecv (numbered per rank)
  size_t count = 0;
  DType dtype = DType::kFloat32;
  int op = -1;    // OpKind for reductions, -1 otherwise
  int root = -1;  // rooted collectives
  int peer = -1;  // ncclSend / ncclRecv
};

struct FlightIdentity {
  uint64_t commId = 0;  // the same on every rank of the communicator (from its unique id)
  int rank = 0;
  int nranks = 0;
  std::string name;  // config.commName
};

class FlightRecorder {
 public:
  static constexpr uint64_t kNone = ~uint64_t(0);

  // capacity 0 records nothing (every call returns at once). A recorder is left out of dumps until identify().
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ > 0; }
  // Which communicator this is (once init knows); until then dumps leave the recorder out.
  void identify(FlightIdentity id);
  // The communicator's id (the same on every rank; set by identify() during init).
  uint64_t commId() const { return id_.commId; }
  int pid() const { return pid_; }  // the process that made it (a forked child's dumps leave its parent's out)
  // Records a queued call; returns its token (kNone when disabled) for chose().
  uint64_t queued(const FlightCall& call);
  // The call `token` names has nothing to move on this rank (an all-to-all-v with zero counts): finished now.
  void nothingToRun(uint64_t token);
  // The algorithm and protocol the planner chose for the call `token` names (ignored once overwritten).
  void chose(uint64_t token, AlgoId algo, ProtoId proto);
  // Every queued call starts now; `atQueued`: at the time it was queued (a call that launches as it is queued, the
  // latency path, costs no second clock read).
  void started(bool atQueued = false);
  // started(true) then chose(token, ...) for the one call queued since the last start (the latency path's lone
  // collective): one write of its entry instead of two.
  void startedChosen(uint64_t token, AlgoId algo, ProtoId proto);
  // Every started call ends now: finished, or failed with `result`'s message.
  void ended(const Status& result);
  // A backend whose calls return before their work ends (CUDA streams): the started calls end when its launch
  // number `issued` has finished; finishedLaunches(n) says that launches 1..n have.
  void launched(uint64_t issued);
  void finishedLaunches(uint64_t finished);
  // Calls still queued will not run (a group that failed before it launched).
  void dropped();
  // ncclCommAbort was called: recorded as the communicator's error unless it already has one.
  void aborted();

  // This recorder as one JSON object (an element of a dump's "comms"; empty before identify()); now_us is the
  // dump's wall-clock time.
  std::string toJson(int64_t nowUs) const;
  // One line for a WARN: the oldest call not finished, its state and age.
  std::string summary() const;

 private:
  // launched() marks not finished yet: (launch number, the entry number the started calls end before).
  std::deque<std::pair<uint64_t, uint64_t>> pendingLaunches_;
  // One entry as plain data (a dump's copy).
  struct Entry {
    uint64_t token = kNone;  // entry number since creation; its slot is token & mask_
    uint64_t collSeq = 0;
    uint64_t p2pSeq = 0;
    FlightCall call;
    bool chosen = false;
    AlgoId algo = AlgoId::kRing;
    ProtoId proto = ProtoId::kSimple;
    FlightState state = FlightState::kQueued;
    uint64_t queued = 0, started = 0, ended = 0;  // ticks (flight_recorder.cc), 0: not yet
  };
  // One entry as the owner writes it: words it stores between two increments of `seq` (odd while it writes), which
  // a dump copies, retrying when `seq` moved. A seqlock per entry: the operation path takes no lock and makes no
  // atomic read-modify-write, and a dump never stops it.
  struct Slot {
    std::atomic<uint32_t> seq{0};
    std::atomic<uint64_t> token{kNone}, collSeq{0}, p2pSeq{0}, count{0};
    std::atomic<uint64_t> queued{0}, started{0}, ended{0};
    std::atomic<const char*> fn{""};
    std::atomic<uint64_t> packed{0};    // kind, p2p, dtype, op, chosen, algo, proto, state: a byte each
    std::atomic<uint64_t> rootPeer{0};  // root (high 32 bits) and peer (low 32 bits)
  };
  class Writing;                                       // the owner's side of a Slot's seqlock
  static constexpr uint64_t kAtQueued = ~uint64_t(0);  // move's `now`: see there
  // Entries [from, to) in state `when` become `becomes`, stamped `now` in `stamp` (null: no time; kAtQueued: each
  // entry's queued time).
  void move(uint64_t from, uint64_t to, FlightState when, FlightState becomes, std::atomic<uint64_t> Slot::*stamp,
            uint64_t now);

  Slot& slot(uint64_t token) const { return slots_[static_cast<size_t>(token & mask_)]; }
  // The entry `token` names as it is now (token kNone in the copy when the slot holds another one).
  Entry load(uint64_t token) const;
  uint64_t oldest(uint64_t next) const { return next > capacity_ ? next - capacity_ : 0; }

  const size_t capacity_;  // a power of two (the knob's value rounded up)
  const uint64_t mask_;
  const int pid_;
  std::unique_ptr<Slot[]> slots_;
  // Written by the owner only; atomic because a dump reads them.
  std::atomic<uint64_t> next_{0};  // the next token
  std::atomic<uint64_t> collSeq_{0}, p2pSeq_{0};
  uint64_t unstarted_ = 0;     // tokens below it have started (or were dropped)
  uint64_t unended_ = 0;       // tokens below it have ended
  mutable std::mutex infoMu_;  // id_ and error_: written by init, the owner and ncclCommAbort's thread
  FlightIdentity id_;          // nranks 0 until identify()
  std::string error_;          // the first failure's message
};

// Wall-clock microseconds since the epoch (timestamps in dumps: comparable across hosts with synchronised clocks).
int64_t wallMicros();

// Writes every live recorder of this process, and the last records of failed or aborted communicators destroyed
// since, to BRAID_FLIGHT_RECORDER_FILE (nothing when unset), replacing the file whole (written beside it, then
// renamed). `trigger` says why. Returns the path written, or "" when the knob is
// unset; an error names the path.
Result<std::string> flightDump(const std::string& trigger);
// Installs the SIGUSR1 handler (once per process, when BRAID_FLIGHT_RECORDER_FILE is set and SIGUSR1 has no handler
// yet): the handler only wakes a thread that writes the dump.
void flightInstallSignal();

}  // namespace braid
