// The pure schedule checker over every ring collective for n = 1..16, several counts, chunk sizes and channel
// counts; plus negative tests showing the checker catches broken schedules.
#include <gtest/gtest.h>

#include "algorithms/checker.h"
#include "algorithms/ring/ring.h"

namespace braid {
namespace {

Status checkRing(CollKind kind, int n, int root, size_t count, size_t chunk, int nch) {
  CheckSpec spec{kind, n, root, count, {}, {}};
  std::vector<int> ring(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ring[static_cast<size_t>(i)] = i;
  for (int r = 0; r < n; ++r) {
    std::vector<Program> progs;
    for (int c = 0; c < nch; ++c) {
      RingParams p{kind, ring, r, root, count, 0, 0, chunk};
      channelRange(count, nch, c, 1, &p.begin, &p.end);
      Result<Program> prog = buildRingProgram(p);
      if (!prog.isOk()) return prog.status();
      progs.push_back(prog.take());
    }
    spec.programs.push_back(std::move(progs));
  }
  return checkSchedule(spec);
}

TEST(RingSchedule, AllCollectivesAllSizes) {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllGather,
                            CollKind::kReduceScatter};
  for (CollKind kind : kinds) {
    for (int n = 1; n <= 16; ++n) {
      for (size_t count : {size_t{1}, size_t{7}, static_cast<size_t>(n * 3 + 1), size_t{100}}) {
        for (size_t chunk : {size_t{1}, size_t{3}, size_t{16}}) {
          for (int nch : {1, 2, 3}) {
            int root = (n + static_cast<int>(count)) % n;
            Status st = checkRing(kind, n, root, count, chunk, nch);
            ASSERT_TRUE(st.isOk()) << collKindName(kind) << " n=" << n << " count=" << count << " chunk=" << chunk
                                   << " nch=" << nch << ": " << st.message();
          }
        }
      }
    }
  }
}

TEST(RingSchedule, NonIdentityRingOrder) {
  // Rings need not follow rank order (the topology search will reorder them).
  for (int n = 2; n <= 9; ++n) {
    std::vector<int> ring;
    for (int i = n - 1; i >= 0; --i) ring.push_back(i);
    CheckSpec spec{CollKind::kAllReduce, n, 0, 50, {}, {}};
    for (int r = 0; r < n; ++r) {
      RingParams p{CollKind::kAllReduce, ring, r, 0, 50, 0, 50, 4};
      spec.programs.push_back({buildRingProgram(p).take()});
    }
    Status st = checkSchedule(spec);
    EXPECT_TRUE(st.isOk()) << st.message();
  }
}

TEST(RingSchedule, CheckerCatchesMistakes) {
  const int n = 4;
  std::vector<int> ring = {0, 1, 2, 3};
  auto build = [&](CollKind kind) {
    CheckSpec spec{kind, n, 0, 20, {}, {}};
    for (int r = 0; r < n; ++r) {
      RingParams p{kind, ring, r, 0, 20, 0, 20, 5};
      spec.programs.push_back({buildRingProgram(p).take()});
    }
    return spec;
  };
  // A reduction step turned into a plain forward loses a contribution.
  CheckSpec lost = build(CollKind::kAllReduce);
  lost.programs[1][0].steps[1].op = StepOp::kRecvSend;
  EXPECT_FALSE(checkSchedule(lost).isOk());
  // Reducing the local input twice counts a rank twice.
  CheckSpec twice = build(CollKind::kAllReduce);
  twice.programs[2][0].steps.back().op = StepOp::kRecvReduceCopy;
  EXPECT_FALSE(checkSchedule(twice).isOk());
  // A receive with no matching send deadlocks.
  CheckSpec dead = build(CollKind::kBroadcast);
  dead.programs[0][0].steps[0].op = StepOp::kCopy;
  dead.programs[0][0].steps[0].sendPeer = -1;
  Status st = checkSchedule(dead);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("deadlock"), std::string::npos) << st.message();
  // All-gather writing a block to the wrong place.
  CheckSpec wrong = build(CollKind::kAllGather);
  wrong.programs[3][0].steps.back().block = (wrong.programs[3][0].steps.back().block + 1) % n;
  EXPECT_FALSE(checkSchedule(wrong).isOk());
}

TEST(RingSchedule, ProgramsAreCompact) {
  // O(ranks) steps regardless of the byte count.
  RingParams p{CollKind::kAllReduce, {0, 1, 2, 3, 4, 5, 6, 7}, 3, 0, size_t{1} << 30, 0, size_t{1} << 30, 1 << 17};
  Program prog = buildRingProgram(p).take();
  EXPECT_EQ(prog.steps.size(), 2u * 8 - 1);
  EXPECT_EQ(prog.numTiles(), (size_t{1} << 30) / (8u << 17));
}

}  // namespace
}  // namespace braid
