// The NVLS-style (direct) schedules, proven symbolically up to 64 ranks.
#include "algorithms/direct/direct.h"

#include <gtest/gtest.h>

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
