// NCCL's tuning model over the searched fixtures: the worked example of reference/nccl.md 6.7 through the real
// search, multi-node figures, the enable rules, NCCL_ALGO / NCCL_PROTO, and how the choice moves with size.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "algorithms/selector/gpu_model.h"
#include "algorithms/selector/selector.h"
#include "topology/topo.h"
#include "topology/topo_search.h"
#include "topology/xml.h"

namespace braid {
namespace {

constexpr FilterColl kAr = FilterColl::kAllReduce;
constexpr int kTreeA = static_cast<int>(AlgoId::kTree);
constexpr int kRingA = static_cast<int>(AlgoId::kRing);
constexpr int kNvlsA = static_cast<int>(AlgoId::kNvls);
constexpr int kNvlsTreeA = static_cast<int>(AlgoId::kNvlsTree);
constexpr int kLL = static_cast<int>(ProtoId::kLL);
constexpr int kLL128 = static_cast<int>(ProtoId::kLL128);
constexpr int kSimple = static_cast<int>(ProtoId::kSimple);
constexpr int kArI = static_cast<int>(kAr);

TopoSystem load(const std::string& name) {
  auto r = loadTopoFile(std::string(BRAID_FIXTURES_DIR) + "/topo/" + name, PathOptions());
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.take();
}

GpuModelInput inputFor(const std::string& fixture, int nNodes) {
  TopoSystem s = load(fixture);
  HostGraphs h = searchHostGraphs(s.graph, nNodes > 1, 0);
  auto in = gpuModelInputFrom(s.graph, h, nNodes);
  EXPECT_TRUE(in.isOk()) << in.status().message();
  return in.take();
}

Filter filter(const std::string& text, bool algo) {
  auto f = parseFilter(text, algo ? algoNames() : protoNames(), algo ? "NCCL_ALGO" : "NCCL_PROTO");
  EXPECT_TRUE(f.isOk()) << f.status().message();
  return f.take();
}

std::string choiceName(const GpuChoice& c) {
  if (c.timeUs < 0) return "none";
  return algoNames()[static_cast<size_t>(c.algo)] + "/" + protoNames()[static_cast<size_t>(c.proto)];
}

// The choices from 8 B to 8 GB (x4), with consecutive repeats collapsed: "Ring/LL NVLS/Simple".
std::string choiceSequence(const GpuModel& m, FilterColl c) {
  std::string seq, last;
  for (size_t b = 8; b <= (size_t{8} << 30); b *= 4) {
    const std::string n = choiceName(selectGpu(m, c, b));
    if (n != last) seq += (seq.empty() ? "" : " ") + n;
    last = n;
  }
  return seq;
}

// What NCCL's argmin implies when no size-dependent correction is in play (no tree AllReduce): as the size grows the
// chosen pair never goes back to a lower-latency or a lower-bandwidth pair, and it is never slower than any enabled
// pair. Returns the first violation, or "".
std::string checkSizeProgression(const GpuModel& m, FilterColl c) {
  const int ci = static_cast<int>(c);
  double lastLat = -1, lastBw = -1;
  for (size_t b = 1; b <= (size_t{16} << 30); b *= 2) {
    const GpuChoice ch = selectGpu(m, c, b);
    if (ch.timeUs < 0) return "nothing enabled at " + std::to_string(b);
    for (int a = 0; a < kAlgos; ++a) {
      for (int p = 0; p < kProtos; ++p) {
        const double t = predictGpuUs(m, c, static_cast<AlgoId>(a), static_cast<ProtoId>(p), b);
        if (t >= 0 && t < ch.timeUs) return "not the argmin at " + std::to_string(b);
      }
    }
    const double lat = m.latency[ci][static_cast<int>(ch.algo)][static_cast<int>(ch.proto)];
    const double bw = m.algBw[ci][static_cast<int>(ch.algo)][static_cast<int>(ch.proto)];
    if (lat < lastLat || bw < lastBw) return "went back to " + choiceName(ch) + " at " + std::to_string(b);
    lastLat = lat;
    lastBw = bw;
  }
  return "";
}

// Reference 6.7: one DGX-H100, 8 ranks, AllReduce, from the fixture through the real search.
TEST(GpuModel, WorkedExampleDgxH100) {
  GpuModelInput in = inputFor("dgx_h100.xml", 1);
  EXPECT_EQ(in.nRanks, 8);
  EXPECT_EQ(in.commChannels, 24);
  const GraphFigures& ring = in.graphs[kRingA];
  EXPECT_EQ(ring.nChannels, 12);
  EXPECT_DOUBLE_EQ(ring.bwIntra, 30.0);
  EXPECT_EQ(ring.typeIntra, PathType::kNvl);
  EXPECT_EQ(in.graphs[kTreeA].nChannels, 12);
  EXPECT_FALSE(in.graphs[kTreeA].plainTree);
  EXPECT_EQ(in.graphs[kNvlsA].nChannels, 8);
  EXPECT_DOUBLE_EQ(in.graphs[kNvlsA].bwIntra, 40.0);
  EXPECT_DOUBLE_EQ(in.graphs[kNvlsA].bwInter, 60.0);
  EXPECT_TRUE(in.nvlsSupport);

  const GpuModel m = buildGpuModel(in);
  auto bus = [&](int a, int p) { return m.busBw[kArI][a][p]; };
  auto alg = [&](int a, int p) { return m.algBw[kArI][a][p]; };
  auto lat = [&](int a, int p) { return m.latency[kArI][a][p]; };
  EXPECT_NEAR(bus(kRingA, kLL), 141.0, 1e-9);  // min(llMaxBw 141, 360 / 2)
  EXPECT_NEAR(alg(kRingA, kLL), 141.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(bus(kRingA, kLL128), 331.2, 1e-9);  // min(0.92 x 360, 12 x 36.7)
  EXPECT_NEAR(bus(kRingA, kSimple), 360.0, 1e-9);
  EXPECT_NEAR(alg(kRingA, kSimple), 205.714, 1e-3);
  EXPECT_NEAR(bus(kTreeA, kLL), 331.2 / 3.8, 1e-9);       // 87.2
  EXPECT_NEAR(bus(kTreeA, kLL128), 331.2 * 7 / 9, 1e-9);  // 257.6
  EXPECT_NEAR(bus(kTreeA, kSimple), 331.2, 1e-9);
  EXPECT_NEAR(alg(kTreeA, kSimple), 165.6, 1e-9);
  EXPECT_NEAR(bus(kNvlsA, kSimple), 476.0, 1e-9);  // 8 x min(40 x 0.85 x 7/8 x 2, 60)
  EXPECT_NEAR(alg(kNvlsA, kSimple), 272.0, 1e-9);
  EXPECT_NEAR(lat(kRingA, kLL), 15.0, 1e-9);
  EXPECT_NEAR(lat(kRingA, kLL128), 40.6, 1e-9);
  EXPECT_NEAR(lat(kRingA, kSimple), 56.0, 1e-9);
  EXPECT_NEAR(lat(kTreeA, kLL), 15.2, 1e-9);
  EXPECT_NEAR(lat(kTreeA, kLL128), 31.5, 1e-9);
  EXPECT_NEAR(lat(kTreeA, kSimple), 64.4, 1e-9);
  EXPECT_NEAR(lat(kNvlsA, kSimple), 25.0, 1e-9);
  EXPECT_FALSE(m.enabled(kAr, AlgoId::kNvlsTree, ProtoId::kSimple));
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kNvlsTree, ProtoId::kSimple), "NVLSTree needs several nodes");
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kCollNetDirect, ProtoId::kSimple), "needs a CollNet plugin");
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kPat, ProtoId::kSimple), "not an algorithm of this collective");
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kNvls, ProtoId::kLL), "Simple only");

  // Crossover Ring LL -> NVLS: 15 + n / 80.57e3 = 25 + n / 272e3, n ~ 1.14 MB; nothing else wins in between.
  const double analytic = 10.0 * 1000 / (1 / alg(kRingA, kLL) - 1 / alg(kNvlsA, kSimple));
  EXPECT_NEAR(analytic, 1.145e6, 0.005e6);
  size_t lo = 8, hi = size_t{1} << 30;  // Ring/LL at lo, NVLS at hi
  ASSERT_EQ(choiceName(selectGpu(m, kAr, lo)), "Ring/LL");
  ASSERT_EQ(choiceName(selectGpu(m, kAr, hi)), "NVLS/Simple");
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (choiceName(selectGpu(m, kAr, mid)) == "NVLS/Simple" ? hi : lo) = mid;
  }
  EXPECT_NEAR(static_cast<double>(hi), analytic, 2.0);
  EXPECT_EQ(choiceName(selectGpu(m, kAr, hi - 1)), "Ring/LL");
  EXPECT_EQ(choiceSequence(m, kAr), "Ring/LL NVLS/Simple");
}

