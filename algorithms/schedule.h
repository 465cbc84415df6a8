// Schedules are data. An algorithm does not move bytes: for each rank and channel it emits a Program, a short
// list of Steps that is executed once per tile of the channel's element range. The same Program is run by the CPU
// backend (src/backends/cpu), simulated symbolically by the checker (algorithms/checker.h), and will later be run
// by the CUDA backend. Building one costs O(ranks), never O(bytes).
//
// Addressing. A Program covers elements [begin, end) of a "unit" and walks it in tiles. Each Step names a block b
// of the tile (0 <= b < nblocks) and moves at most one FIFO slot of data:
//   Layout::kTiled   (all-reduce): a tile is nblocks consecutive chunks; block b is the b-th chunk of the tile, at
//                    the same element offset in the input and the output.
//   Layout::kStrided (all-gather, reduce-scatter, broadcast, reduce, send/recv): a tile is one chunk of the unit;
//                    block b lives at b * stride[buffer] + tile offset in that buffer (stride 0 = a single block).
// Sender and receiver derive identical tile and chunk sizes from the same Program parameters, so slot sizes never
// travel on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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
  // Packed steps (log-step all-to-all): one slot carries several blocks, listed in Program::packs[block].
  kSendPack,  // the listed blocks (input or output) -> send, back to back
  kRecvPack,  // recv -> the listed output blocks
};

const char* stepOpName(StepOp op);
bool stepRecvs(StepOp op);
bool stepSends(StepOp op);
bool stepReadsInput(StepOp op);
bool stepWritesOutput(StepOp op);
bool stepReduces(StepOp op);
bool stepIsFinal(StepOp op);      // the reduction is complete here: apply the post-op (avg's division)
bool stepAccumulates(StepOp op);  // combines with the output block (a partial result), not the input

struct Step {
  StepOp op;
  int32_t block;     // block index within the tile for the local buffers
  int32_t sendPeer;  // rank the slot goes to (-1 if none)
  int32_t recvPeer;  // rank the slot comes from (-1 if none)
};

enum class Layout : uint8_t { kTiled, kStrided };

// One block of a packed step: which buffer (0 input, 1 output) and which block of it.
struct PackEntry {
  uint8_t buf;
  int32_t block;
};

struct Program {
  Layout layout = Layout::kStrided;
  size_t begin = 0;           // first element of this channel's part of the unit
  size_t end = 0;             // one past the last
  size_t chunkElems = 0;      // elements per block per tile (at most one FIFO slot)
  int nblocks = 1;            // blocks per tile (kTiled)
  size_t stride[2] = {0, 0};  // kStrided: element distance between blocks in the input [0] and output [1]
  // Programs of one channel on different lanes use separate connectors to the same peer, so they progress
  // independently (the double binary tree's second tree is lane 1). kLanes in the planner bounds it.
  int lane = 0;
  std::vector<Step> steps;  // executed in order, once per tile
  // Packed steps name an entry here (Step::block); every block of a pack moves the same tile range, so a slot
  // holds pack.size() x the block's elements (the caller sizes chunkElems for the largest pack).
  std::vector<std::vector<PackEntry>> packs;

  size_t tileElems() const { return layout == Layout::kTiled ? chunkElems * static_cast<size_t>(nblocks) : chunkElems; }
  size_t numTiles() const;
  // The element range of `block` in tile `tile`, as [offset, offset + count) within buffer `buf` (0 input, 1 output).
  // count may be 0 for blocks beyond the data of a short last tile.
  void blockRange(size_t tile, int block, int buf, size_t* offset, size_t* count) const;
};

std::string describeProgram(const Program& p);

}  // namespace braid
