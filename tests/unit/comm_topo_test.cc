// The communicator's topology stage, in pieces: NUMA placement of host-memory ranks, rings per channel, and the
// placement system calls.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "src/common/numa.h"
#include "src/core/comm_topo.h"

namespace braid {
namespace {

TEST(CommTopo, NumaNodeFollowsTheProcessMaskOrSpreadsLocalRanks) {
  const std::vector<std::vector<int>> sockets = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  // A process bound inside one node (numactl, mpirun --bind-to socket) stays there, whatever its local rank.
  EXPECT_EQ(pickNumaNode(sockets, {5, 6}, 0, 4), 1);
  EXPECT_EQ(pickNumaNode(sockets, {1}, 3, 4), 0);
  // An unbound process: local ranks in blocks, so consecutive ranks (and ring neighbours) share a node.
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<int> got;
  for (int r = 0; r < 4; ++r) got.push_back(pickNumaNode(sockets, all, r, 4));
  EXPECT_EQ(got, (std::vector<int>{0, 0, 1, 1}));
  got.clear();
  for (int r = 0; r < 3; ++r) got.push_back(pickNumaNode(sockets, all, r, 3));
  EXPECT_EQ(got, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(pickNumaNode(sockets, all, 0, 1), 0);
  EXPECT_EQ(pickNumaNode({}, all, 0, 1), -1);
  // A mask the topology does not describe (a replayed file) is treated as unbound.
  EXPECT_EQ(pickNumaNode(sockets, {8, 9}, 1, 2), 1);
}

TEST(CommTopo, RingsRepeatOverChannelsAndMustBePermutations) {
  CommChannels search;
  search.nChannels = 2;
  search.rings = {{0, 2, 1, 3}, {2, 0, 3, 1}};
  auto rings = ringsForChannels(search, 3, 4);
  ASSERT_TRUE(rings.isOk()) << rings.status().message();
  ASSERT_EQ(rings.value().size(), 3u);
  EXPECT_EQ(rings.value()[2], search.rings[0]);
  EXPECT_EQ(rings.value()[1], search.rings[1]);

  search.rings[1] = {2, 0, 0, 1};
  auto bad = ringsForChannels(search, 1, 4);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("ring 1"), std::string::npos) << bad.status().message();
  search.rings = {{0, 1, 2}};
  EXPECT_FALSE(ringsForChannels(search, 1, 4).isOk());
  search.rings.clear();
  EXPECT_FALSE(ringsForChannels(search, 1, 4).isOk());
}

TEST(CommTopo, PlacementCallsWorkOrNameTheProblem) {
  EXPECT_TRUE(bindThisThread({}).isOk());
  EXPECT_TRUE(bindThisThread({0}).isOk());  // every machine has CPU 0
  Status bad = bindThisThread({-1});
  EXPECT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("CPU -1"), std::string::npos) << bad.message();

  const size_t bytes = 1 << 16;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_TRUE(preferNumaNode(p, bytes, -1).isOk());
  // Node 0 exists wherever this runs (a kernel without NUMA support refuses mbind: ENOSYS, named).
  Status st = preferNumaNode(p, bytes, 0);
  EXPECT_TRUE(st.isOk() || st.message().find("mbind") != std::string::npos) << st.message();
  Status far = preferNumaNode(p, bytes, 1000);
  EXPECT_FALSE(far.isOk());
  EXPECT_NE(far.message().find("NUMA node 1000"), std::string::npos) << far.message();
  Status out = preferNumaNode(p, bytes, 5000);
  EXPECT_FALSE(out.isOk());
  EXPECT_NE(out.message().find("5000"), std::string::npos) << out.message();
  munmap(p, bytes);
}

}  // namespace
}  // namespace braid