// NCCL's order on one DGX-H100 without NVLS: LL, then LL128 from a few MB, then Simple from a few tens of MB.
TEST(GpuModel, ChoiceMovesWithSizeAsNcclDoes) {
  GpuModelInput in = inputFor("dgx_h100.xml", 1);
  EXPECT_EQ(checkSizeProgression(buildGpuModel(in), FilterColl::kAllGather), "");
  EXPECT_EQ(checkSizeProgression(buildGpuModel(in), FilterColl::kBroadcast), "");
  in.algoFilter = filter("^nvls", true);
  GpuModel m = buildGpuModel(in);
  EXPECT_EQ(choiceSequence(m, kAr), "Ring/LL Ring/LL128 Ring/Simple");
  // LL -> LL128 where 15.0 + n/80.57e3 = 40.6 + n/189.3e3 (~3.6 MB), LL128 -> Simple at ~36.6 MB.
  EXPECT_EQ(choiceName(selectGpu(m, kAr, 3 << 20)), "Ring/LL");
  EXPECT_EQ(choiceName(selectGpu(m, kAr, 4 << 20)), "Ring/LL128");
  EXPECT_EQ(choiceName(selectGpu(m, kAr, 32 << 20)), "Ring/LL128");
  EXPECT_EQ(choiceName(selectGpu(m, kAr, 40 << 20)), "Ring/Simple");
  in.algoFilter = filter("ring", true);
  EXPECT_EQ(checkSizeProgression(buildGpuModel(in), kAr), "");
  // The checker catches a choice that goes back: a made-up tree (latency 1.0, 400 GB/s) beats a ring (0.99 us,
  // 205.7 GB/s) from ~5 KB, but its correction dip (x0.5 from 128 KB) hands the ring the win again.
  in.algoFilter = filter("ring,tree", true);
  in.protoFilter = filter("simple", false);
  GpuModel bad = buildGpuModel(in);
  EXPECT_EQ(checkSizeProgression(bad, kAr), "");
  bad.latency[kArI][kRingA][kSimple] = 0.99;
  bad.latency[kArI][kTreeA][kSimple] = 1.0;
  bad.algBw[kArI][kTreeA][kSimple] = 400.0;
  EXPECT_EQ(checkSizeProgression(bad, kAr), "went back to Ring/Simple at 131072");
}

