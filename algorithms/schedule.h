// Schedules are data. An algorithm does not move bytes: for each rank and channel it emits a Program, a short
// list of Steps that is executed once per tile of the channel's element range. The same Program is run by the CPU
// backend (src/backends/cpu), simulated symbolically by the checker (algorithms/checker.h), and will later be run
// by the CUDA backend. Building one costs O(ranks), never O(bytes).
//
// The plain vocabulary (StepOp, Step, Layout, PackEntry, the step shapes) and the addressing rules live in the
// host+device layer (src/backends/common/step_shape.h, program_desc.h), since kernels read them too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/backends/common/program_desc.h"
#include "src/backends/common/step_shape.h"

namespace braid {

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

  // The plain form over this program's storage, without its packs (a backend flattens those with the work).
  ProgramDesc desc() const {
    ProgramDesc d;
    d.layout = layout;
    d.begin = begin;
    d.end = end;
    d.chunkElems = chunkElems;
    d.nblocks = nblocks;
    d.stride[0] = stride[0];
    d.stride[1] = stride[1];
    d.lane = lane;
    d.steps = steps.data();
    d.nsteps = static_cast<uint32_t>(steps.size());
    return d;
  }
  size_t tileElems() const { return desc().tileElems(); }
  size_t numTiles() const { return desc().numTiles(); }
  // The element range of `block` in tile `tile` (ProgramDesc::blockRange).
  void blockRange(size_t tile, int block, int buf, size_t* offset, size_t* count) const {
    desc().blockRange(tile, block, buf, offset, count);
  }
};

std::string describeProgram(const Program& p);

}  // namespace braid
