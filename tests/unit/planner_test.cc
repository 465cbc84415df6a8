// The pure planner (src/core/planner.h): every rank plans the same group from its own shape, and the schedule
// checker proves the resulting programs implement each collective (all channels, both trees, LL and Simple chunk
// sizes). Also: scratch is a size in the plan (never allocated while planning), and the links cover every step.
#include "src/core/planner.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "algorithms/checker.h"

namespace braid {
namespace {

struct RankShape {
  CommSchedules sched;
  PlanShape shape;
};

// Returned by pointer: the shape points into the schedules.
std::unique_ptr<RankShape> shapeFor(int nranks, int rank, int nChannels) {
  auto p = std::make_unique<RankShape>();
  RankShape& r = *p;
  for (int c = 0; c < nChannels; ++c) {
    std::vector<int> ring;
    // Channel c's ring starts at a different rank, as the topology search's rings may.
    for (int i = 0; i < nranks; ++i) ring.push_back((i + c) % nranks);
    r.sched.rings.push_back(ring);
  }
  for (int i = 0; i < nranks; ++i) {
    r.sched.treeOrder.push_back(i);
    r.sched.treePos.push_back(i);
  }
  r.shape.rank = rank;
  r.shape.nranks = nranks;
  r.shape.nChannels = nChannels;
  r.shape.fifo.slotBytes = 1024;
  r.shape.fifo.llSlotBytes = 1024;
  r.shape.sched = &r.sched;
  return p;
}

struct PlanCase {
  CollKind kind;
  AlgoId algo;
  ProtoId proto;
};

TEST(Planner, PlansOfEveryRankPassTheChecker) {
  const PlanCase cases[] = {
      {CollKind::kAllReduce, AlgoId::kRing, ProtoId::kSimple}, {CollKind::kAllReduce, AlgoId::kRing, ProtoId::kLL},
      {CollKind::kAllReduce, AlgoId::kTree, ProtoId::kSimple}, {CollKind::kAllReduce, AlgoId::kTree, ProtoId::kLL},
      {CollKind::kBroadcast, AlgoId::kRing, ProtoId::kSimple}, {CollKind::kBroadcast, AlgoId::kTree, ProtoId::kLL},
      {CollKind::kReduce, AlgoId::kRing, ProtoId::kLL},        {CollKind::kReduce, AlgoId::kTree, ProtoId::kSimple},
      {CollKind::kAllGather, AlgoId::kRing, ProtoId::kSimple}, {CollKind::kReduceScatter, AlgoId::kRing, ProtoId::kLL},
  };
  for (const PlanCase& pc : cases) {
    for (int n : {1, 2, 3, 5, 8}) {
      for (size_t count : {size_t{1}, size_t{1000}, size_t{70001}}) {  // 70001 floats: two channels
        const int root = n > 2 ? 2 : 0;
        CheckSpec spec{pc.kind, n, root, count, {}, {}};
        for (int r = 0; r < n; ++r) {
          std::unique_ptr<RankShape> rs = shapeFor(n, r, 2);
          PendingOp op{pc.kind, nullptr, nullptr, count, DType::kFloat32, ReduceOp{}, root};
          Plan plan;
          ASSERT_TRUE(planOps(rs->shape, {PlanOp{&op, FifoChoice{pc.algo, pc.proto, 0}}}, &plan).isOk());
          std::vector<Program> progs;
          std::vector<int> chans;
          std::set<std::tuple<int, int, int>> sends, recvs;
          for (const Link& l : plan.sendLinks) sends.insert({l.channel, l.peer, l.lane});
          for (const Link& l : plan.recvLinks) recvs.insert({l.channel, l.peer, l.lane});
          for (const PlannedWork& w : plan.works) {
            EXPECT_EQ(w.proto, pc.proto);
            // LL stages one slot's payload (none for an empty range); Simple stages nothing.
            const bool empty = w.prog.end <= w.prog.begin;
            EXPECT_EQ(w.llStagingBytes > 0, pc.proto == ProtoId::kLL && !empty);
            // Only a tree reduce's interior ranks need an output of their own, sized for the whole unit.
            if (w.outputScratchBytes != 0) {
              EXPECT_TRUE(pc.kind == CollKind::kReduce && pc.algo == AlgoId::kTree && r != root);
              EXPECT_EQ(w.outputScratchBytes, count * sizeof(float));
            }
            for (const Step& st : w.prog.steps) {
              if (st.sendPeer >= 0) {
                EXPECT_EQ(sends.count({w.channel, st.sendPeer, w.prog.lane}), 1u);
              }
              if (st.recvPeer >= 0) {
                EXPECT_EQ(recvs.count({w.channel, st.recvPeer, w.prog.lane}), 1u);
              }
            }
            progs.push_back(w.prog);
            chans.push_back(w.channel);
          }
          spec.programs.push_back(progs);
          spec.channels.push_back(chans);
        }
        const Status st = checkSchedule(spec);
        ASSERT_TRUE(st.isOk()) << collKindName(pc.kind) << " " << algoName(pc.algo) << "/" << protoName(pc.proto)
                               << " n=" << n << " count=" << count << ": " << st.message();
      }
    }
  }
}

TEST(Planner, SendRecvPairsMeetOnOneChannel) {
  for (int n : {2, 3, 4}) {
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        std::unique_ptr<RankShape> sa = shapeFor(n, a, 3), sb = shapeFor(n, b, 3);
        PendingOp send{CollKind::kSend, nullptr, nullptr, 5000, DType::kInt32, ReduceOp{}, b};
        PendingOp recv{CollKind::kRecv, nullptr, nullptr, 5000, DType::kInt32, ReduceOp{}, a};
        Plan ps, pr;
        ASSERT_TRUE(planOps(sa->shape, {PlanOp{&send, FifoChoice{}}}, &ps).isOk());
        ASSERT_TRUE(planOps(sb->shape, {PlanOp{&recv, FifoChoice{}}}, &pr).isOk());
        ASSERT_EQ(ps.works.size(), 1u);
        ASSERT_EQ(pr.works.size(), 1u);
        EXPECT_EQ(ps.works[0].channel, pr.works[0].channel);
        ASSERT_EQ(ps.sendLinks.size(), 1u);
        ASSERT_EQ(pr.recvLinks.size(), 1u);
        EXPECT_EQ(ps.sendLinks[0].peer, b);
        EXPECT_EQ(pr.recvLinks[0].peer, a);
      }
    }
  }
}

}  // namespace
}  // namespace braid
