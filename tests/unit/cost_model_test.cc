// The selector's cost model and BRAID_TUNING_FILE.
#include "algorithms/selector/cost_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace braid {
namespace {

std::string writeTemp(const std::string& text) {
  char path[] = "/tmp/braid-tuning-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(CostModel, BuiltInPrefersTheTreeForSmallAndTheRingForLarge) {
  CostModel m;
  const auto ar = FilterColl::kAllReduce;
  EXPECT_LT(m.predictUs(ar, AlgoId::kTree, ProtoId::kSimple, 8, 2, 8),
            m.predictUs(ar, AlgoId::kRing, ProtoId::kSimple, 8, 2, 8));
  EXPECT_LT(m.predictUs(ar, AlgoId::kRing, ProtoId::kSimple, 8, 2, 64 << 20),
            m.predictUs(ar, AlgoId::kTree, ProtoId::kSimple, 8, 2, 64 << 20));
  EXPECT_LT(m.predictUs(ar, AlgoId::kNvls, ProtoId::kSimple, 2, 2, 1 << 20),
            m.predictUs(ar, AlgoId::kRing, ProtoId::kSimple, 2, 2, 1 << 20));
  EXPECT_EQ(m.pinned(ar, 100), -1);
  // LL: cheaper per hop with a core per rank, dearer when ranks outnumber cores, and dearer per byte.
  EXPECT_LT(m.predictUs(ar, AlgoId::kRing, ProtoId::kLL, 2, 2, 8),
            m.predictUs(ar, AlgoId::kRing, ProtoId::kSimple, 2, 2, 8));
  EXPECT_GT(m.predictUs(ar, AlgoId::kRing, ProtoId::kLL, 4, 2, 8),
            m.predictUs(ar, AlgoId::kRing, ProtoId::kSimple, 4, 2, 8));
  EXPECT_GT(m.predictUs(ar, AlgoId::kRing, ProtoId::kLL, 2, 2, 16 << 20),
            m.predictUs(ar, AlgoId::kRing, ProtoId::kSimple, 2, 2, 16 << 20));
}

TEST(CostModel, ProtocolCostsAndPins) {
  const std::string path = writeTemp(
      "cost allreduce ring 2 10 2.0\n"
      "cost allreduce ring LL 2 4 0.5\n"
      "pin allgather 0 4096 ring ll\n"
      "pin allgather 4097 8192 ring\n");
  Result<CostModel> m = CostModel::load(path);
  ASSERT_TRUE(m.isOk()) << m.status().message();
  const CostModel& c = m.value();
  EXPECT_DOUBLE_EQ(c.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, 2, 2, 2000), 10 + 1.0);
  EXPECT_DOUBLE_EQ(c.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kLL, 2, 2, 1000), 4 + 2.0);
  int proto = -2;
  EXPECT_EQ(c.pinned(FilterColl::kAllGather, 100, &proto), static_cast<int>(AlgoId::kRing));
  EXPECT_EQ(proto, static_cast<int>(ProtoId::kLL));
  EXPECT_EQ(c.pinned(FilterColl::kAllGather, 5000, &proto), static_cast<int>(AlgoId::kRing));
  EXPECT_EQ(proto, -1);
  unlink(path.c_str());
}