TEST(GpuModel, TwoDgxH100Nodes) {
  GpuModelInput in = inputFor("dgx_h100.xml", 2);
  EXPECT_EQ(in.nRanks, 16);
  EXPECT_EQ(in.ppn(), 8);
  // Inter-node rings: one per 400G NIC at 45 GB/s (x16 Gen5 48 and the NIC's 50 both carry it).
  const GraphFigures& ring = in.graphs[kRingA];
  EXPECT_EQ(ring.nChannels, 8);
  EXPECT_DOUBLE_EQ(ring.bwInter, 45.0);
  EXPECT_LE(ring.bwInter, netBw(400000));
  EXPECT_EQ(ring.typeInter, PathType::kPxn);
  EXPECT_EQ(in.commChannels, 16);
  const GpuModel m = buildGpuModel(in);
  EXPECT_NEAR(m.busBw[kArI][kRingA][kSimple], 8 * 45.0, 1e-9);  // <= 2 nodes: bwIntra
  // Ring: 28 NVLink steps at max(3.4, 3 x 1 us network overhead) + 2 network steps at 14 us.
  EXPECT_NEAR(m.latency[kArI][kRingA][kSimple], 8.4 + 28 * 3.4 + 2 * 14.0, 1e-9);
  EXPECT_NEAR(m.latency[kArI][kRingA][kLL], 6.6 + 28 * 1.0 + 2 * 2.7, 1e-9);
  // Tree: 2 x ((ppn - 1) x intra + log2(nodes) x inter).
  EXPECT_NEAR(m.latency[kArI][kTreeA][kSimple], 8.4 + 2 * (7 * 4.0 + 1 * 14.0), 1e-9);
  EXPECT_NEAR(m.latency[kArI][kTreeA][kLL], 6.8 + 2 * (7 * 0.6 + 1 * 5.0), 1e-9);
  // Plain NVLS needs SHARP across nodes; NVLSTree runs: heads 8 x 40 GB/s, bwInter 48 from the NICs' paths.
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kNvls, ProtoId::kSimple), "NVLS across nodes needs a CollNet plugin");
  EXPECT_EQ(in.graphs[kNvlsTreeA].nChannels, 8);
  EXPECT_DOUBLE_EQ(in.graphs[kNvlsTreeA].bwIntra, 40.0);
  EXPECT_DOUBLE_EQ(in.graphs[kNvlsTreeA].bwInter, 48.0);
  EXPECT_NEAR(m.busBw[kArI][kNvlsTreeA][kSimple], 8 * 57.7, 1e-9);  // min(59.5, 2 x 48, cap 57.7)
  EXPECT_NEAR(m.latency[kArI][kNvlsTreeA][kSimple], 25 + 2 * 1 * 20.9, 1e-9);
  // A NIC's reported latency adds to every network hop, twice for Simple (the flush after a GDR receive).
  GpuModelInput slow = in;
  slow.graphs[kRingA].latencyInter = 5.0;
  const GpuModel ms = buildGpuModel(slow);
  EXPECT_NEAR(ms.latency[kArI][kRingA][kSimple] - m.latency[kArI][kRingA][kSimple], 2 * 2 * 5.0, 1e-9);
  EXPECT_NEAR(ms.latency[kArI][kRingA][kLL] - m.latency[kArI][kRingA][kLL], 2 * 5.0, 1e-9);
  // Ring Simple's plateau: latency x1.4 once each rank's share of each channel reaches 64 bytes (16 x 16 x 64).
  const double below = predictGpuUs(m, kAr, AlgoId::kRing, ProtoId::kSimple, 16 * 16 * 64 - 1);
  const double at = predictGpuUs(m, kAr, AlgoId::kRing, ProtoId::kSimple, 16 * 16 * 64);
  EXPECT_NEAR(at - below, 0.4 * m.latency[kArI][kRingA][kSimple], 1e-3);
}

