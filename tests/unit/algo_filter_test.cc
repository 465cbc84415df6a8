// NCCL_ALGO / NCCL_PROTO grammar: valid, invalid and empty settings.
#include "algorithms/selector/algo_filter.h"
#include "algorithms/selector/selector.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

constexpr int kTree = static_cast<int>(AlgoId::kTree);
constexpr int kRing = static_cast<int>(AlgoId::kRing);
constexpr int kNvls = static_cast<int>(AlgoId::kNvls);
constexpr int kCollNetDirect = static_cast<int>(AlgoId::kCollNetDirect);

Filter algo(const std::string& text) {
  Result<Filter> f = parseFilter(text, algoNames(), "NCCL_ALGO");
  EXPECT_TRUE(f.isOk()) << text << ": " << f.status().message();
  return f.isOk() ? f.take() : Filter();
}

TEST(AlgoFilter, EmptyAllowsEverything) {
  for (const char* text : {"", "  "}) {
    Filter f = algo(text);
    for (int c = 0; c < kFilterColls; ++c) {
      for (int a = 0; a < kAlgos; ++a) EXPECT_TRUE(f.allows(static_cast<FilterColl>(c), a));
    }
  }
}

TEST(AlgoFilter, ListAndExclusionCaseInsensitive) {
  Filter f = algo("RING,nvls");
  EXPECT_TRUE(f.allows(FilterColl::kAllReduce, kRing));
  EXPECT_TRUE(f.allows(FilterColl::kAllGather, kNvls));
  EXPECT_FALSE(f.allows(FilterColl::kAllReduce, kTree));
  Filter g = algo("^tree");
  EXPECT_FALSE(g.allows(FilterColl::kBroadcast, kTree));
  EXPECT_TRUE(g.allows(FilterColl::kBroadcast, kRing));
  EXPECT_TRUE(g.allows(FilterColl::kBroadcast, kNvls));
}

TEST(AlgoFilter, PerCollectiveEntriesOverrideTheDefault) {
  // NCCL's documented example.
  Filter f = algo("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring");
  EXPECT_TRUE(f.allows(FilterColl::kAllGather, kRing));
  EXPECT_TRUE(f.allows(FilterColl::kAllGather, kCollNetDirect));
  EXPECT_FALSE(f.allows(FilterColl::kAllGather, kTree));
  EXPECT_TRUE(f.allows(FilterColl::kAllReduce, kTree));
  EXPECT_FALSE(f.allows(FilterColl::kAllReduce, kRing));
  EXPECT_TRUE(f.allows(FilterColl::kBroadcast, kRing));
  EXPECT_FALSE(f.allows(FilterColl::kBroadcast, kCollNetDirect));
  Filter g = algo("allreduce:^tree");
  EXPECT_FALSE(g.allows(FilterColl::kAllReduce, kTree));
  EXPECT_TRUE(g.allows(FilterColl::kAllReduce, kRing));
  EXPECT_TRUE(g.allows(FilterColl::kReduce, kTree));
}

TEST(AlgoFilter, ProtocolGrammar) {
  Result<Filter> f = parseFilter("^LL128;allreduce:LL128", protoNames(), "NCCL_PROTO");
  ASSERT_TRUE(f.isOk()) << f.status().message();
  EXPECT_TRUE(f.value().allows(FilterColl::kBroadcast, static_cast<int>(ProtoId::kSimple)));
  EXPECT_FALSE(f.value().allows(FilterColl::kBroadcast, static_cast<int>(ProtoId::kLL128)));
  EXPECT_TRUE(f.value().allows(FilterColl::kAllReduce, static_cast<int>(ProtoId::kLL128)));
  EXPECT_FALSE(f.value().allows(FilterColl::kAllReduce, static_cast<int>(ProtoId::kSimple)));
}

// checkAlgorithms remembers a pass per collective (the latency path asks on every call); what it read changing
// (here NVLS becoming unavailable) asks again.
TEST(AlgoFilter, TheSelectorsCheckFollowsWhatCanRun) {
  SelectorConfig sc;
  sc.nranks = 2;
  sc.algo = algo("NVLS");
  Selector sel(sc);
  sel.setDirect(true);
  EXPECT_TRUE(sel.checkAlgorithms(CollKind::kAllReduce).isOk());
  EXPECT_TRUE(sel.checkAlgorithms(CollKind::kAllReduce).isOk());
  sel.setDirect(false);
  const Status st = sel.checkAlgorithms(CollKind::kAllReduce);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_NE(st.message().find("NCCL_ALGO=\"NVLS\""), std::string::npos) << st.message();
  sel.setDirect(true);
  EXPECT_TRUE(sel.checkAlgorithms(CollKind::kAllReduce).isOk());
}

TEST(AlgoFilter, InvalidSettingsNameTheToken) {
  struct Case {
    const char* text;
    const char* mentions;
  };
  const Case cases[] = {{"ring,bogus", "unknown name 'bogus'"},
                        {"allreduce:ring;alltoall:ring", "unknown collective 'alltoall'"},
                        {"ring;tree", "only the first entry may omit"},
                        {"ring,,tree", "an empty name"},
                        {";ring", "an empty entry"},
                        {"allreduce:", "an empty name"}};
  for (const Case& c : cases) {
    Result<Filter> f = parseFilter(c.text, algoNames(), "NCCL_ALGO");
    ASSERT_FALSE(f.isOk()) << c.text;
    EXPECT_NE(f.status().message().find(c.mentions), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("NCCL_ALGO"), std::string::npos);
  }
}

}  // namespace
}  // namespace braid
