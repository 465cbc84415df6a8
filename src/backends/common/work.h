// The flattened, plain form of the work a backend executes: what the CPU executor runs today and what a kernel
// reads from device memory. Built by the backend from the planner's Programs and the communicator's connectors
// (src/backends/cpu/executor.cc flattens; a CUDA backend copies the same form to the device). Pointers only, no
// ownership: the arrays live in the backend's storage for the duration of the launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/fifo.h"
#include "src/backends/common/program_desc.h"
#include "src/common/coll_types.h"

namespace braid {

// One connector end as the engine sees it: the FIFO, this end's cursor, and what the transport said about it.
struct ConnSlot {
  FifoView view;
  FifoCursor* cursor = nullptr;  // host: the Connector's own; device: ConnState memory that outlives launches
  bool wholeMessages = false;    // messages arrive whole (a network): LL travels in the Simple slot
  bool demandDriven = false;     // the transport posts receives only for announced messages (FifoCtrl::wanted)
  void* owner = nullptr;         // the host object behind it (a Connector): for host hooks only, never dereferenced
                                 // by shared code
};

// One operation's program on one channel.
struct WorkDesc {
  ProgramDesc prog;
  const char* input = nullptr;
  char* output = nullptr;
  uint32_t elemSize = 1;
  ReduceOp op;
  ProtoId proto = ProtoId::kSimple;
  const int32_t* sendConn = nullptr;  // [prog.nsteps]: index into the channel's ConnSlot table, -1 when none
  const int32_t* recvConn = nullptr;
  // Earlier items of the same channel that share a connector with this one: this item waits until they are done.
  const uint32_t* blockers = nullptr;
  uint32_t nblockers = 0;
  // LL staging, one slot's payload each: the received lines are gathered here and the sent ones packed from here,
  // so the step's data movement is the Simple one.
  char* llRecv = nullptr;
  char* llSend = nullptr;
};

// Where an item is: resumable at any step boundary.
struct ItemState {
  size_t tile = 0;
  uint32_t step = 0;
  bool done = false;
  size_t llLinesDone = 0;  // lines of the current LL message already copied (a one-thread CTA resumes from here)
  uint32_t ahead = 0;      // steps of tile + 1 already run while this tile waited (step_engine.h's runAhead)
};

// One channel's queue: items run in order where they share a connector, together where they do not.
struct ChannelWorkDesc {
  const WorkDesc* items = nullptr;
  ItemState* states = nullptr;
  uint32_t nitems = 0;
  uint32_t remaining = 0;  // items not yet done
  ConnSlot* conns = nullptr;
  uint32_t nconns = 0;
};

}  // namespace braid