// The inter-node figures come from the NICs through the search: the same machine with 100G NICs (12.5 GB/s each)
// gets 12 GB/s rings, and the model's bandwidths follow.
TEST(GpuModel, SlowerNicsLowerTheInterNodeFigures) {
  std::ifstream file(std::string(BRAID_FIXTURES_DIR) + "/topo/dgx_h100.xml");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  size_t at = 0, replaced = 0;
  const std::string from = "speed=\"400000\"", to = "speed=\"100000\"";
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    ++replaced;
  }
  ASSERT_EQ(replaced, 8u);
  auto xml = parseXml(text, "dgx_h100 with 100G NICs");
  ASSERT_TRUE(xml.isOk()) << xml.status().message();
  auto sys = systemFromXml(xml.take(), "dgx_h100 with 100G NICs", PathOptions());
  ASSERT_TRUE(sys.isOk()) << sys.status().message();
  const TopoGraph& g = sys.value().graph;
  HostGraphs h = searchHostGraphs(g, true, 0);
  auto in = gpuModelInputFrom(g, h, 4);
  ASSERT_TRUE(in.isOk()) << in.status().message();
  const GraphFigures& ring = in.value().graphs[kRingA];
  EXPECT_LE(ring.bwInter, netBw(100000));
  EXPECT_DOUBLE_EQ(ring.bwInter, 12.0);
  const GpuModel slow = buildGpuModel(in.value());
  const GpuModel fast = buildGpuModel(inputFor("dgx_h100.xml", 4));
  // Beyond 2 nodes the ring's bandwidth is channels x bwInter.
  EXPECT_NEAR(slow.busBw[kArI][kRingA][kSimple], ring.nChannels * 12.0, 1e-9);
  EXPECT_LT(slow.busBw[kArI][kRingA][kSimple], fast.busBw[kArI][kRingA][kSimple]);
}

