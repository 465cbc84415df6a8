// Ring algorithms: for one rank and one channel, the Program of a ring collective (NCCL's runRing pattern).
#pragma once

#include <vector>

#include "algorithms/schedule.h"
#include "src/common/coll_types.h"
#include "src/common/status.h"

namespace braid {

struct RingParams {
  CollKind kind;
  std::vector<int> ring;  // rank order around the ring (a permutation of 0..n-1)
  int rank;               // the rank whose program is built
  int root = 0;           // broadcast / reduce
  size_t count;           // the unit: all-reduce/broadcast/reduce count, all-gather sendcount, reduce-scatter recvcount
  size_t begin, end;      // this channel's element range of the unit
  size_t chunkElems;      // elements per FIFO slot
};

// The ring Program of one rank for one channel. Errors on inconsistent parameters.
Result<Program> buildRingProgram(const RingParams& p);

// The point-to-point Program of a send (to peer) or a receive (from peer) over [begin, end).
Program buildP2pProgram(bool isSend, int peer, size_t begin, size_t end, size_t chunkElems);

// Splits [0, count) into nChannels contiguous parts aligned to `align` elements; empty parts are allowed.
void channelRange(size_t count, int nChannels, int channel, size_t align, size_t* begin, size_t* end);

}  // namespace braid
