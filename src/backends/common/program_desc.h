// A channel program as plain data: what a backend executes. algorithms/schedule.h's Program is the owning host
// form (vectors) and describes itself as a ProgramDesc; the desc points into the Program's storage (or into a
// flattened copy of it in device memory) and never owns anything.
//
// Addressing. A program covers elements [begin, end) of a "unit" and walks it in tiles. Each Step names a block b
// of the tile (0 <= b < nblocks) and moves at most one FIFO slot of data:
//   Layout::kTiled   (all-reduce): a tile is nblocks consecutive chunks; block b is the b-th chunk of the tile, at
//                    the same element offset in the input and the output.
//   Layout::kStrided (all-gather, reduce-scatter, broadcast, reduce, send/recv): a tile is one chunk of the unit;
//                    block b lives at b * stride[buffer] + tile offset in that buffer (stride 0 = a single block).
// Sender and receiver derive identical tile and chunk sizes from the same parameters, so slot sizes never travel
// on the wire.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/step_shape.h"
#include "src/common/host_device.h"

namespace braid {

enum class Layout : uint8_t { kTiled, kStrided };

// One block of a packed step: which buffer (0 input, 1 output) and which block of it.
struct PackEntry {
  uint8_t buf;
  int32_t block;
};

struct ProgramDesc {
  Layout layout = Layout::kStrided;
  size_t begin = 0;
  size_t end = 0;
  size_t chunkElems = 0;  // elements per block per tile (at most one FIFO slot)
  int nblocks = 1;        // blocks per tile (kTiled)
  size_t stride[2] = {0, 0};
  int lane = 0;
  const Step* steps = nullptr;
  uint32_t nsteps = 0;
  // Packed steps: pack p (Step::block) is packEntries[packOffsets[p], packOffsets[p + 1]).
  const uint32_t* packOffsets = nullptr;
  const PackEntry* packEntries = nullptr;

  BRAID_HOST_DEVICE size_t tileElems() const {
    return layout == Layout::kTiled ? chunkElems * static_cast<size_t>(nblocks) : chunkElems;
  }
  BRAID_HOST_DEVICE size_t numTiles() const {
    if (end <= begin || chunkElems == 0) return 0;
    const size_t t = tileElems();
    return (end - begin + t - 1) / t;
  }
  // The element range of `block` in tile `tile`, as [offset, offset + count) within buffer `buf` (0 input, 1
  // output). count may be 0 for blocks beyond the data of a short last tile.
  BRAID_HOST_DEVICE void blockRange(size_t tile, int block, int buf, size_t* offset, size_t* count) const {
    const size_t tileStart = begin + tile * tileElems();
    const size_t remaining = end - tileStart;
    if (layout == Layout::kTiled) {
      // A full tile has nblocks chunks; a short last tile spreads its remainder evenly (rounded up) so every rank's
      // block shrinks together and the pipeline stays balanced.
      size_t chunk = chunkElems;
      if (remaining < tileElems())
        chunk = (remaining + static_cast<size_t>(nblocks) - 1) / static_cast<size_t>(nblocks);
      const size_t start = minSize(remaining, chunk * static_cast<size_t>(block));
      *offset = tileStart + start;
      *count = minSize(chunk, remaining - start);
      return;
    }
    *offset = static_cast<size_t>(block) * stride[buf] + tileStart;
    *count = minSize(chunkElems, remaining);
  }
  BRAID_HOST_DEVICE uint32_t packSize(int pack) const { return packOffsets[pack + 1] - packOffsets[pack]; }
  BRAID_HOST_DEVICE const PackEntry& packEntry(int pack, uint32_t i) const {
    return packEntries[packOffsets[pack] + i];
  }

 private:
  // std::min is a host function to nvcc.
  BRAID_HOST_DEVICE static size_t minSize(size_t a, size_t b) { return a < b ? a : b; }
};

}  // namespace braid