TEST(GpuModel, TreeLatencyGrowsWithLog2Nodes) {
  for (int nodes : {2, 3, 4, 8, 16}) {
    GpuModelInput in = inputFor("dgx_h100.xml", nodes);
    const GpuModel m = buildGpuModel(in);
    const int log2n = nodes >= 16 ? 4 : nodes >= 8 ? 3 : nodes >= 4 ? 2 : 1;  // NCCL's integer log2
    EXPECT_NEAR(m.latency[kArI][kTreeA][kLL], 6.8 + 2 * (7 * 0.6 + log2n * 5.0), 1e-9) << nodes << " nodes";
    EXPECT_NEAR(m.latency[kArI][kTreeA][kSimple], 8.4 + 2 * (7 * 4.0 + log2n * 14.0), 1e-9) << nodes << " nodes";
    // The ring's latency is linear in the nodes: 2 (nodes - 1) network steps.
    const int steps = 2 * (8 * nodes - 1), inter = 2 * (nodes - 1);
    EXPECT_NEAR(m.latency[kArI][kRingA][kLL], 6.6 + (steps - inter) * 1.0 + inter * 2.7, 1e-9) << nodes;
    if (nodes >= 3) {  // beyond two nodes the per-channel figure is the network one
      EXPECT_NEAR(m.busBw[kArI][kRingA][kSimple], in.graphs[kRingA].nChannels * in.graphs[kRingA].bwInter, 1e-9);
    }
  }
  // Large multi-node all-reduce: the tree's log latency beats the ring's linear one at small sizes on 16 nodes.
  const GpuModel m16 = buildGpuModel(inputFor("dgx_h100.xml", 16));
  EXPECT_EQ(selectGpu(m16, kAr, 8).algo, AlgoId::kTree);
}

TEST(GpuModel, Ll128PathRuleOnPcieBox) {
  GpuModelInput in = inputFor("pcie_4gpu.xml", 1);
  const PathType intra = in.graphs[kRingA].typeIntra;
  EXPECT_TRUE(intra == PathType::kPxb || intra == PathType::kPhb) << pathTypeName(intra);
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kRing, ProtoId::kLL128),
            std::string("LL128 path rule (typeIntra ") + pathTypeName(intra) + ")");
  const GpuModel m = buildGpuModel(in);
  EXPECT_FALSE(m.enabled(kAr, AlgoId::kRing, ProtoId::kLL128));
  EXPECT_FALSE(m.enabled(kAr, AlgoId::kTree, ProtoId::kLL128));
  EXPECT_TRUE(m.enabled(kAr, AlgoId::kRing, ProtoId::kLL));
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kNvls, ProtoId::kSimple), "needs NVLS (NVSwitch, sm90+)");
  // PCI hops: Ring LL = 6.6 + 6 x 1.0 over 4 ranks.
  EXPECT_NEAR(m.latency[kArI][kRingA][kLL], 12.6, 1e-9);
  // Forcing LL128 (NCCL_LL128=1) bypasses the rule; on NVLink (DGX-A100) the rule allows it.
  in.ll128Setting = 1;
  EXPECT_TRUE(buildGpuModel(in).enabled(kAr, AlgoId::kRing, ProtoId::kLL128));
  GpuModelInput a100 = inputFor("dgx_a100.xml", 1);
  EXPECT_EQ(disabledReason(a100, kAr, AlgoId::kRing, ProtoId::kLL128), "");
  // Across hosts the NIC side counts too: a PHB NIC path is not allowed even on NVLink.
  GpuModelInput far = inputFor("dgx_a100.xml", 2);
  far.graphs[kRingA].typeInter = PathType::kPhb;
  EXPECT_EQ(disabledReason(far, kAr, AlgoId::kRing, ProtoId::kLL128), "LL128 path rule (typeInter PHB)");
  far.graphs[kRingA].typeInter = PathType::kPxn;  // PXN only on sm90+: the A100 is sm80
  EXPECT_EQ(disabledReason(far, kAr, AlgoId::kRing, ProtoId::kLL128), "LL128 path rule (typeInter PXN)");
}

TEST(GpuModel, AlgoAndProtoFiltersHonoured) {
  GpuModelInput in = inputFor("dgx_h100.xml", 1);
  in.algoFilter = filter("ring", true);
  GpuModel m = buildGpuModel(in);
  for (size_t b = 8; b <= (size_t{1} << 32); b *= 8) EXPECT_EQ(selectGpu(m, kAr, b).algo, AlgoId::kRing) << b;
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kNvls, ProtoId::kSimple), "NCCL_ALGO");
  in.algoFilter = Filter();
  in.protoFilter = filter("^LL", false);
  m = buildGpuModel(in);
  // Without LL the lowest latency left is NVLS's 25 us (Tree LL128 31.5, Ring LL128 40.6); no size picks LL.
  EXPECT_EQ(choiceName(selectGpu(m, kAr, 8)), "NVLS/Simple");
  for (size_t b = 8; b <= (size_t{1} << 32); b *= 8) EXPECT_NE(selectGpu(m, kAr, b).proto, ProtoId::kLL) << b;
  in.algoFilter = filter("^nvls", true);
  EXPECT_EQ(choiceName(selectGpu(buildGpuModel(in), kAr, 8)), "Tree/LL128");
  EXPECT_EQ(disabledReason(in, kAr, AlgoId::kRing, ProtoId::kLL), "NCCL_PROTO");
  // Per collective: all-reduce limited to the tree, all-gather untouched.
  in.protoFilter = Filter();
  in.algoFilter = filter("allreduce:tree", true);
  m = buildGpuModel(in);
  EXPECT_EQ(selectGpu(m, kAr, 1 << 30).algo, AlgoId::kTree);
  EXPECT_TRUE(m.enabled(FilterColl::kAllGather, AlgoId::kNvls, ProtoId::kSimple));
  EXPECT_TRUE(m.enabled(FilterColl::kAllGather, AlgoId::kRing, ProtoId::kLL));
  // (All-gather over NVLS moves only 7/8 of a link without the switch's reduction: the ring's 411 GB/s wins.)
  EXPECT_EQ(selectGpu(m, FilterColl::kAllGather, 1 << 30).algo, AlgoId::kRing);
  // Nothing left: no choice.
  in.algoFilter = filter("allreduce:pat", true);
  EXPECT_LT(selectGpu(buildGpuModel(in), kAr, 8).timeUs, 0);
}

