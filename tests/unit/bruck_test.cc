// The log-step (Bruck) all-to-all: schedule-checker proofs up to 64 ranks and the checker catching broken ones.
#include <gtest/gtest.h>

#include "algorithms/alltoall/bruck.h"
#include "algorithms/checker.h"

namespace braid {
namespace {

CheckSpec bruckSpec(int n, size_t count, size_t chunk, int nch) {
  CheckSpec spec{CollKind::kAlltoAll, n, 0, count, {}, {}};
  for (int r = 0; r < n; ++r) {
    std::vector<Program> progs;
    for (int c = 0; c < nch; ++c) {
      BruckParams p{n, r, count, 0, 0, chunk};
      channelRange(count, nch, c, 1, &p.begin, &p.end);
      Result<Program> prog = buildBruckProgram(p);
      EXPECT_TRUE(prog.isOk()) << prog.status().message();
      progs.push_back(prog.take());
    }
    spec.programs.push_back(std::move(progs));
  }
  return spec;
}

TEST(BruckSchedule, ProvesUpTo64Ranks) {
  for (int n = 1; n <= 64; ++n) {
    for (size_t count : {size_t{1}, size_t{5}}) {
      for (size_t chunk : {size_t{1}, size_t{2}, size_t{8}}) {
        for (int nch : {1, 2}) {
          Status st = checkSchedule(bruckSpec(n, count, chunk, nch));
          ASSERT_TRUE(st.isOk()) << "n=" << n << " count=" << count << " chunk=" << chunk << " nch=" << nch << ": "
                                 << st.message();
        }
      }
    }
  }
}

TEST(BruckSchedule, RoundsAndPacks) {
  EXPECT_EQ(bruckRounds(1), 0);
  EXPECT_EQ(bruckRounds(2), 1);
  EXPECT_EQ(bruckRounds(5), 3);
  EXPECT_EQ(bruckRounds(64), 6);
  EXPECT_EQ(bruckMaxPack(2), 1);
  EXPECT_EQ(bruckMaxPack(8), 4);  // j in 1..7 with a given bit set
  EXPECT_EQ(bruckMaxPack(5), 2);  // bits 0 and 1: {1,3}, {2,3}; bit 2: {4}
  // One copy plus a send and a receive per round: O(log n) steps, whatever the size.
  Program p = buildBruckProgram(BruckParams{64, 17, 1 << 20, 0, 1 << 20, 4096}).take();
  EXPECT_EQ(p.steps.size(), 1u + 2u * 6);
}

TEST(BruckSchedule, CheckerCatchesMistakes) {
  // A block sent from the input after it has already moved (the stale copy) lands wrong.
  CheckSpec stale = bruckSpec(8, 3, 2, 1);
  for (Program& prog : stale.programs[5]) {
    for (auto& pack : prog.packs) {
      for (PackEntry& e : pack) {
        if (e.buf == 1 && &pack != &prog.packs[1]) e.buf = 0;
      }
    }
  }
  EXPECT_FALSE(checkSchedule(stale).isOk());
  // Receiving into the wrong output block.
  CheckSpec wrong = bruckSpec(6, 2, 2, 1);
  std::swap(wrong.programs[2][0].packs[1][0], wrong.programs[2][0].packs[3][0]);
  EXPECT_FALSE(checkSchedule(wrong).isOk());
  // A pack that is one block short leaves part of the slot unread.
  CheckSpec shortPack = bruckSpec(4, 2, 2, 1);
  shortPack.programs[1][0].packs[3].pop_back();
  Status st = checkSchedule(shortPack);
  EXPECT_FALSE(st.isOk());
  // Skipping the own-block copy leaves it unwritten.
  CheckSpec noCopy = bruckSpec(3, 2, 2, 1);
  noCopy.programs[0][0].steps.erase(noCopy.programs[0][0].steps.begin());
  EXPECT_FALSE(checkSchedule(noCopy).isOk());
}

}  // namespace
}  // namespace braid
