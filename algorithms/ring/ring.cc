#include "algorithms/ring/ring.h"

#include <algorithm>

namespace braid {

void channelRange(size_t count, int nChannels, int channel, size_t align, size_t* begin, size_t* end) {
  size_t per = (count + static_cast<size_t>(nChannels) - 1) / static_cast<size_t>(nChannels);
  if (align > 1) per = (per + align - 1) / align * align;
  *begin = std::min(count, per * static_cast<size_t>(channel));
  *end = std::min(count, *begin + per);
}

namespace {

// Where `rank` sits in the ring, or -1.
int ringPosition(const std::vector<int>& ring, int rank) {
  for (size_t i = 0; i < ring.size(); ++i) {
    if (ring[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Result<Program> buildRingProgram(const RingParams& p) {
  const int n = static_cast<int>(p.ring.size());
  const int pos = ringPosition(p.ring, p.rank);
  if (pos < 0) return internalError("rank %d is not in the ring", p.rank);
  const bool rooted = p.kind == CollKind::kBroadcast || p.kind == CollKind::kReduce;
  const int rootPos = ringPosition(p.ring, p.root);
  if (rooted && rootPos < 0) return internalError("root %d is not in the ring", p.root);
  // Hops from the root to this rank along the ring (rooted collectives only).
  const int rootDist = ((pos - rootPos) % n + n) % n;
  if (p.chunkElems == 0) return internalError("ring chunk of 0 elements");
  auto at = [&](int k) { return p.ring[static_cast<size_t>(((pos + k) % n + n) % n)]; };
  const int next = at(1);
  const int prev = at(-1);

  Program prog;
  prog.begin = p.begin;
  prog.end = p.end;
  prog.chunkElems = p.chunkElems;
  auto add = [&prog](StepOp op, int block, int sendPeer, int recvPeer) {
    prog.steps.push_back(Step{op, block, stepSends(op) ? sendPeer : -1, stepRecvs(op) ? recvPeer : -1});
  };

  if (n == 1) {
    // One rank: every collective is a copy (a reduction's post-op, e.g. avg's division by 1, still applies).
    prog.layout = Layout::kStrided;
    add(StepOp::kCopy, 0, -1, -1);
    return prog;
  }

  switch (p.kind) {
    case CollKind::kAllReduce: {
      // Reduce-scatter around the ring, then all-gather: 2(n-1) steps per tile, one block per step.
      prog.layout = Layout::kTiled;
      prog.nblocks = n;
      auto blk = [&](int k) { return ((pos + k) % n + n) % n; };
      add(StepOp::kSend, blk(0), next, prev);
      for (int s = 1; s <= n - 2; ++s) add(StepOp::kRecvReduceSend, blk(-s), next, prev);
      add(StepOp::kRecvReduceCopySend, blk(1), next, prev);
      for (int k = 1; k <= n - 2; ++k) add(StepOp::kRecvCopySend, blk(1 - k), next, prev);
      add(StepOp::kRecv, blk(2), next, prev);
      return prog;
    }
    case CollKind::kBroadcast: {
      // A chain from the root: root copies and sends, the others forward, the last one keeps.
      prog.layout = Layout::kStrided;
      if (rootDist == 0) {
        add(StepOp::kCopySend, 0, next, prev);
      } else if (rootDist == n - 1) {
        add(StepOp::kRecv, 0, next, prev);
      } else {
        add(StepOp::kRecvCopySend, 0, next, prev);
      }
      return prog;
    }
    case CollKind::kReduce: {
      // A chain ending at the root: the rank after the root starts, the root finishes.
      prog.layout = Layout::kStrided;
      if (rootDist == 1) {
        add(StepOp::kSend, 0, next, prev);
      } else if (rootDist == 0) {
        add(StepOp::kRecvReduceCopy, 0, next, prev);
      } else {
        add(StepOp::kRecvReduceSend, 0, next, prev);
      }
      return prog;
    }
    case CollKind::kAllGather: {
      // Output block r (at r * count) holds rank r's data; each rank's block travels n-1 hops.
      prog.layout = Layout::kStrided;
      prog.stride[0] = 0;
      prog.stride[1] = p.count;
      add(StepOp::kCopySend, p.rank, next, prev);
      for (int k = 1; k <= n - 2; ++k) add(StepOp::kRecvCopySend, at(-k), next, prev);
      add(StepOp::kRecv, at(1), next, prev);
      return prog;
    }
    case CollKind::kReduceScatter: {
      // Input block r (at r * count) is reduced along a chain that ends at rank r.
      prog.layout = Layout::kStrided;
      prog.stride[0] = p.count;
      prog.stride[1] = 0;
      add(StepOp::kSend, at(-1), next, prev);
      for (int s = 1; s <= n - 2; ++s) add(StepOp::kRecvReduceSend, at(-s - 1), next, prev);
      add(StepOp::kRecvReduceCopy, p.rank, next, prev);
      return prog;
    }
    case CollKind::kSend:
    case CollKind::kRecv:
    case CollKind::kAlltoAll:
      break;
  }
  return internalError("%s is not a ring collective", collKindName(p.kind));
}

Program buildP2pProgram(bool isSend, int peer, size_t begin, size_t end, size_t chunkElems) {
  Program prog;
  prog.layout = Layout::kStrided;
  prog.begin = begin;
  prog.end = end;
  prog.chunkElems = chunkElems;
  if (isSend) {
    prog.steps.push_back(Step{StepOp::kSend, 0, peer, -1});
  } else {
    prog.steps.push_back(Step{StepOp::kRecv, 0, -1, peer});
  }
  return prog;
}

}  // namespace braid
