// The NVLS-style (direct) schedules, proven symbolically up to 64 ranks.
#include "algorithms/direct/direct.h"

#include <gtest/gtest.h>

#include "algorithms/checker.h"
#include "algorithms/tree/tree.h"
#include "src/backends/common/direct_kernel.h"

namespace braid {
namespace {

TEST(DirectSchedule, EveryCollectiveUpTo64Ranks) {
  const DirectCollective colls[] = {DirectCollective::kAllReduceOneShot, DirectCollective::kAllReduceTwoShot,
                                    DirectCollective::kReduceScatter, DirectCollective::kAllGather};
  for (DirectCollective c : colls) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64}) {
      for (size_t count :
           {size_t{0}, size_t{1}, size_t{7}, static_cast<size_t>(n) - 1, static_cast<size_t>(3 * n + 1)}) {
        Status st = checkDirectSchedule(c, n, count);
        EXPECT_TRUE(st.isOk()) << st.message();
      }
    }
  }
}

TEST(DirectSchedule, TwoShotSlicesCoverTheVectorOnce) {
  // 10 elements over 4 ranks: slices of 3, 3, 2, 2.
  size_t covered = 0;
  for (int r = 0; r < 4; ++r) {
    auto steps = buildDirectProgram(DirectCollective::kAllReduceTwoShot, 4, r, 10);
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(steps[0].srcOffset, covered);
    EXPECT_EQ(steps[0].count, r < 2 ? 3u : 2u);
    EXPECT_EQ(steps[0].dstRank, -1);
    covered += steps[0].count;
  }
  EXPECT_EQ(covered, 10u);
}

// The CUDA direct kernel's rounds: every rank's piece of a reduce-scatter round, and every lane's share, starts
// 16-byte aligned whatever the rank count (the switch loads 4- and 8-byte words: with 5 ranks, 32768 / 5 halves
// per piece once left odd ranks' pieces 2 bytes off, and a GPU faults there).
TEST(DirectKernel, PiecesAndSharesAreWholeSixteenByteUnits) {
  for (DType t : {DType::kFloat16, DType::kBfloat16, DType::kFloat32, DType::kFloat64, DType::kInt8}) {
    for (uint32_t n = 2; n <= 9; ++n) {
      for (DirectCollective c : {DirectCollective::kReduceScatter, DirectCollective::kAllReduceOneShot}) {
        for (size_t count : {size_t{1} << 30, size_t{100003}, size_t{7}}) {
          DirectKernelWork w;
          w.nranks = n;
          w.layout.nlanes = 4;
          w.layout.nranks = n;
          w.layout.laneBytes = 64 << 10;
          DirectOpDesc op;
          op.coll = c;
          op.count = count;
          op.stageOp.dtype = t;
          op.lanes = 3;
          const size_t per = directLaneElems(op, w);
          const size_t es = dtypeSize(t);
          EXPECT_EQ(per * es % 16, 0u) << dtypeName(t) << " n=" << n << " count=" << count;
          const size_t pieces = c == DirectCollective::kReduceScatter ? n : 1;
          EXPECT_LE(per * es * pieces, w.layout.laneBytes) << dtypeName(t) << " n=" << n;
        }
      }
    }
  }
}

TEST(DirectSchedule, CheckerCatchesMistakes) {
  const int n = 4;
  const size_t count = 10;
  auto build = [&](DirectCollective c) {
    std::vector<std::vector<DirectStep>> p;
    for (int r = 0; r < n; ++r) p.push_back(buildDirectProgram(c, n, r, count));
    return p;
  };
  auto twoShot = build(DirectCollective::kAllReduceTwoShot);
  ASSERT_TRUE(checkDirectPrograms(DirectCollective::kAllReduceTwoShot, n, count, twoShot).isOk());
  auto dropped = twoShot;
  dropped[2].clear();  // slice 2 never reduced
  EXPECT_FALSE(checkDirectPrograms(DirectCollective::kAllReduceTwoShot, n, count, dropped).isOk());
  auto overlap = twoShot;
  overlap[1][0].count += 1;  // slice 1 runs into slice 2: written twice
  EXPECT_FALSE(checkDirectPrograms(DirectCollective::kAllReduceTwoShot, n, count, overlap).isOk());
  auto gather = build(DirectCollective::kAllGather);
  gather[3][0].dstOffset = 0;  // rank 3's block lands on rank 0's
  EXPECT_FALSE(checkDirectPrograms(DirectCollective::kAllGather, n, count, gather).isOk());
  auto scatter = build(DirectCollective::kReduceScatter);
  scatter[1][0].srcOffset = 0;  // rank 1 reduces block 0
  EXPECT_FALSE(checkDirectPrograms(DirectCollective::kReduceScatter, n, count, scatter).isOk());
}

}  // namespace
}  // namespace braid

namespace braid {
namespace {

// Every rank appears once in each tree, parents and children agree, and the depth is logarithmic.
TEST(Tree, ShapesAreConsistentUpTo64Ranks) {
  for (int n = 1; n <= 64; ++n) {
    for (int which = 0; which < 2; ++which) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const TreeNode t = treeNode(n, r, which);
        if (t.parent < 0) ++roots;
        for (int c : t.children) {
          if (c < 0) continue;
          EXPECT_EQ(treeNode(n, c, which).parent, r) << "n=" << n << " tree " << which;
        }
        if (t.parent >= 0) {
          const TreeNode p = treeNode(n, t.parent, which);
          EXPECT_TRUE(p.children[0] == r || p.children[1] == r) << "n=" << n << " rank " << r;
        }
      }
      EXPECT_EQ(roots, 1) << "n=" << n;
      int depth = 0;
      while ((1 << depth) < n + 1) ++depth;
      EXPECT_EQ(treeDepth(n, which), depth) << "n=" << n;
    }
    if (n % 2 == 0 && n > 2) {
      // Complementary: no rank has two children in both trees.
      for (int r = 0; r < n; ++r) {
        const bool full0 = treeNode(n, r, 0).children[1] >= 0;
        const bool full1 = treeNode(n, r, 1).children[1] >= 0;
        EXPECT_FALSE(full0 && full1) << "n=" << n << " rank " << r;
      }
    }
  }
}