TEST(CostModel, AlltoAllPairwiseAgainstBruck) {
  CostModel m;
  // Built in (measured on 2 cores): the log-step schedule wins at 4 ranks, and at 8 for tiny blocks only.
  EXPECT_LT(m.predictAlltoAllUs(AlltoAllAlgo::kBruck, 4, 2, 1 << 16),
            m.predictAlltoAllUs(AlltoAllAlgo::kPairwise, 4, 2, 1 << 16));
  EXPECT_LT(m.predictAlltoAllUs(AlltoAllAlgo::kBruck, 8, 2, 8), m.predictAlltoAllUs(AlltoAllAlgo::kPairwise, 8, 2, 8));
  EXPECT_GT(m.predictAlltoAllUs(AlltoAllAlgo::kBruck, 8, 2, 1 << 15),
            m.predictAlltoAllUs(AlltoAllAlgo::kPairwise, 8, 2, 1 << 15));
  const std::string path = writeTemp(
      "cost alltoall pairwise 4 6 1.0\n"
      "cost alltoall bruck 4 2 1.0\n"
      "pin alltoall 0 64 pairwise\n");
  Result<CostModel> f = CostModel::load(path);
  ASSERT_TRUE(f.isOk()) << f.status().message();
  // 4 ranks, 1000 bytes per peer: pairwise moves 3 blocks, Bruck 4 (bits 0 and 1 of j = 1..3).
  EXPECT_DOUBLE_EQ(f.value().predictAlltoAllUs(AlltoAllAlgo::kPairwise, 4, 2, 1000), 6 + 3.0);
  EXPECT_DOUBLE_EQ(f.value().predictAlltoAllUs(AlltoAllAlgo::kBruck, 4, 2, 1000), 2 + 4.0);
  // 8 ranks: alpha scaled by messages (7/3) and rounds (3/2).
  EXPECT_DOUBLE_EQ(f.value().predictAlltoAllUs(AlltoAllAlgo::kPairwise, 8, 2, 0), 6.0 * 7 / 3);
  EXPECT_DOUBLE_EQ(f.value().predictAlltoAllUs(AlltoAllAlgo::kBruck, 8, 2, 0), 2.0 * 3 / 2);
  EXPECT_EQ(f.value().pinnedAlltoAll(64), static_cast<int>(AlltoAllAlgo::kPairwise));
  EXPECT_EQ(f.value().pinnedAlltoAll(65), -1);
  unlink(path.c_str());
}

TEST(CostModel, FileCostsAndPins) {
  const std::string path = writeTemp(
      "# measured\n"
      "cost allreduce ring 4 10 2.0\n"
      "cost AllReduce Tree 4 5 1.0   # case-insensitive\n"
      "\n"
      "pin allreduce 0 4096 tree\n"
      "pin broadcast 1024 2048 ring\n");
  Result<CostModel> m = CostModel::load(path);
  ASSERT_TRUE(m.isOk()) << m.status().message();
  const CostModel& c = m.value();
  EXPECT_DOUBLE_EQ(c.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, 4, 2, 2000), 10 + 1.0);
  EXPECT_DOUBLE_EQ(c.predictUs(FilterColl::kAllReduce, AlgoId::kTree, ProtoId::kSimple, 4, 2, 1000), 5 + 1.0);
  // 8 ranks: the 4-rank ring entry's alpha scaled by the step count, 2 (n - 1): 14 / 6.
  EXPECT_DOUBLE_EQ(c.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, 8, 2, 0), 10.0 * 14 / 6);
  EXPECT_EQ(c.pinned(FilterColl::kAllReduce, 4096), static_cast<int>(AlgoId::kTree));
  EXPECT_EQ(c.pinned(FilterColl::kAllReduce, 4097), -1);
  EXPECT_EQ(c.pinned(FilterColl::kBroadcast, 1500), static_cast<int>(AlgoId::kRing));
  EXPECT_EQ(c.source(), path);
  unlink(path.c_str());
}