TEST(GpuModel, OtherCollectivesAndPat) {
  GpuModelInput in = inputFor("dgx_h100.xml", 1);
  const GpuModel m = buildGpuModel(in);
  const int ag = static_cast<int>(FilterColl::kAllGather);
  // All-gather: ring algBw = busBw x n / (n - 1); NVLS moves (ppn - 1)/ppn, no conversion.
  EXPECT_NEAR(m.algBw[ag][kRingA][kSimple], 360.0 * 8 / 7, 1e-9);
  EXPECT_NEAR(m.busBw[ag][kNvlsA][kSimple], 8 * 40 * 0.85 * 7 / 8 * 7 / 8, 1e-9);
  EXPECT_NEAR(m.algBw[ag][kNvlsA][kSimple], m.busBw[ag][kNvlsA][kSimple], 1e-9);
  EXPECT_NEAR(m.latency[ag][kRingA][kLL], 6.6 + 7 * 0.6, 1e-9);
  // Broadcast: ring only; one hop of latency when the channels repeat.
  const int bc = static_cast<int>(FilterColl::kBroadcast);
  EXPECT_FALSE(m.enabled(FilterColl::kBroadcast, AlgoId::kTree, ProtoId::kSimple));
  EXPECT_NEAR(m.latency[bc][kRingA][kSimple], 8.4 + 3.4, 1e-9);

  // PAT: one GPU per node (here 4 nodes by hand), AllGather/ReduceScatter, Simple.
  GpuModelInput pat;
  pat.nRanks = pat.nNodes = 4;
  pat.commChannels = 2;
  for (GraphFigures& f : pat.graphs) f = GraphFigures{1, 24, 24, PathType::kLoc, PathType::kPix, 0, true, false};
  const GpuModel pm = buildGpuModel(pat);
  EXPECT_TRUE(pm.enabled(FilterColl::kAllGather, AlgoId::kPat, ProtoId::kSimple));
  EXPECT_FALSE(pm.enabled(kAr, AlgoId::kPat, ProtoId::kSimple));
  // 8 + log2(4) x 14 / 3.5 + 2.8 x 4 (ppn 1: the tree's network latency), bandwidth 24 x 0.75.
  EXPECT_NEAR(pm.latency[ag][static_cast<int>(AlgoId::kPat)][kSimple], 8 + 2 * 14 / 3.5 + 2.8 * 4, 1e-9);
  EXPECT_NEAR(pm.algBw[ag][static_cast<int>(AlgoId::kPat)][kSimple], 24 * 0.75, 1e-9);
  pat.patEnable = false;
  EXPECT_EQ(disabledReason(pat, FilterColl::kAllGather, AlgoId::kPat, ProtoId::kSimple), "NCCL_PAT_ENABLE=0");
  pat.patEnable = true;
  pat.nRanks = 8;  // two ranks per node
  EXPECT_EQ(disabledReason(pat, FilterColl::kAllGather, AlgoId::kPat, ProtoId::kSimple), "PAT needs one rank per node");
}

