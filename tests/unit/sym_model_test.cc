// The NVLS-style path's price on GPUs (sym_model.h): NCCL's symmetric-kernel model with braid's bus bytes, where it
// is priced at all, and the selector of a CUDA communicator taking the path where that price beats the FIFO path.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "algorithms/selector/gpu_model.h"
#include "algorithms/selector/selector.h"
#include "algorithms/selector/sym_model.h"
#include "topology/topo.h"
#include "topology/topo_search.h"

namespace braid {
namespace {

constexpr FilterColl kAr = FilterColl::kAllReduce;
constexpr FilterColl kAg = FilterColl::kAllGather;
constexpr FilterColl kRs = FilterColl::kReduceScatter;

DirectGpuShape nvlinkShape(int nRanks, int lanes) {
  DirectGpuShape s;
  s.nRanks = nRanks;
  s.lanes = lanes;
  s.allNvlink = true;
  s.byModel = true;
  return s;
}

// A hand-computed point: 8 B over 8 Hopper ranks is all latency, NCCL's 7.8 us plus softplus(-1) = ln(1 + 1/e)
// (the model's floor as the bytes vanish); the bus bytes (7 x 8) and the staged 8 B add about nothing.
TEST(SymModel, SmallAllReduceIsNcclsBaseLatency) {
  const double us = predictDirectGpuUs(nvlinkShape(8, 4), kAr, 8);
  EXPECT_NEAR(us, 7.8 + std::log1p(std::exp(-1.0)), 1e-3);
  DirectGpuShape blackwell = nvlinkShape(8, 4);
  blackwell.minSm = 100;
  EXPECT_NEAR(predictDirectGpuUs(blackwell, kAr, 8), 19.5 + std::log1p(std::exp(-1.0)), 1e-3);
  EXPECT_NEAR(predictDirectGpuUs(blackwell, kAg, 64), 13.0 + std::log1p(std::exp(-1.0)), 1e-3);
}

// A bandwidth point: 1 GiB two-shot over 8 ranks and 24 lanes (24 x 65 GiB/s saturates at the 320 GiB/s peak):
// 2 x 7/8 GiB at 320 GiB/s, plus staging 1 GiB at 1.5 MB/us, plus 7.8 us, less the softplus's 1.
TEST(SymModel, LargeAllReduceIsPeakBandwidthPlusStaging) {
  const double gib = 1073741824.0;
  const double want = 7.8 + (2.0 * 7 / 8 * gib) / (320 * gib / 1e6) - 1 + gib / 1500e3;
  EXPECT_NEAR(predictDirectGpuUs(nvlinkShape(8, 24), kAr, size_t{1} << 30), want, want * 1e-3);
}

// All-gather and reduce-scatter count one rank's part (the selector's convention): 16 MiB each on 8 ranks and 4
// lanes moves 7 x 16 MiB over softmin(4 x 44, 320; 44) = 174.39 GiB/s, and stages 16 MiB (all-gather) or 8 x 16 MiB
// (reduce-scatter) at 4 x 44 GiB/s. Worked out by hand: 722.76 and 1344.20 us.
TEST(SymModel, AllGatherAndReduceScatterCountOneRanksPart) {
  const size_t s = size_t{16} << 20;
  EXPECT_NEAR(predictDirectGpuUs(nvlinkShape(8, 4), kAg, s), 722.76, 0.05);
  EXPECT_NEAR(predictDirectGpuUs(nvlinkShape(8, 4), kRs, s), 1344.20, 0.05);
}

// Where NCCL would not run its symmetric kernels, or braid has no such schedule, the path has no price; nor before
// every rank opted in (BRAID_GPU_DIRECT_AUTO=1: the path has not run on a GPU).
TEST(SymModel, UnpricedShapesSayWhy) {
  const DirectGpuShape ok = nvlinkShape(4, 8);
  EXPECT_STREQ(directGpuUnpriced(ok, kAr), "");
  EXPECT_STREQ(directGpuUnpriced(ok, kAg), "");
  EXPECT_STREQ(directGpuUnpriced(ok, kRs), "");
  EXPECT_NE(std::string(directGpuUnpriced(ok, FilterColl::kBroadcast)).find("no NVLS-style schedule"),
            std::string::npos);
  EXPECT_EQ(predictDirectGpuUs(ok, FilterColl::kReduce, 1024), -1);

  DirectGpuShape pcie = ok;
  pcie.allNvlink = false;
  EXPECT_NE(std::string(directGpuUnpriced(pcie, kAr)).find("NVLink"), std::string::npos);
  EXPECT_EQ(predictDirectGpuUs(pcie, kAr, 1024), -1);
  DirectGpuShape twoNodes = ok;
  twoNodes.nNodes = 2;
  EXPECT_EQ(predictDirectGpuUs(twoNodes, kAr, 1024), -1);
  DirectGpuShape noLanes = ok;
  noLanes.lanes = 0;
  EXPECT_EQ(predictDirectGpuUs(noLanes, kAr, 1024), -1);
  EXPECT_EQ(predictDirectGpuUs(nvlinkShape(1, 8), kAr, 1024), -1);
  DirectGpuShape optedOut = ok;
  optedOut.byModel = false;
  EXPECT_NE(std::string(directGpuUnpriced(optedOut, kAr)).find("BRAID_GPU_DIRECT_AUTO"), std::string::npos);
  EXPECT_EQ(predictDirectGpuUs(optedOut, kAr, 1024), -1);
}

// More lanes never cost more; more bytes never cost less.
TEST(SymModel, LanesAndBytesMoveThePriceTheRightWay) {
  for (FilterColl c : {kAr, kAg, kRs}) {
    double last = 0;
    for (size_t b = 8; b <= (size_t{1} << 30); b *= 4) {
      const double us = predictDirectGpuUs(nvlinkShape(8, 8), c, b);
      EXPECT_GE(us, last) << b;
      EXPECT_LE(predictDirectGpuUs(nvlinkShape(8, 16), c, b), us) << b;
      last = us;
    }
  }
}

// A CUDA communicator's selector on a fixture, the NVLS-style path set up with `lanes` lanes.
struct Fixture {
  std::shared_ptr<const GpuModel> model;
  Selector sel;
};

Fixture selectorOn(const std::string& fixture, int lanes, bool deterministic, bool byModel = true) {
  auto sys = loadTopoFile(std::string(BRAID_FIXTURES_DIR) + "/topo/" + fixture, PathOptions());
  EXPECT_TRUE(sys.isOk()) << sys.status().message();
  HostGraphs h = searchHostGraphs(sys.value().graph, false, 0);
  auto in = gpuModelInputFrom(sys.value().graph, h, 1);
  EXPECT_TRUE(in.isOk()) << in.status().message();
  GpuModelInput mi = in.take();
  restrictToBraidGpu(&mi);
  mi.directLanes = lanes;
  mi.directByModel = byModel;
  SelectorConfig sc;
  sc.nranks = mi.nRanks;
  sc.cuda = true;
  sc.deterministic = deterministic;
  sc.gpu = std::make_shared<const GpuModel>(buildGpuModel(mi));
  Fixture f{sc.gpu, Selector(std::move(sc))};
  f.sel.setDirect(true);
  return f;
}

// On a DGX-H100 (8 GPUs on NVSwitch) the one-shot's single step beats the FIFO path's ring and tree at 1 KB, and the
// ring wins a 1 GiB all-reduce (NCCL's ring at 24 x 15 GB/s against 16 lanes capped at 320 GiB/s plus staging); at
// every size the choice is the cheaper of the two prices, and the price of the run is the one the model gave.
TEST(SymModel, TheSelectorTakesThePathWhereItIsCheaper) {
  Fixture f = selectorOn("dgx_h100.xml", 16, false);
  EXPECT_TRUE(f.model->in.allNvlink);
  const FifoChoice small = f.sel.chosen(CollKind::kAllReduce, 1024);
  EXPECT_EQ(small.algo, AlgoId::kNvls);
  EXPECT_DOUBLE_EQ(small.predictedUs, predictDirectGpuUs(directShapeOf(f.model->in), kAr, 1024));
  EXPECT_EQ(f.sel.chosen(CollKind::kAllReduce, size_t{1} << 30).algo, AlgoId::kRing);
  int direct = 0, fifo = 0;
  for (size_t b = 8; b <= (size_t{1} << 30); b *= 4) {
    for (CollKind k : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter}) {
      const FilterColl c = k == CollKind::kAllReduce ? kAr : k == CollKind::kAllGather ? kAg : kRs;
      const FifoChoice ff = f.sel.chooseFifo(k, b);
      const double nvls = predictDirectGpuUs(directShapeOf(f.model->in), c, b);
      const FifoChoice got = f.sel.chosen(k, b);
      EXPECT_EQ(got.algo == AlgoId::kNvls, nvls < ff.predictedUs) << b << " bytes, kind " << static_cast<int>(k);
      (got.algo == AlgoId::kNvls ? direct : fifo) += 1;
    }
  }
  EXPECT_GT(direct, 0);
  EXPECT_GT(fifo, 0) << "staging makes the FIFO path win somewhere";
  // Broadcast has no NVLS-style schedule to price: the FIFO path.
  EXPECT_NE(f.sel.chosen(CollKind::kBroadcast, 1024).algo, AlgoId::kNvls);
}

// PCIe GPUs (NCCL runs no symmetric kernel there), deterministic mode, no lanes, and not opted in: the FIFO path at
// every size.
TEST(SymModel, NoPriceOrDeterministicKeepsTheFifoPath) {
  for (const Fixture& f : {selectorOn("pcie_4gpu.xml", 16, false), selectorOn("dgx_h100.xml", 16, true),
                           selectorOn("dgx_h100.xml", 0, false), selectorOn("dgx_h100.xml", 16, false, false)}) {
    for (size_t b = 8; b <= (size_t{1} << 30); b *= 16) {
      EXPECT_NE(f.sel.chosen(CollKind::kAllReduce, b).algo, AlgoId::kNvls) << b;
    }
  }
}

// NVLSTree's price is -1 when a piece has none (a GPU host whose NVLS-style path is not priced): it is then never
// chosen by the model (before, -1 pieces summed to a negative time that beat everything), and a priced NVLSTree
// still is where it is cheaper.
TEST(SymModel, AnUnpricedNvlsTreeIsNeverChosen) {
  SelectorConfig sc;
  sc.nranks = 16;
  sc.nNodes = 2;
  Selector unpriced(sc);
  unpriced.setNvlsTree([](size_t) { return -1.0; });
  Selector cheap(sc);
  cheap.setNvlsTree([](size_t) { return 0.001; });
  for (size_t b = 8; b <= (size_t{1} << 30); b *= 64) {
    EXPECT_NE(unpriced.chosen(CollKind::kAllReduce, b).algo, AlgoId::kNvlsTree) << b;
    EXPECT_EQ(cheap.chosen(CollKind::kAllReduce, b).algo, AlgoId::kNvlsTree) << b;
  }
}

}  // namespace
}  // namespace braid