// Across hosts: the ring pays 2(n-1) network hops, the tree 2 log2(hosts) plus its chains; bytes per link set
// the slope. A "net" line replaces the measured figures.
TEST(CostModel, AcrossHostsTradesHopsForBytes) {
  CostModel m;
  NetShape net;
  net.nNodes = 4;
  net.localRanks = 2;
  net.link = AlgoCost{20, 1.25};
  net.hostHopUs = 1;
  const int n = 8;
  const double ring0 = m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, n, net, 0);
  const double tree0 = m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kTree, ProtoId::kSimple, n, net, 0);
  // 8 ranks on 4 hosts: the slowest block crosses 4 host boundaries per pass and takes 3 hops inside hosts.
  EXPECT_DOUBLE_EQ(ring0, 2 * (4 * 20 + 3 * 1));
  EXPECT_DOUBLE_EQ(tree0, 2 * (2 * 20 + 1 * 1));
  const size_t big = size_t{256} << 20;
  EXPECT_LT(m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, n, net, big),
            m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kTree, ProtoId::kSimple, n, net, big));
  // A slower network moves the crossover up: at 1 MB the tree wins with 2 ms hops, the ring with 2 us.
  net.link.alphaUs = 2000;
  EXPECT_LT(m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kTree, ProtoId::kSimple, n, net, 1 << 20),
            m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, n, net, 1 << 20));
  net.link.alphaUs = 2;
  EXPECT_GT(m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kTree, ProtoId::kSimple, n, net, 1 << 20),
            m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, n, net, 1 << 20));

  // LL across hosts: the same latency, every byte at LL's bandwidth factor (its chunks cross the network as small
  // messages), so the model never prefers it; with one rank per host too.
  net.link.alphaUs = 20;
  for (AlgoId a : {AlgoId::kRing, AlgoId::kTree}) {
    const double simple0 = m.predictAcrossHostsUs(FilterColl::kAllReduce, a, ProtoId::kSimple, n, net, 0);
    EXPECT_DOUBLE_EQ(m.predictAcrossHostsUs(FilterColl::kAllReduce, a, ProtoId::kLL, n, net, 0), simple0);
    EXPECT_GT(m.predictAcrossHostsUs(FilterColl::kAllReduce, a, ProtoId::kLL, n, net, 4096),
              m.predictAcrossHostsUs(FilterColl::kAllReduce, a, ProtoId::kSimple, n, net, 4096));
  }
  NetShape alone = net;
  alone.localRanks = 1;
  EXPECT_GT(m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kLL, 4, alone, 1 << 20),
            m.predictAcrossHostsUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, 4, alone, 1 << 20));

  const std::string path = writeTemp("# measured elsewhere\nnet 35.5 3.1\n");
  Result<CostModel> f = CostModel::load(path);
  unlink(path.c_str());
  ASSERT_TRUE(f.isOk()) << f.status().message();
  ASSERT_TRUE(f.value().hasNetFigures());
  EXPECT_DOUBLE_EQ(f.value().netFigures().alphaUs, 35.5);
  EXPECT_DOUBLE_EQ(f.value().netFigures().betaGBps, 3.1);
  EXPECT_FALSE(m.hasNetFigures());
}

TEST(CostModel, BadFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* mentions;
  };
  const Case cases[] = {{"cost allreduce ring 4 10\n", "line 1: expected 'cost"},
                        {"\ncost allreduce bogus 4 1 1\n", "line 2: unknown algorithm 'bogus'"},
                        {"pin gather 0 1 ring\n", "unknown collective 'gather'"},
                        {"pin alltoall 0 1 ring\n", "unknown algorithm 'ring' (alltoall: pairwise or bruck)"},
                        {"pin allreduce 10 1 ring\n", "max bytes is below min bytes"},
                        {"cost allreduce ring 0 1 1\n", "ranks >= 1"},
                        {"cost allreduce ring 4 1 1 extra\n", "unexpected 'extra'"},
                        {"tune allreduce\n", "unknown entry 'tune'"},
                        {"pin allreduce 0 1 ring LL64\n", "unknown protocol 'LL64'"},
                        {"cost allreduce ring LL 4 1\n", "line 1: expected 'cost"},
                        {"net 5\n", "line 1: expected 'net <alpha us> <GB/s>'"},
                        {"net -1 2\n", "net: alpha >= 0 and GB/s > 0"},
                        {"net 3 0\n", "net: alpha >= 0 and GB/s > 0"}};
  for (const Case& k : cases) {
    const std::string path = writeTemp(k.text);
    Result<CostModel> m = CostModel::load(path);
    ASSERT_FALSE(m.isOk()) << k.text;
    EXPECT_NE(m.status().message().find(k.mentions), std::string::npos) << m.status().message();
    EXPECT_NE(m.status().message().find(path), std::string::npos);
    unlink(path.c_str());
  }
  EXPECT_FALSE(CostModel::load("/nonexistent/braid-tuning").isOk());
}

}  // namespace
}  // namespace braid