// The checker proves the double-tree all-reduce for n = 1..64, several counts and chunk sizes: every output
// element holds every rank's contribution exactly once, post-op applied once, no deadlock with bounded FIFOs.
TEST(Tree, AllReduceSchedulesProveUpTo64Ranks) {
  for (int n = 1; n <= 64; n = n < 12 ? n + 1 : n + 13) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{64}, size_t{333}}) {
      for (size_t chunk : {size_t{1}, size_t{7}, size_t{64}}) {
        // As the planner queues them: both trees, each split into its up and down programs, on one channel, so
        // they all progress at once (tree 1 on lane 1).
        CheckSpec spec{CollKind::kAllReduce, n, 0, count, {}, {}};
        const size_t mid = count / 2;
        for (int r = 0; r < n; ++r) {
          std::vector<Program> progs;
          for (int which = 0; which < 2; ++which) {
            TreeParams tp{n, r, which, which == 0 ? 0 : mid, which == 0 ? mid : count, chunk};
            Result<std::vector<Program>> p = buildTreeAllReducePrograms(tp);
            ASSERT_TRUE(p.isOk()) << p.status().message();
            for (Program& prog : p.value()) progs.push_back(prog);
          }
          spec.channels.push_back(std::vector<int>(progs.size(), 0));
          spec.programs.push_back(std::move(progs));
        }
        Status st = checkSchedule(spec);
        EXPECT_TRUE(st.isOk()) << "n=" << n << " count=" << count << " chunk=" << chunk << ": " << st.message();
      }
    }
  }
}

TEST(Tree, CheckerCatchesABrokenTree) {
  const int n = 6;
  CheckSpec spec{CollKind::kAllReduce, n, 0, 40, {}, {}};
  for (int r = 0; r < n; ++r) {
    Result<std::vector<Program>> p = buildTreeAllReducePrograms(TreeParams{n, r, 0, 0, 40, 8});
    ASSERT_TRUE(p.isOk());
    std::vector<Program> progs = p.take();
    // A rank with two children forgets the first one's partial result.
    if (treeNode(n, r, 0).children[1] >= 0 && treeNode(n, r, 0).parent >= 0) {
      for (Step& s : progs[0].steps) {
        if (s.op == StepOp::kRecvAccumulateSend) s.op = StepOp::kRecvReduceSend;
      }
    }
    spec.channels.push_back(std::vector<int>(progs.size(), 0));
    spec.programs.push_back(progs);
  }
  EXPECT_FALSE(checkSchedule(spec).isOk());
}

TEST(Tree, UpAndDownArePipelined) {
  // A non-root rank's climb and descent are separate programs on separate connectors: with 64 tiles (8 times the
  // FIFO depth) the checker's concurrent run finishes; the old single program per tree would still be correct,
  // but here the leaf's up program runs ahead of its down program, which only a split allows.
  const int n = 7;
  for (int r = 0; r < n; ++r) {
    const TreeNode t = treeNode(n, r, 0);
    Result<std::vector<Program>> p = buildTreeAllReducePrograms(TreeParams{n, r, 0, 0, 64, 1});
    ASSERT_TRUE(p.isOk());
    const std::vector<Program>& progs = p.value();
    ASSERT_EQ(progs.size(), t.parent >= 0 ? 2u : 1u) << "rank " << r;
    if (t.parent < 0) continue;
    for (const Step& s : progs[0].steps) {
      EXPECT_TRUE(s.recvPeer < 0 || s.recvPeer == t.children[0] || s.recvPeer == t.children[1]);
      EXPECT_TRUE(s.sendPeer < 0 || s.sendPeer == t.parent);
    }
    for (const Step& s : progs[1].steps) {
      EXPECT_TRUE(s.recvPeer < 0 || s.recvPeer == t.parent);
      EXPECT_NE(s.sendPeer, t.parent);
    }
  }
  // Tree 1 is on lane 1.
  EXPECT_EQ(buildTreeAllReducePrograms(TreeParams{n, 0, 1, 0, 8, 1}).value()[0].lane, 1);
}

}  // namespace
}  // namespace braid

namespace braid {
namespace {

// Reduce and broadcast over a tree rooted at any rank: proven for n = 1..64 and every root (a sample of roots
// above 16 ranks), several counts and chunk sizes.
TEST(Tree, RootedReduceAndBroadcastProveUpTo64Ranks) {
  for (int n = 1; n <= 64; n = n < 17 ? n + 1 : n + 11) {
    for (int root = 0; root < n; root += n <= 16 ? 1 : 7) {
      for (bool reduce : {true, false}) {
        for (size_t count : {size_t{1}, size_t{40}}) {
          CheckSpec spec{reduce ? CollKind::kReduce : CollKind::kBroadcast, n, root, count, {}, {}};
          for (int r = 0; r < n; ++r) {
            Result<Program> p = buildTreeRootedProgram(reduce, root, TreeParams{n, r, 0, 0, count, 3});
            ASSERT_TRUE(p.isOk()) << p.status().message();
            spec.programs.push_back({p.take()});
          }
          Status st = checkSchedule(spec);
          EXPECT_TRUE(st.isOk()) << (reduce ? "reduce" : "broadcast") << " n=" << n << " root=" << root << ": "
                                 << st.message();
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid
