// Log-step all-to-all (Bruck et al., 1997): ceil(log2 n) rounds instead of n - 1 messages per rank. In round k
// every rank sends one slot to rank + 2^k and receives one from rank - 2^k; the slot packs the blocks whose index j
// (the distance from a block's source to its destination) has bit k set, about n / 2 of them. Fewer, larger
// messages: a win when per-message cost dominates (small blocks, many ranks), a loss in bytes moved
// (n / 2 x log2 n blocks per rank instead of n - 1), so the selector uses it for small messages only.
//
// No rotation passes: a block is read from the input while it has not moved yet and otherwise from the output
// block it will finally occupy (rank - j), where every intermediate copy of it is kept; the last round that moves
// it writes it there for good. So the schedule needs no scratch buffer and is the same Program the CUDA backend
// will run.
#pragma once

#include <cstddef>

#include "algorithms/schedule.h"
#include "src/common/status.h"

namespace braid {

struct BruckParams {
  int nranks;
  int rank;
  size_t count;       // elements per block (the all-to-all's count): the stride of both buffers
  size_t begin, end;  // this channel's element range within each block
  size_t chunkElems;  // elements of each block per slot (a slot carries up to bruckMaxPack blocks)
};

// Blocks in the largest pack over n ranks: slot bytes / this = the chunk's share per block.
int bruckMaxPack(int nranks);
// Rounds: ceil(log2 n).
int bruckRounds(int nranks);

Result<Program> buildBruckProgram(const BruckParams& p);

}  // namespace braid
