// Double binary tree: two complementary binary trees over the ranks, each carrying half of the data, as NCCL
// builds them. Tree 0 is a balanced in-order binary tree over ranks 0..n-1 (each subtree is a contiguous range of
// ranks and its root the middle one). Tree 1 is tree 0 shifted by one rank when n is even and mirrored
// (rank r in the place of n-1-r) when n is odd, so that most ranks that are interior nodes in one tree are leaves
// in the other and the up and down traffic per rank stays about one message size.
//
// An all-reduce over a tree reduces up to the root (each rank combines its children's partial results with its
// own input) and broadcasts the result back down, tile by tile.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/schedule.h"
#include "src/common/status.h"

namespace braid {

// Binary trees fill two children. A tree over hosts (NCCL's: a chain inside each host, a binary tree between
// hosts' first ranks) gives a host's first rank its chain child plus up to two children on other hosts.
constexpr int kMaxTreeChildren = 3;
struct TreeNode {
  int parent = -1;                                // -1 at the root
  int children[kMaxTreeChildren] = {-1, -1, -1};  // -1 where absent; filled from children[0] on
  int numChildren() const {
    int n = 0;
    while (n < kMaxTreeChildren && children[n] >= 0) ++n;
    return n;
  }
};

// Rank `rank`'s place in tree `which` (0 or 1) over n ranks.
TreeNode treeNode(int nranks, int rank, int which);
// The depth of tree `which` (1 for a single rank): the number of levels a value climbs.
int treeDepth(int nranks, int which);

struct TreeParams {
  int nranks;
  int rank;
  int which;          // 0 or 1
  size_t begin, end;  // this tree's element range (its half of a channel's range)
  size_t chunkElems;  // elements per FIFO slot
};

// The all-reduce of one rank for one tree, pipelined: a non-root rank gets two Programs, its reduce up and its
// broadcast down, which use different connectors and so progress independently (tile t + 1 climbs while tile t
// comes down, as NCCL's tree splits its threads). The root and a single rank get one. Tree `which` runs on lane
// `which`, so both trees of a channel progress together too.
Result<std::vector<Program>> buildTreeAllReducePrograms(const TreeParams& p);
// The same over an explicit tree: `node` is p.rank's place in it (its parent and children are ranks).
Result<std::vector<Program>> buildTreeAllReduceProgramsFor(const TreeNode& node, const TreeParams& p);

// Reduce (up only) and broadcast (down only) over one tree rotated so that `root` is its root: log2(n) hops
// instead of the ring chain's n - 1. A reduce's non-root ranks with two children keep their partial result in
// the output buffer, so the caller gives them scratch memory (NCCL ignores their receive buffer). p.which is
// ignored.
Result<Program> buildTreeRootedProgram(bool reduce, int root, const TreeParams& p);
// Whether rank `rank`'s reduce program writes its output buffer (true for the root and for ranks with two
// children, which accumulate there).
bool treeReduceWritesOutput(int nranks, int rank, int root);

}  // namespace braid
