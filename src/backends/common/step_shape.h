// The vocabulary of schedules (algorithms/schedule.h): what a step does, and the shape of each kind of step as one
// constexpr table. The planner, the schedule checker, the CPU executor and the GPU kernel all read the shape from
// here; none of them switches over the step kinds.
#pragma once

#include <cstdint>

#include "src/common/host_device.h"

namespace braid {

// What one step does with the slot it receives (from recvPeer), the local buffers, and the slot it sends (to
// sendPeer). "Reduce" combines the received data with the local input block (the rank's own contribution).
enum class StepOp : uint8_t {
  kSend,                // input block -> send            (own contribution enters the pipeline)
  kSendFromOutput,      // output block -> send           (data already in the output: all-gather, broadcast)
  kCopySend,            // input block -> output block and send
  kRecv,                // recv -> output block
  kRecvSend,            // recv -> send                   (forward without keeping)
  kRecvCopySend,        // recv -> output block and send
  kRecvReduceSend,      // recv (+) input block -> send
  kRecvReduceCopy,      // recv (+) input block -> output block     (final: post-op applied)
  kRecvReduceCopySend,  // recv (+) input block -> output block and send (final: post-op applied)
  kCopy,                // input block -> output block    (post-op applied: a 1-rank reduction is final)
  // Trees combine two or three children: the first partial result waits in the output block ("accumulator").
  kRecvReducePartial,       // recv (+) input block -> output block  (not final)
  kRecvAccumulateSend,      // recv (+) output block -> send         (not final)
  kRecvAccumulateCopySend,  // recv (+) output block -> output block and send (final: post-op applied)
  kRecvAccumulateCopy,      // recv (+) output block -> output block (final: post-op applied)
  kRecvAccumulate,          // recv (+) output block -> output block (not final: a third child's turn follows)
  // Packed steps (log-step all-to-all): one slot carries several blocks, listed in the program's packs[block].
  kSendPack,  // the listed blocks (input or output) -> send, back to back
  kRecvPack,  // recv -> the listed output blocks
};
constexpr int kStepOps = 17;

struct Step {
  StepOp op;
  int32_t block;     // block index within the tile for the local buffers
  int32_t sendPeer;  // rank the slot goes to (-1 if none)
  int32_t recvPeer;  // rank the slot comes from (-1 if none)
};

// The local operand a step combines with (or copies) besides the received slot.
enum class Local : uint8_t {
  kNone,    // only the received slot
  kInput,   // the input block, pre-op applied (the rank's own contribution)
  kOutput,  // the output block as it is (an accumulated partial result, or data already delivered)
};

// The shape of a step. Its data movement is: result = recv (+) local, or whichever of the two it has; the result
// goes to the first destination, then is copied to the second.
struct StepShape {
  bool recv;          // consumes a slot
  bool send;          // fills and publishes a slot
  Local local;        // second operand
  bool writesOutput;  // the output block receives the result
  bool isFinal;       // the reduction is complete: apply the post-op (avg's division)
  bool sendFirst;     // with both destinations: compute into the send slot, then copy it to the output
  bool packed;        // one slot carries several blocks (the program's pack list)
  BRAID_HOST_DEVICE constexpr bool reduces() const { return recv && local != Local::kNone; }
  BRAID_HOST_DEVICE constexpr bool accumulates() const { return recv && local == Local::kOutput; }
  BRAID_HOST_DEVICE constexpr bool readsInput() const { return local == Local::kInput; }
};

// The table, indexed by StepOp in its order. It is a local of the function so that device code can index it at run
// time (a namespace-scope constexpr array is host memory to nvcc).
BRAID_HOST_DEVICE constexpr StepShape stepShape(StepOp op) {
  constexpr StepShape kShapes[kStepOps] = {
      // recv   send   local           output final  sendFirst packed
      {false, true, Local::kInput, false, false, false, false},   // kSend
      {false, true, Local::kOutput, false, false, false, false},  // kSendFromOutput
      {false, true, Local::kInput, true, false, true, false},     // kCopySend
      {true, false, Local::kNone, true, false, false, false},     // kRecv
      {true, true, Local::kNone, false, false, false, false},     // kRecvSend
      {true, true, Local::kNone, true, false, false, false},      // kRecvCopySend
      {true, true, Local::kInput, false, false, false, false},    // kRecvReduceSend
      {true, false, Local::kInput, true, true, false, false},     // kRecvReduceCopy
      {true, true, Local::kInput, true, true, false, false},      // kRecvReduceCopySend
      {false, false, Local::kInput, true, true, false, false},    // kCopy
      {true, false, Local::kInput, true, false, false, false},    // kRecvReducePartial
      {true, true, Local::kOutput, false, false, false, false},   // kRecvAccumulateSend
      {true, true, Local::kOutput, true, true, false, false},     // kRecvAccumulateCopySend
      {true, false, Local::kOutput, true, true, false, false},    // kRecvAccumulateCopy
      {true, false, Local::kOutput, true, false, false, false},   // kRecvAccumulate
      {false, true, Local::kNone, false, false, false, true},     // kSendPack
      {true, false, Local::kNone, true, false, false, true},      // kRecvPack
  };
  return kShapes[static_cast<int>(op)];
}

BRAID_HOST_DEVICE constexpr bool stepRecvs(StepOp op) {
  return stepShape(op).recv;
}
BRAID_HOST_DEVICE constexpr bool stepSends(StepOp op) {
  return stepShape(op).send;
}
BRAID_HOST_DEVICE constexpr bool stepReadsInput(StepOp op) {
  return stepShape(op).readsInput();
}
BRAID_HOST_DEVICE constexpr bool stepWritesOutput(StepOp op) {
  return stepShape(op).writesOutput;
}
BRAID_HOST_DEVICE constexpr bool stepReduces(StepOp op) {
  return stepShape(op).reduces();
}
// The reduction is complete here: apply the post-op (avg's division).
BRAID_HOST_DEVICE constexpr bool stepIsFinal(StepOp op) {
  return stepShape(op).isFinal;
}
// Combines with the output block (a partial result), not the input.
BRAID_HOST_DEVICE constexpr bool stepAccumulates(StepOp op) {
  return stepShape(op).accumulates();
}

BRAID_HOST_DEVICE constexpr const char* stepOpName(StepOp op) {
  constexpr const char* kNames[kStepOps] = {"send",
                                            "sendFromOutput",
                                            "copySend",
                                            "recv",
                                            "recvSend",
                                            "recvCopySend",
                                            "recvReduceSend",
                                            "recvReduceCopy",
                                            "recvReduceCopySend",
                                            "copy",
                                            "recvReducePartial",
                                            "recvAccumulateSend",
                                            "recvAccumulateCopySend",
                                            "recvAccumulateCopy",
                                            "recvAccumulate",
                                            "sendPack",
                                            "recvPack"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < kStepOps ? kNames[i] : "?";
}

// The table's rows, checked against what each name says.
static_assert(stepShape(StepOp::kSend).send && !stepShape(StepOp::kSend).recv, "kSend row");
static_assert(stepShape(StepOp::kCopySend).sendFirst && stepShape(StepOp::kCopySend).writesOutput, "kCopySend row");
static_assert(stepShape(StepOp::kRecvReduceCopySend).isFinal && stepReduces(StepOp::kRecvReduceCopySend),
              "kRecvReduceCopySend row");
static_assert(stepAccumulates(StepOp::kRecvAccumulate) && !stepIsFinal(StepOp::kRecvAccumulate), "kRecvAccumulate row");
static_assert(stepShape(StepOp::kRecvPack).packed && stepShape(StepOp::kRecvPack).recv, "kRecvPack row");

}  // namespace braid
