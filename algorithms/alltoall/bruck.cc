#include "algorithms/alltoall/bruck.h"

namespace braid {

int bruckRounds(int nranks) {
  int k = 0;
  while ((1 << k) < nranks) ++k;
  return k;
}

int bruckMaxPack(int nranks) {
  int most = 1;
  for (int k = 0; (1 << k) < nranks; ++k) {
    int m = 0;
    for (int j = 1; j < nranks; ++j) m += (j >> k) & 1;
    if (m > most) most = m;
  }
  return most;
}

Result<Program> buildBruckProgram(const BruckParams& p) {
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks || p.chunkElems == 0 || p.end < p.begin || p.end > p.count) {
    return internalError("bruck: bad parameters (n=%d rank=%d count=%zu range [%zu,%zu) chunk %zu)", p.nranks, p.rank,
                         p.count, p.begin, p.end, p.chunkElems);
  }
  const int n = p.nranks, r = p.rank;
  Program prog;
  prog.layout = Layout::kStrided;
  prog.begin = p.begin;
  prog.end = p.end;
  prog.chunkElems = p.chunkElems;
  prog.stride[0] = p.count;
  prog.stride[1] = p.count;
  // A rank's own block never travels.
  prog.steps.push_back(Step{StepOp::kCopy, r, -1, -1});
  for (int k = 0; (1 << k) < n; ++k) {
    const int dist = 1 << k;
    std::vector<PackEntry> out, in;
    for (int j = 1; j < n; ++j) {
      if (((j >> k) & 1) == 0) continue;
      const int finalBlock = ((r - j) % n + n) % n;  // where the block at distance j ends up here
      // Not moved yet (no lower bit of j set): still in the input, addressed by its destination.
      if ((j & (dist - 1)) == 0) {
        out.push_back(PackEntry{0, (r + j) % n});
      } else {
        out.push_back(PackEntry{1, finalBlock});
      }
      in.push_back(PackEntry{1, finalBlock});
    }
    const int send = static_cast<int>(prog.packs.size());
    prog.packs.push_back(std::move(out));
    prog.packs.push_back(std::move(in));
    // Send first: the blocks this round receives overwrite output blocks the send reads.
    prog.steps.push_back(Step{StepOp::kSendPack, send, (r + dist) % n, -1});
    prog.steps.push_back(Step{StepOp::kRecvPack, send + 1, -1, ((r - dist) % n + n) % n});
  }
  return prog;
}

}  // namespace braid
