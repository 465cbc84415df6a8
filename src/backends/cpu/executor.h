// The CPU backend: executes Programs over connectors with the Simple or the LL protocol.
//
// Work for one channel is a queue of WorkItems (one per operation of a group on that channel). Items that share a
// connector run in queue order; items on different connectors (for example the sends and receives of a grouped
// all-to-all) progress together, so grouped send/recv never deadlocks. Every item is a resumable state machine
// (tile, step): progress() moves whatever slots are ready and returns, so one thread can drive many items, many
// channels, or many communicators (a group that drives several comms from one thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms/schedule.h"
#include "src/backends/cpu/reduce.h"
#include "src/common/status.h"
#include "transports/transport.h"

namespace braid {

struct WorkItem {
  Program prog;
  const char* input = nullptr;
  char* output = nullptr;
  size_t elemSize = 1;
  ReduceOp op;
  std::vector<Connector*> sendConn;  // per step (null when the step does not send)
  std::vector<Connector*> recvConn;  // per step
  std::vector<size_t> blockers;      // earlier items of the same queue that share a connector with this one
  // LL: every slot travels as flagged lines (transports/ll.h). The step's data is staged in these buffers (one
  // chunk each), so the step operations themselves are the Simple ones.
  bool ll = false;
  std::vector<char> llRecv, llSend;
  size_t llLinesDone = 0;  // lines of the current step's slot already copied into llRecv

  size_t tile = 0;
  size_t step = 0;
  bool done = false;
};

// What a wait needs to know to fail cleanly instead of hanging.
struct ExecContext {
  int rank = 0;
  const std::atomic<bool>* abort = nullptr;
  double timeoutSec = 60;
  int spinCount = 2000;
};

struct ChannelWork {
  std::vector<WorkItem> items;
  size_t remaining = 0;
  // Computes blockers and resets progress; call once after filling items.
  void prepare();
};

// Drives every channel in `works` until all items are done, the deadline passes without progress, a peer fails,
// or the abort flag is set. On failure the connectors of unfinished items are marked aborted so peers fail fast.
Status runChannels(const std::vector<ChannelWork*>& works, const ExecContext& ctx);

// A persistent worker thread for one channel of one communicator.
class ChannelWorker {
 public:
  // `cpus`: where the worker thread runs (its rank's NUMA node); empty leaves it where the scheduler puts it.
  explicit ChannelWorker(int channel, std::vector<int> cpus = {});
  ~ChannelWorker();
  ChannelWorker(const ChannelWorker&) = delete;
  ChannelWorker& operator=(const ChannelWorker&) = delete;

  void post(ChannelWork* work, const ExecContext& ctx);
  Status wait();  // until the posted work is finished

 private:
  void loop();

  int channel_;
  std::vector<int> cpus_;
  std::mutex mu_;
  std::condition_variable cv_;
  ChannelWork* work_ = nullptr;
  ExecContext ctx_;
  bool finished_ = false;
  bool stop_ = false;
  Status result_;
  std::thread thread_;
};

}  // namespace braid
