// Trees over several hosts (NCCL's: a chain inside each host, binary trees between the hosts' first ranks), as
// the communicator builds them from the topology stage: their shape, and checker proofs of the all-reduce.
#include <gtest/gtest.h>

#include "algorithms/checker.h"
#include "algorithms/tree/tree.h"
#include "topology/topo_channels.h"

namespace braid {
namespace {

// Rank r on host r % nodes: hosts' ranks interleave, as with a round-robin launcher.
Result<CommChannels> hostChannels(int nodes, int perNode) {
  std::vector<HostGraphs> graphs(static_cast<size_t>(nodes));
  std::vector<RankPlacement> ranks(static_cast<size_t>(nodes * perNode));
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r].node = static_cast<int>(r) % nodes;
  return buildCommChannels(graphs, ranks);
}

TreeNode nodeOf(const TreeLinks& l) {
  TreeNode t;
  t.parent = l.parent;
  for (size_t i = 0; i < l.children.size() && i < kMaxTreeChildren; ++i) t.children[i] = l.children[i];
  return t;
}

TEST(HostTree, ChainsInsideHostsBinaryTreesAcross) {
  for (int nodes = 2; nodes <= 9; ++nodes) {
    for (int perNode = 1; perNode <= 4; ++perNode) {
      auto ch = hostChannels(nodes, perNode);
      ASSERT_TRUE(ch.isOk()) << ch.status().message();
      ASSERT_GE(ch.value().trees.size(), 2u);
      const int n = nodes * perNode;
      for (size_t w : {size_t{0}, ch.value().trees.size() / 2}) {
        const std::vector<TreeLinks>& t = ch.value().trees[w];
        int roots = 0, crossing = 0;
        for (int r = 0; r < n; ++r) {
          const TreeLinks& l = t[static_cast<size_t>(r)];
          EXPECT_LE(l.children.size(), static_cast<size_t>(kMaxTreeChildren));
          roots += l.parent < 0;
          if (l.parent >= 0) {
            const TreeLinks& p = t[static_cast<size_t>(l.parent)];
            EXPECT_NE(std::find(p.children.begin(), p.children.end(), r), p.children.end()) << "parent names child";
            crossing += (l.parent % nodes) != (r % nodes);
          }
        }
        EXPECT_EQ(roots, 1) << nodes << "x" << perNode;
        // One network edge per host besides the root's: the tree crosses the network as little as it can.
        EXPECT_EQ(crossing, nodes - 1) << nodes << "x" << perNode;
      }
    }
  }
}

// The communicator's plan: each channel's range halved between the two trees, each rank's up and down programs
// concurrent, tree 1 on lane 1.
CheckSpec allReduceSpec(const CommChannels& ch, int n, size_t count, size_t chunk) {
  CheckSpec spec{CollKind::kAllReduce, n, 0, count, {}, {}};
  const size_t mid = count / 2;
  for (int r = 0; r < n; ++r) {
    std::vector<Program> progs;
    for (int which = 0; which < 2; ++which) {
      const std::vector<TreeLinks>& t = ch.trees[which == 0 ? 0 : ch.trees.size() / 2];
      TreeParams tp{n, r, which, which == 0 ? 0 : mid, which == 0 ? mid : count, chunk};
      auto p = buildTreeAllReduceProgramsFor(nodeOf(t[static_cast<size_t>(r)]), tp);
      EXPECT_TRUE(p.isOk()) << p.status().message();
      if (p.isOk()) {
        for (Program& prog : p.value()) progs.push_back(prog);
      }
    }
    spec.channels.push_back(std::vector<int>(progs.size(), 0));
    spec.programs.push_back(std::move(progs));
  }
  return spec;
}

TEST(HostTree, AllReduceProves) {
  for (int nodes = 2; nodes <= 9; ++nodes) {
    for (int perNode = 1; perNode <= 4; ++perNode) {
      auto ch = hostChannels(nodes, perNode);
      ASSERT_TRUE(ch.isOk());
      for (size_t count : {size_t{1}, size_t{7}, size_t{100}}) {
        for (size_t chunk : {size_t{1}, size_t{16}}) {
          Status st = checkSchedule(allReduceSpec(ch.value(), nodes * perNode, count, chunk));
          EXPECT_TRUE(st.isOk()) << nodes << "x" << perNode << " count " << count << " chunk " << chunk << ": "
                                 << st.message();
        }
      }
    }
  }
}

TEST(HostTree, CheckerCatchesAThirdChildApplyingThePostOpEarly) {
  auto ch = hostChannels(4, 2);  // host leaders with a chain child and two hosts below: three children
  ASSERT_TRUE(ch.isOk());
  CheckSpec spec = allReduceSpec(ch.value(), 8, 40, 8);
  int broken = 0;
  for (auto& progs : spec.programs) {
    for (Program& p : progs) {
      for (Step& s : p.steps) {
        if (s.op == StepOp::kRecvAccumulate) {
          s.op = StepOp::kRecvReducePartial;  // re-adds the rank's own input
          ++broken;
        }
      }
    }
  }
  ASSERT_GT(broken, 0) << "no rank had three children";
  EXPECT_FALSE(checkSchedule(spec).isOk());
}

}  // namespace
}  // namespace braid
