// The size the selector hands NCCL's GPU model and tuner plugins: NCCL's nBytes, the type size times the larger of
// the send and receive counts (ncclFuncMaxSendRecvCount), so all-gather and reduce-scatter give their full buffer,
// while the selector itself counts one rank's part (regression: both got one rank's part, n times too small).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "algorithms/selector/gpu_model.h"
#include "algorithms/selector/selector.h"
#include "algorithms/selector/tuner_hook.h"
#include "topology/topo.h"
#include "topology/topo_search.h"

namespace braid {
namespace {

// Records what it is asked about and changes nothing.
class RecordingTuner : public TunerHook {
 public:
  bool editCosts(FilterColl coll, size_t bytes, CostTable*, int*) override {
    asked.push_back({coll, bytes});
    return true;
  }
  const char* describe() const override { return "recording"; }
  std::string identity() const override { return "recording/v0"; }
  std::vector<std::pair<FilterColl, size_t>> asked;
};

TEST(SelectorNcclBytes, TunerPluginsGetTheFullBufferOfAllGatherAndReduceScatter) {
  SelectorConfig sc;
  sc.nranks = 4;
  Selector sel(sc);
  auto tuner = std::make_shared<RecordingTuner>();
  sel.setTuner(tuner);
  (void)sel.chosen(CollKind::kAllReduce, 1000);
  (void)sel.chosen(CollKind::kAllGather, 1000);
  (void)sel.chosen(CollKind::kReduceScatter, 1000);
  (void)sel.chosen(CollKind::kBroadcast, 1000);
  ASSERT_EQ(tuner->asked.size(), 4u);
  EXPECT_EQ(tuner->asked[0].second, 1000u);
  EXPECT_EQ(tuner->asked[1].second, 4000u);
  EXPECT_EQ(tuner->asked[2].second, 4000u);
  EXPECT_EQ(tuner->asked[3].second, 1000u);
}

// On a DGX-H100 (8 ranks) the FIFO path's price of an all-gather of 1 MB per rank is NCCL's model at 8 MB, as NCCL
// prices it; an all-reduce of 1 MB is the model at 1 MB.
TEST(SelectorNcclBytes, NcclsGpuModelPricesAllGatherAndReduceScatterByTheFullBuffer) {
  auto sys = loadTopoFile(std::string(BRAID_FIXTURES_DIR) + "/topo/dgx_h100.xml", PathOptions());
  ASSERT_TRUE(sys.isOk()) << sys.status().message();
  auto in = gpuModelInputFrom(sys.value().graph, searchHostGraphs(sys.value().graph, false, 0), 1);
  ASSERT_TRUE(in.isOk()) << in.status().message();
  GpuModelInput mi = in.take();
  restrictToBraidGpu(&mi);
  SelectorConfig sc;
  sc.nranks = mi.nRanks;
  sc.cuda = true;
  sc.gpu = std::make_shared<const GpuModel>(buildGpuModel(mi));
  const GpuModel& m = *sc.gpu;
  Selector sel(std::move(sc));
  const size_t s = size_t{1} << 20;
  EXPECT_DOUBLE_EQ(sel.chooseFifo(CollKind::kAllGather, s).predictedUs,
                   selectGpu(m, FilterColl::kAllGather, 8 * s).timeUs);
  EXPECT_DOUBLE_EQ(sel.chooseFifo(CollKind::kReduceScatter, s).predictedUs,
                   selectGpu(m, FilterColl::kReduceScatter, 8 * s).timeUs);
  EXPECT_DOUBLE_EQ(sel.chooseFifo(CollKind::kAllReduce, s).predictedUs, selectGpu(m, FilterColl::kAllReduce, s).timeUs);
}

}  // namespace
}  // namespace braid