TEST(GpuModel, TreeCorrectionCurve) {
  EXPECT_DOUBLE_EQ(treeCorrection(ProtoId::kSimple, 8), 1.0);  // below 64 B: no entry
  EXPECT_DOUBLE_EQ(treeCorrection(ProtoId::kSimple, 64), 0.9);
  EXPECT_DOUBLE_EQ(treeCorrection(ProtoId::kLL, 64 << 12), 0.4);  // 256 KB: the LL dip
  EXPECT_DOUBLE_EQ(treeCorrection(ProtoId::kSimple, size_t{1} << 40), 1.0);
  double minV = 1;
  for (int p = 0; p < kProtos; ++p) {
    for (size_t b = 64; b < (size_t{1} << 31); b *= 2) {
      const double v = treeCorrection(static_cast<ProtoId>(p), b);
      EXPECT_GE(v, 0.4);
      EXPECT_LE(v, 1.0);
      minV = std::min(minV, v);
    }
  }
  EXPECT_DOUBLE_EQ(minV, 0.4);
  // It reaches the prediction: the tree at 256 KB takes longer than its uncorrected figure.
  const GpuModel m = buildGpuModel(inputFor("dgx_h100.xml", 1));
  const size_t b = 256 << 10;
  const double raw = m.latency[kArI][kTreeA][kLL] + b / (1000.0 * m.algBw[kArI][kTreeA][kLL]);
  EXPECT_NEAR(predictGpuUs(m, kAr, AlgoId::kTree, ProtoId::kLL, b),
              m.latency[kArI][kTreeA][kLL] + (raw - m.latency[kArI][kTreeA][kLL]) / 0.4, 1e-6);
}

TEST(GpuModel, ParseCollAndReport) {
  EXPECT_EQ(parseGpuColl("all_reduce").value(), FilterColl::kAllReduce);
  EXPECT_EQ(parseGpuColl("ReduceScatter").value(), FilterColl::kReduceScatter);
  EXPECT_FALSE(parseGpuColl("alltoall").isOk());
  const GpuModel m = buildGpuModel(inputFor("dgx_h100.xml", 1));
  const std::string table = describeGpuModel(m, kAr);
  const size_t at = table.find("\nNVLS ");
  ASSERT_NE(at, std::string::npos) << table;
  const std::string line = table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  EXPECT_NE(line.find(" Simple "), std::string::npos) << line;
  EXPECT_NE(line.find(" 476.0 "), std::string::npos) << line;
  EXPECT_NE(line.find(" 272.0 "), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 5), " 25.0") << line;
  EXPECT_NE(table.find("off: NVLSTree needs several nodes"), std::string::npos) << table;
  const std::string sweep = describeGpuSweep(m, kAr, 8, size_t{8} << 30, 4);
  EXPECT_NE(sweep.find("  Ring/LL\n"), std::string::npos);
  EXPECT_EQ(sweep.substr(sweep.rfind("  ", sweep.size() - 2)), "  NVLS/Simple\n");
}

// A CUDA communicator's selector prices the FIFO path with the model (SelectorConfig::gpu): with LL128 off, as
// braid's CUDA communicators have it, it picks what the model's argmin picks over ring and tree with LL and
// Simple, at every size from 8 B to 1 GB; a pair the model disables is never chosen.
TEST(GpuModel, TheSelectorChoosesWhatTheModelChooses) {
  GpuModelInput in = inputFor("pcie_4gpu.xml", 1);
  in.ll128Setting = 0;
  in.nvlsSupport = false;
  in.patEnable = false;
  in.algoFilter = filter("ring,tree", true);
  in.protoFilter = filter("ll,simple", false);
  SelectorConfig sc;
  sc.nranks = in.nRanks;
  sc.gpu = std::make_shared<const GpuModel>(buildGpuModel(in));
  const GpuModel& m = *sc.gpu;
  Selector sel(std::move(sc));
  int changes = 0;
  std::string last;
  for (size_t n = 8; n <= (size_t{1} << 30); n *= 4) {
    const GpuChoice want = selectGpu(m, kAr, n);
    const FifoChoice got = sel.chooseFifo(CollKind::kAllReduce, n);
    EXPECT_EQ(choiceName(GpuChoice{got.algo, got.proto, got.predictedUs}), choiceName(want)) << n << " bytes";
    EXPECT_DOUBLE_EQ(got.predictedUs, want.timeUs) << n << " bytes";
    if (choiceName(want) != last) ++changes;
    last = choiceName(want);
  }
  EXPECT_GE(changes, 2) << "the choice never moved with the size";
}

}  // namespace
}  // namespace braid
