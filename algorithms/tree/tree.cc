#include "algorithms/tree/tree.h"

#include <algorithm>

namespace braid {
namespace {

// Positions: tree 0 uses the ranks themselves; tree 1 a shifted or mirrored numbering of them.
int toRank(int nranks, int which, int pos) {
  if (which == 0) return pos;
  return nranks % 2 == 0 ? (pos + 1) % nranks : nranks - 1 - pos;
}

int toPos(int nranks, int which, int rank) {
  if (which == 0) return rank;
  return nranks % 2 == 0 ? (rank + nranks - 1) % nranks : nranks - 1 - rank;
}

// In-order balanced tree over positions [lo, hi): the root is the middle position. Walks down from the whole
// range to `pos`, which takes O(log n).
void locate(int lo, int hi, int pos, int* parent, int* left, int* right) {
  *parent = -1;
  while (true) {
    const int mid = lo + (hi - lo) / 2;
    if (pos == mid) {
      *left = lo < mid ? lo + (mid - lo) / 2 : -1;
      *right = mid + 1 < hi ? mid + 1 + (hi - mid - 1) / 2 : -1;
      return;
    }
    *parent = mid;
    if (pos < mid) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
}

int depthOf(int lo, int hi) {
  if (hi <= lo) return 0;
  const int mid = lo + (hi - lo) / 2;
  return 1 + std::max(depthOf(lo, mid), depthOf(mid + 1, hi));
}

}  // namespace

TreeNode treeNode(int nranks, int rank, int which) {
  TreeNode t;
  int parent = -1, left = -1, right = -1;
  locate(0, nranks, toPos(nranks, which, rank), &parent, &left, &right);
  t.parent = parent < 0 ? -1 : toRank(nranks, which, parent);
  int k = 0;
  for (int c : {left, right}) {
    if (c >= 0) t.children[k++] = toRank(nranks, which, c);
  }
  return t;
}

int treeDepth(int nranks, int /*which*/) {
  return depthOf(0, nranks);
}

Result<Program> buildTreeAllReduceProgram(const TreeParams& p) {
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks || (p.which != 0 && p.which != 1)) {
    return internalError("tree: bad parameters (n=%d rank=%d tree=%d)", p.nranks, p.rank, p.which);
  }
  if (p.chunkElems == 0 || p.end < p.begin) return internalError("tree: bad range or chunk");
  Program prog;
  prog.layout = Layout::kTiled;
  prog.begin = p.begin;
  prog.end = p.end;
  prog.chunkElems = p.chunkElems;
  prog.nblocks = 1;
  auto step = [&](StepOp op, int sendPeer, int recvPeer) { prog.steps.push_back(Step{op, 0, sendPeer, recvPeer}); };
  const TreeNode t = treeNode(p.nranks, p.rank, p.which);
  const int c0 = t.children[0], c1 = t.children[1];
  if (p.nranks == 1) {
    step(StepOp::kCopy, -1, -1);
    return prog;
  }
  // Up: combine the children's partial results with this rank's input, towards the root.
  if (t.parent >= 0) {
    if (c0 < 0) {
      step(StepOp::kSend, t.parent, -1);
    } else if (c1 < 0) {
      step(StepOp::kRecvReduceSend, t.parent, c0);
    } else {
      step(StepOp::kRecvReducePartial, -1, c0);
      step(StepOp::kRecvAccumulateSend, t.parent, c1);
    }
    // Down: the final result comes from the parent; pass it on to the children.
    if (c0 < 0) {
      step(StepOp::kRecv, -1, t.parent);
    } else {
      step(StepOp::kRecvCopySend, c0, t.parent);
      if (c1 >= 0) step(StepOp::kSendFromOutput, c1, -1);
    }
    return prog;
  }
  // The root: the last combination is final; the result starts its way down at once.
  if (c1 < 0) {
    step(StepOp::kRecvReduceCopySend, c0, c0);
  } else {
    step(StepOp::kRecvReducePartial, -1, c0);
    step(StepOp::kRecvAccumulateCopySend, c1, c1);
    step(StepOp::kSendFromOutput, c0, -1);
  }
  return prog;
}

namespace {

// Tree 0 over "virtual" ranks, rotated so that `root` takes the tree root's place (the middle position).
TreeNode rootedNode(int nranks, int rank, int root) {
  const int top = nranks / 2;
  const int v = ((rank - root + top) % nranks + nranks) % nranks;
  TreeNode t = treeNode(nranks, v, 0);
  auto real = [&](int x) { return x < 0 ? -1 : ((x - top + root) % nranks + nranks) % nranks; };
  t.parent = real(t.parent);
  t.children[0] = real(t.children[0]);
  t.children[1] = real(t.children[1]);
  return t;
}

}  // namespace

bool treeReduceWritesOutput(int nranks, int rank, int root) {
  return rank == root || rootedNode(nranks, rank, root).children[1] >= 0;
}

Result<Program> buildTreeRootedProgram(bool reduce, int root, const TreeParams& p) {
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks || root < 0 || root >= p.nranks) {
    return internalError("tree: bad parameters (n=%d rank=%d root=%d)", p.nranks, p.rank, root);
  }
  if (p.chunkElems == 0 || p.end < p.begin) return internalError("tree: bad range or chunk");
  Program prog;
  prog.layout = Layout::kTiled;
  prog.begin = p.begin;
  prog.end = p.end;
  prog.chunkElems = p.chunkElems;
  prog.nblocks = 1;
  auto step = [&](StepOp op, int sendPeer, int recvPeer) { prog.steps.push_back(Step{op, 0, sendPeer, recvPeer}); };
  const TreeNode t = rootedNode(p.nranks, p.rank, root);
  const int c0 = t.children[0], c1 = t.children[1];
  if (p.nranks == 1) {
    step(StepOp::kCopy, -1, -1);
    return prog;
  }
  if (reduce) {
    if (t.parent >= 0) {
      if (c0 < 0) {
        step(StepOp::kSend, t.parent, -1);
      } else if (c1 < 0) {
        step(StepOp::kRecvReduceSend, t.parent, c0);
      } else {
        step(StepOp::kRecvReducePartial, -1, c0);
        step(StepOp::kRecvAccumulateSend, t.parent, c1);
      }
    } else if (c1 < 0) {
      step(StepOp::kRecvReduceCopy, -1, c0);
    } else {
      step(StepOp::kRecvReducePartial, -1, c0);
      step(StepOp::kRecvAccumulateCopy, -1, c1);
    }
    return prog;
  }
  // Broadcast: the root's input enters; every other rank keeps what its parent sends and passes it on.
  if (t.parent < 0) {
    step(StepOp::kCopySend, c0, -1);
  } else if (c0 < 0) {
    step(StepOp::kRecv, -1, t.parent);
  } else {
    step(StepOp::kRecvCopySend, c0, t.parent);
  }
  if (c1 >= 0) step(StepOp::kSendFromOutput, c1, -1);
  return prog;
}

}  // namespace braid
