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

namespace {

// One tile-sized block per step: both trees' programs share this frame.
Result<Program> treeProgram(const TreeParams& p) {
  if (p.chunkElems == 0 || p.end < p.begin) return internalError("tree: bad range or chunk");
  Program prog;
  prog.layout = Layout::kTiled;
  prog.begin = p.begin;
  prog.end = p.end;
  prog.chunkElems = p.chunkElems;
  prog.nblocks = 1;
  return prog;
}

void addStep(Program& prog, StepOp op, int sendPeer, int recvPeer) {
  prog.steps.push_back(Step{op, 0, sendPeer, recvPeer});
}

// A non-root rank's way up: its children's partial results combined with its own input, sent to the parent.
// With several children the first combination lands in the output (a partial result), the others accumulate there
// and the last one goes up.
void appendUp(Program& prog, const TreeNode& t) {
  const int n = t.numChildren();
  if (n == 0) {
    addStep(prog, StepOp::kSend, t.parent, -1);
  } else if (n == 1) {
    addStep(prog, StepOp::kRecvReduceSend, t.parent, t.children[0]);
  } else {
    addStep(prog, StepOp::kRecvReducePartial, -1, t.children[0]);
    for (int i = 1; i + 1 < n; ++i) addStep(prog, StepOp::kRecvAccumulate, -1, t.children[i]);
    addStep(prog, StepOp::kRecvAccumulateSend, t.parent, t.children[n - 1]);
  }
}

// A non-root rank's way down: the result comes from the parent, is kept, and passed on to the children.
void appendDown(Program& prog, const TreeNode& t) {
  const int n = t.numChildren();
  if (n == 0) {
    addStep(prog, StepOp::kRecv, -1, t.parent);
    return;
  }
  addStep(prog, StepOp::kRecvCopySend, t.children[0], t.parent);
  for (int i = 1; i < n; ++i) addStep(prog, StepOp::kSendFromOutput, t.children[i], -1);
}

// The root's all-reduce: the last combination is final and starts its way down at once.
void appendRoot(Program& prog, const TreeNode& t) {
  const int n = t.numChildren();
  if (n == 1) {
    addStep(prog, StepOp::kRecvReduceCopySend, t.children[0], t.children[0]);
    return;
  }
  addStep(prog, StepOp::kRecvReducePartial, -1, t.children[0]);
  for (int i = 1; i + 1 < n; ++i) addStep(prog, StepOp::kRecvAccumulate, -1, t.children[i]);
  addStep(prog, StepOp::kRecvAccumulateCopySend, t.children[n - 1], t.children[n - 1]);
  for (int i = 0; i + 1 < n; ++i) addStep(prog, StepOp::kSendFromOutput, t.children[i], -1);
}

}  // namespace

Result<std::vector<Program>> buildTreeAllReducePrograms(const TreeParams& p) {
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks || (p.which != 0 && p.which != 1)) {
    return internalError("tree: bad parameters (n=%d rank=%d tree=%d)", p.nranks, p.rank, p.which);
  }
  return buildTreeAllReduceProgramsFor(treeNode(p.nranks, p.rank, p.which), p);
}

Result<std::vector<Program>> buildTreeAllReduceProgramsFor(const TreeNode& t, const TreeParams& p) {
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks || (p.which != 0 && p.which != 1)) {
    return internalError("tree: bad parameters (n=%d rank=%d tree=%d)", p.nranks, p.rank, p.which);
  }
  if (p.nranks > 1 && t.parent < 0 && t.numChildren() == 0) {
    return internalError("tree: rank %d of %d is neither a child nor a parent", p.rank, p.nranks);
  }
  BRAID_ASSIGN_OR_RETURN(Program prog, treeProgram(p));
  prog.lane = p.which;
  std::vector<Program> progs;
  if (p.nranks == 1) {
    addStep(prog, StepOp::kCopy, -1, -1);
  } else if (t.parent >= 0) {
    Program down = prog;
    appendUp(prog, t);
    appendDown(down, t);
    progs.push_back(std::move(prog));
    progs.push_back(std::move(down));
    return progs;
  } else {
    appendRoot(prog, t);
  }
  progs.push_back(std::move(prog));
  return progs;
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
  BRAID_ASSIGN_OR_RETURN(Program prog, treeProgram(p));
  const TreeNode t = rootedNode(p.nranks, p.rank, root);
  const int c0 = t.children[0], c1 = t.children[1];
  if (p.nranks == 1) {
    addStep(prog, StepOp::kCopy, -1, -1);
  } else if (reduce && t.parent >= 0) {
    appendUp(prog, t);
  } else if (reduce) {
    // The root's last combination is final.
    if (c1 < 0) {
      addStep(prog, StepOp::kRecvReduceCopy, -1, c0);
    } else {
      addStep(prog, StepOp::kRecvReducePartial, -1, c0);
      addStep(prog, StepOp::kRecvAccumulateCopy, -1, c1);
    }
  } else if (t.parent >= 0) {
    appendDown(prog, t);
  } else {
    // Broadcast: the root's input enters the tree.
    addStep(prog, StepOp::kCopySend, c0, -1);
    if (c1 >= 0) addStep(prog, StepOp::kSendFromOutput, c1, -1);
  }
  return prog;
}

}  // namespace braid
