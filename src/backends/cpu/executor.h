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
#include "src/backends/common/work.h"
#include "src/backends/cpu/reduce.h"
#include "src/common/status.h"
#include "src/common/wait.h"
#include "transports/transport.h"

namespace braid {

// One operation's program on one channel with its connectors: the host form. ChannelWork::prepare flattens a queue
// of these into the plain form the step engine runs (src/backends/common/work.h), the same form a GPU kernel reads,
// so every host run also exercises the flattening.
struct WorkItem {
  const Program* prog = nullptr;  // the plan's (backends/backend.h PlannedWork), which outlives the launch
  const char* input = nullptr;
  char* output = nullptr;
  size_t elemSize = 1;
  ReduceOp op;
  std::vector<Connector*> sendConn;  // per step (null when the step does not send)
  std::vector<Connector*> recvConn;  // per step
  // LL and LL128: every slot travels as flagged lines (transports/ll.h, ll128.h). The step's data is staged in these
  // buffers (one chunk each; a CUDA backend's are in device memory, WorkDesc::llRecv/llSend), so the step
  // operations themselves are the Simple ones.
  ProtoId proto = ProtoId::kSimple;
  std::vector<char> llRecv, llSend;
};

struct ChannelWork {
  std::vector<WorkItem> items;

  // Flattens items into the plain work form and resets progress; call once after filling items (and after every
  // change to them). The runner then announces the items' receive demand (announceDemand, step_engine.h): the CPU
  // backend at once, a kernel in its prologue.
  void prepare();
  bool finished() const { return flat.remaining == 0; }

  // The flattened form (valid after prepare()): descriptors, states, the connector table and the arrays they point
  // into.
  ChannelWorkDesc flat;
  std::vector<WorkDesc> descs;
  std::vector<ItemState> states;
  std::vector<ConnSlot> conns;
  std::vector<int32_t> connIdx;    // per item: nsteps send indices, then nsteps receive indices
  std::vector<uint32_t> blockers;  // per item: its blockers
  std::vector<uint32_t> packOffsets;
  std::vector<PackEntry> packEntries;
};

// Drives every channel in `works` until all items are done, the deadline passes without progress, a peer fails,
// or the abort flag is set. On failure the connectors of unfinished items are marked aborted so peers fail fast.
Status runChannels(const std::vector<ChannelWork*>& works, const WaitContext& ctx);

// A persistent worker thread for one channel of one communicator.
class ChannelWorker {
 public:
  // `cpus`: where the worker thread runs (its rank's NUMA node); empty leaves it where the scheduler puts it.
  explicit ChannelWorker(int channel, std::vector<int> cpus = {});
  ~ChannelWorker();
  ChannelWorker(const ChannelWorker&) = delete;
  ChannelWorker& operator=(const ChannelWorker&) = delete;

  void post(ChannelWork* work, const WaitContext& ctx);
  Status wait();  // until the posted work is finished

 private:
  void loop();

  int channel_;
  std::vector<int> cpus_;
  std::mutex mu_;
  std::condition_variable cv_;
  ChannelWork* work_ = nullptr;
  WaitContext ctx_;
  bool finished_ = false;
  bool stop_ = false;
  Status result_;
  std::thread thread_;
};

}  // namespace braid
