// NCCL's tuning model (see gpu_model.h). The constants are NCCL 2.30.7's (reference/nccl.md section 6.4); the
// order of the refinements matters (each is applied to the result of the previous one), as in NCCL.
#include "algorithms/selector/gpu_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "topology/topo_channels.h"

namespace braid {
namespace {

constexpr int kTree = static_cast<int>(AlgoId::kTree);
constexpr int kRing = static_cast<int>(AlgoId::kRing);
constexpr int kCollNetDirect = static_cast<int>(AlgoId::kCollNetDirect);
constexpr int kCollNetChain = static_cast<int>(AlgoId::kCollNetChain);
constexpr int kNvls = static_cast<int>(AlgoId::kNvls);
constexpr int kNvlsTree = static_cast<int>(AlgoId::kNvlsTree);
constexpr int kPat = static_cast<int>(AlgoId::kPat);
constexpr int kLL = static_cast<int>(ProtoId::kLL);
constexpr int kLL128 = static_cast<int>(ProtoId::kLL128);
constexpr int kSimple = static_cast<int>(ProtoId::kSimple);

// Latency (us) every operation pays once, per algorithm and protocol [LL, LL128, Simple].
constexpr double kBaseLat[kAlgos][kProtos] = {
    {6.8, 14.0, 8.4},  // Tree
    {6.6, 14.0, 8.4},  // Ring
    {0, 0, 0},         // CollNetDirect
    {0, 0, 0},         // CollNetChain
    {0, 0, 0},         // NVLS
    {0, 0, 0},         // NVLSTree
    {8, 8, 8},         // PAT
};

// Per-hop latency (us) by the hardware a hop crosses.
enum Hw { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };
constexpr double kHwLat[3][kAlgos][kProtos] = {
    // NVLink
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    // PCI
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    // Network
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}},
};

// Bandwidth caps (GB/s) [GPU arch][1 node, 2 nodes, >= 3 nodes]. llMaxBw's row is the GPU arch on one node but the
// CPU class across nodes (row 0 Intel/other, row 1 AMD): NCCL's table, indexed that way on purpose.
constexpr double kLlMaxBw[kGpuArchs][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[kGpuArchs][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
constexpr double kPerChMaxTreeLL128Bw[kGpuArchs][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[kGpuArchs][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTreeBw[kGpuArchs][3] = {{0, 0, 0}, {0, 0, 0}, {0, 57.7, 45.5}, {0, 96.0, 80.0}};
// NVLS reduces in the switch at this fraction of the link (Hopper, Blackwell; nothing before).
constexpr double kNvlsEfficiency[kGpuArchs] = {0, 0, 0.85, 0.74};

// Trees fall short of the model for medium sizes; NCCL scales their AllReduce bandwidth by this measured curve,
// indexed by log2(nBytes / 64) (64 B .. 512 MB), per protocol [LL, LL128, Simple].
constexpr int kTreeCorrectionSizes = 24;
constexpr double kTreeCorrection[kProtos][kTreeCorrectionSizes] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
};

// Ops NCCL batches into one work batch (1 KiB of 128-byte work structs): non-ring latency is paid once per batch.
constexpr int kMaxDevWorkBatchColls = 8;

int log2Floor(double v) {
  int r = 0;
  while (v >= 2) {
    v /= 2;
    ++r;
  }
  return r;
}

int nsteps(FilterColl c, int nRanks) {
  switch (c) {
    case FilterColl::kAllReduce:
      return 2 * (nRanks - 1);
    case FilterColl::kAllGather:
    case FilterColl::kReduceScatter:
      return nRanks - 1;
    default:
      return nRanks;
  }
}

bool isAgRs(FilterColl c) {
  return c == FilterColl::kAllGather || c == FilterColl::kReduceScatter;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The bus bandwidth of an enabled pair (before the bus -> algorithm conversion).
double busBandwidth(const GpuModelInput& in, FilterColl c, int a, int p) {
  const GraphFigures& gr = in.graphs[static_cast<size_t>(a)];
  const int arch = static_cast<int>(gpuArchOf(in.minSm));
  const int scale = in.nNodes <= 2 ? in.nNodes - 1 : 2;
  const int llRow = in.nNodes == 1 ? arch : (in.cpuVendor == CpuVendor::kAmd ? 1 : 0);
  const GpuConstants& k = in.k();
  const double llMaxBw = k.llMaxBw[llRow][scale];
  const double ppn = static_cast<double>(in.nRanks) / in.nNodes;
  const bool collNet = a == kCollNetDirect || a == kCollNetChain;
  double bw = in.nNodes <= 2 || collNet ? gr.bwIntra : gr.bwInter;
  if (a == kNvls || a == kNvlsTree) {
    if (gr.nChannels < 2) return 0;
    double intraBw = gr.bwIntra * kNvlsEfficiency[arch] * (gr.nChannels - 1) / gr.nChannels;
    intraBw *= c == FilterColl::kAllReduce ? 2.0 : (ppn - 1) / ppn;
    const double interBw = a == kNvlsTree && in.nNodes <= 2 ? 2 * gr.bwInter : gr.bwInter;
    bw = std::min(intraBw, interBw);
    if (a == kNvlsTree) bw = std::min(bw, k.perChMaxNvlsTreeBw[arch][scale]);
  }
  double busBw = gr.nChannels * bw;
  if (a == kRing && p == kLL) busBw = std::min(llMaxBw, 0.5 * busBw);
  if (a == kRing && p == kLL128) busBw = std::min(0.92 * busBw, gr.nChannels * k.perChMaxRingLL128Bw[arch][scale]);
  if (a == kTree && c == FilterColl::kAllReduce)
    busBw = std::min(0.92 * busBw, gr.nChannels * k.perChMaxTreeBw[arch][scale]);
  if (a == kTree && p == kLL) busBw = std::min(busBw / 3.8, llMaxBw);
  if (a == kTree && p == kLL128) {
    busBw = std::min(busBw * (in.nNodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                     gr.nChannels * k.perChMaxTreeLL128Bw[arch][scale]);
  }
  if (a == kTree && gr.plainTree) busBw *= 0.85;
  if (a == kPat) busBw *= 0.75;
  if (collNet && p != kSimple) busBw = 0;
  if (a == kCollNetDirect) {
    if (isAgRs(c)) {
      busBw = ppn * std::min(gr.bwIntra, 0.9 * gr.bwInter);
    } else {
      double f = ppn / std::max(1, gr.nChannels);  // GPUs per NIC
      f -= (f - 1) / 2;
      busBw /= f;
      if (in.minSm >= 90) busBw *= 0.85;
    }
  }
  return busBw;
}

double latencyOf(const GpuModelInput& in, FilterColl c, int a, int p) {
  const GraphFigures& gr = in.graphs[static_cast<size_t>(a)];
  const int n = in.nRanks, nodes = in.nNodes;
  const int ppnInt = in.ppn();
  const int intraHw = gr.typeIntra == PathType::kNvl ? kHwNvlink : kHwPci;
  const int hw = nodes == 1 ? intraHw : kHwNet;
  const GpuConstants& k = in.k();
  double hwLatPciTreeSimple = k.hwLat[kHwPci][kTree][kSimple];
  // Power CPUs: PCI Tree/Simple as cheap as Ring's, so trees win there (NCCL's de-penalisation).
  if (in.cpuArch == CpuArch::kPower) hwLatPciTreeSimple = k.hwLat[kHwPci][kRing][kSimple];
  auto hwLat = [&](int h, int alg, int pr) {
    if (h == kHwPci && alg == kTree && pr == kSimple) return hwLatPciTreeSimple;
    return k.hwLat[h][alg][pr];
  };
  double lat = k.baseLat[a][p];
  double intraLat = hwLat(intraHw, a, p);
  // One rank per node exposes the network latency fully: use the tree's figure.
  double interLat = (ppnInt == 1 ? hwLat(kHwNet, kTree, p) : hwLat(kHwNet, a, p)) + gr.latencyInter;
  if (p == kSimple) interLat += gr.latencyInter;  // the flush after a GDR receive
  const int log2Nodes = log2Floor(nodes);
  const int steps = nsteps(c, n);
  switch (a) {
    case kRing:
      if (c == FilterColl::kBroadcast || c == FilterColl::kReduce) {
        double l = hwLat(hw, a, p);
        if (gr.sameChannels) return lat + l;
        if (p == kSimple) l = hwLat(hw, kTree, p);
        return lat + steps * l;
      } else {
        double netOverhead = 0;
        if (nodes > 1) {
          netOverhead = in.cpuArch == CpuArch::kX86 && in.cpuVendor == CpuVendor::kAmd ? 2.0 : 1.0;
          if (p == kSimple) netOverhead *= 3;
        }
        intraLat = std::max(intraLat, netOverhead);
        const int interSteps = nodes == 1 ? 0 : c == FilterColl::kAllReduce ? 2 * (nodes - 1) : nodes - 1;
        return lat + (steps - interSteps) * intraLat + interSteps * interLat;
      }
    case kTree:
      return lat + 2 * ((ppnInt - 1) * intraLat + log2Nodes * interLat);
    case kCollNetDirect:
      return lat + 2 * (std::min(1, ppnInt - 1) * intraLat + (ppnInt - 1) * 0.4) + interLat;
    case kCollNetChain:
      return lat + 2 * (ppnInt - 1) * intraLat + interLat;
    case kNvls:
      return intraLat + (nodes > 1 ? interLat : 0);
    case kNvlsTree:
      return lat + intraLat + 2 * log2Nodes * interLat;
    case kPat:
      return 8 + log2Nodes * interLat / 3.5 + 2.8 * n;
    default:
      return lat;
  }
}

}  // namespace

const GpuConstants& ncclGpuConstants() {
  static const GpuConstants c = [] {
    GpuConstants k{};
    std::memcpy(k.baseLat, kBaseLat, sizeof(k.baseLat));
    std::memcpy(k.hwLat, kHwLat, sizeof(k.hwLat));
    std::memcpy(k.llMaxBw, kLlMaxBw, sizeof(k.llMaxBw));
    std::memcpy(k.perChMaxRingLL128Bw, kPerChMaxRingLL128Bw, sizeof(k.perChMaxRingLL128Bw));
    std::memcpy(k.perChMaxTreeLL128Bw, kPerChMaxTreeLL128Bw, sizeof(k.perChMaxTreeLL128Bw));
    std::memcpy(k.perChMaxTreeBw, kPerChMaxTreeBw, sizeof(k.perChMaxTreeBw));
    std::memcpy(k.perChMaxNvlsTreeBw, kPerChMaxNvlsTreeBw, sizeof(k.perChMaxNvlsTreeBw));
    return k;
  }();
  return c;
}

GpuArch gpuArchOf(int sm) {
  if (sm >= 100) return GpuArch::kBlackwell;
  if (sm >= 90) return GpuArch::kHopper;
  if (sm >= 80) return GpuArch::kAmpere;
  return GpuArch::kVolta;
}

std::string disabledReason(const GpuModelInput& in, FilterColl c, AlgoId algo, ProtoId proto) {
  const int a = static_cast<int>(algo), p = static_cast<int>(proto);
  if (in.nRanks < 2) return "one rank (a copy)";
  if ((c == FilterColl::kBroadcast || c == FilterColl::kReduce) && a != kRing)
    return "not an algorithm of this collective";
  if (isAgRs(c) && a != kRing && a != kPat && a != kNvls && a != kCollNetDirect)
    return "not an algorithm of this collective";
  if (c == FilterColl::kAllReduce && a == kPat) return "not an algorithm of this collective";
  if ((a == kNvls || a == kNvlsTree || a == kCollNetDirect || a == kCollNetChain || a == kPat) && p != kSimple)
    return "Simple only";
  if (a == kPat && !in.patEnable) return "NCCL_PAT_ENABLE=0";
  if (a == kPat && in.ppn() != 1) return "PAT needs one rank per node";
  if (a == kNvlsTree && in.nNodes == 1) return "NVLSTree needs several nodes";
  if ((a == kNvls || a == kNvlsTree) && !in.nvlsSupport) return "needs NVLS (NVSwitch, sm90+)";
  if ((a == kCollNetDirect || a == kCollNetChain) && !in.collNetSupport) return "needs a CollNet plugin";
  if (a == kNvls && in.nNodes > 1 && !in.collNetSupport) return "NVLS across nodes needs a CollNet plugin";
  if (a == kNvls && c != FilterColl::kAllReduce && in.ppn() > 32) return "NVLS needs <= 32 local ranks";
  if (a == kCollNetDirect && in.ppn() > 8) return "CollNetDirect needs <= 8 local ranks";
  const GraphFigures& gr = in.graphs[static_cast<size_t>(a)];
  if (gr.nChannels == 0) return "no graph";
  if (p == kLL128) {
    if (in.ll128Setting == 0) return "NCCL_LL128=0";
    if (in.ll128Setting == 2) {
      // NCCL enables LL128 by default only where it was validated: NVLink inside nodes (NVB at worst), NICs at
      // most a PCIe switch away (PXN on sm90+), one GPU generation (or all sm90+), sm70+. Elsewhere it can corrupt.
      const bool inter = gr.typeInter <= PathType::kPxb || (in.minSm >= 90 && gr.typeInter <= PathType::kPxn);
      if (!inter) return std::string("LL128 path rule (typeInter ") + pathTypeName(gr.typeInter) + ")";
      if (gr.typeIntra > PathType::kNvb)
        return std::string("LL128 path rule (typeIntra ") + pathTypeName(gr.typeIntra) + ")";
      if (in.minSm != in.maxSm && in.minSm < 90) return "LL128 needs one GPU generation";
      if (in.minSm < 70) return "LL128 needs sm70+";
    }
  }
  if (!in.algoFilter.allows(c, a)) return "NCCL_ALGO";
  if (!in.protoFilter.allows(c, p)) return "NCCL_PROTO";
  return "";
}

GpuModel buildGpuModel(const GpuModelInput& in) {
  GpuModel m;
  m.in = in;
  for (int ci = 0; ci < kFilterColls; ++ci) {
    const FilterColl c = static_cast<FilterColl>(ci);
    for (int a = 0; a < kAlgos; ++a) {
      for (int p = 0; p < kProtos; ++p) {
        if (!disabledReason(in, c, static_cast<AlgoId>(a), static_cast<ProtoId>(p)).empty()) continue;
        const double bus = busBandwidth(in, c, a, p);
        if (bus <= 0) continue;
        // Bus -> algorithm bandwidth: rings and NVLS move nsteps/nRanks of the buffer per rank; trees and the
        // others 2x (up and down), except non-ring AllGather/ReduceScatter, whose figure already is per buffer.
        double ratio = 1.0;
        if (!(a != kRing && isAgRs(c))) {
          ratio = (a == kRing || a == kNvls || a == kNvlsTree) ? static_cast<double>(in.nRanks) / nsteps(c, in.nRanks)
                                                               : 0.5;
        }
        m.busBw[ci][a][p] = bus;
        m.algBw[ci][a][p] = bus * ratio;
        m.latency[ci][a][p] = latencyOf(in, c, a, p);
      }
    }
  }
  return m;
}

double treeCorrection(ProtoId p, size_t nBytes) {
  if (nBytes < 64) return 1.0;
  const int idx = log2Floor(static_cast<double>(nBytes >> 6));
  if (idx >= kTreeCorrectionSizes) return 1.0;
  return kTreeCorrection[static_cast<int>(p)][idx];
}

double predictGpuUs(const GpuModel& m, FilterColl c, AlgoId algo, ProtoId proto, size_t nBytes, int numPipeOps) {
  const int ci = static_cast<int>(c), a = static_cast<int>(algo), p = static_cast<int>(proto);
  double bw = m.algBw[ci][a][p];
  if (bw <= 0) return -1;
  double lat = m.latency[ci][a][p];
  if (a == kTree && c == FilterColl::kAllReduce) bw *= treeCorrection(proto, nBytes);
  // Multi-node ring AllReduce reaches its plateau later than the model says once every rank's slice of every
  // channel holds a few lines: NCCL raises its latency (x1.9 before Ampere).
  if (a == kRing && p == kSimple && m.in.nNodes > 1 && c == FilterColl::kAllReduce && m.in.commChannels > 0 &&
      nBytes / (static_cast<size_t>(m.in.commChannels) * static_cast<size_t>(m.in.nRanks)) >= 64) {
    lat *= m.in.minSm < 80 ? 1.9 : 1.4;
  }
  const int latCount = a == kRing ? numPipeOps : (numPipeOps + kMaxDevWorkBatchColls - 1) / kMaxDevWorkBatchColls;
  return lat * latCount + static_cast<double>(nBytes) / (1000.0 * bw);
}

GpuChoice selectGpu(const GpuModel& m, FilterColl c, size_t nBytes, int numPipeOps) {
  GpuChoice best;
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      const double t = predictGpuUs(m, c, static_cast<AlgoId>(a), static_cast<ProtoId>(p), nBytes, numPipeOps);
      if (t >= 0 && (best.timeUs < 0 || t < best.timeUs)) {
        best.algo = static_cast<AlgoId>(a);
        best.proto = static_cast<ProtoId>(p);
        best.timeUs = t;
      }
    }
  }
  return best;
}

Result<FilterColl> parseGpuColl(const std::string& name) {
  std::string s;
  for (char ch : lower(name)) {
    if (ch != '_' && ch != '-') s += ch;
  }
  for (int c = 0; c < kFilterColls; ++c) {
    if (s == filterCollName(static_cast<FilterColl>(c))) return static_cast<FilterColl>(c);
  }
  return invalidUsage("unknown collective '%s' (allreduce, allgather, reducescatter, broadcast, reduce)", name.c_str());
}

Result<GpuModelInput> gpuModelInputFrom(const TopoGraph& g, const HostGraphs& graphs, int nNodes) {
  if (nNodes < 1) return invalidUsage("gpu model: %d nodes", nNodes);
  const auto& gpuNodes = g.nodesOf(NodeType::kGpu);
  if (gpuNodes.empty()) return invalidUsage("gpu model: the topology has no GPU");
  GpuModelInput in;
  in.nNodes = nNodes;
  in.nRanks = static_cast<int>(gpuNodes.size()) * nNodes;
  in.minSm = 1 << 30;
  in.maxSm = 0;
  for (int i : gpuNodes) {
    in.minSm = std::min(in.minSm, g.node(i).sm);
    in.maxSm = std::max(in.maxSm, g.node(i).sm);
  }
  // CPU class: AMD if any CPU is AMD (NCCL treats a mix like AMD), Power/ARM by arch.
  bool amd = false, intel = false;
  for (int i : g.nodesOf(NodeType::kCpu)) {
    const TopoNode& cpu = g.node(i);
    amd = amd || cpu.vendor == "AuthenticAMD";
    intel = intel || cpu.vendor == "GenuineIntel";
    if (cpu.arch == "ppc64" || cpu.arch == "ppc64le") in.cpuArch = CpuArch::kPower;
    if (cpu.arch == "arm64" || cpu.arch == "aarch64") in.cpuArch = CpuArch::kArm;
  }
  in.cpuVendor = amd ? CpuVendor::kAmd : intel ? CpuVendor::kIntel : CpuVendor::kOther;
  // Every node runs the same graphs here; the communicator's channels come from the real postset (rings over all
  // nodes), so the figures are the aggregated ones NCCL tunes with.
  std::vector<RankPlacement> ranks;
  for (int n = 0; n < nNodes; ++n) {
    for (int i : gpuNodes) ranks.push_back({n, g.node(i).dev, -1});
  }
  std::vector<HostGraphs> perNode(static_cast<size_t>(nNodes), graphs);
  auto ch = buildCommChannels(perNode, ranks);
  if (!ch.isOk()) return ch.status();
  in.commChannels = ch.value().nChannels;
  auto figures = [](const SearchedGraph& sg) {
    GraphFigures f;
    f.nChannels = sg.nChannels;
    f.bwIntra = sg.bwIntra;
    f.bwInter = sg.bwInter;
    f.typeIntra = sg.typeIntra;
    f.typeInter = sg.typeInter;
    f.sameChannels = sg.sameChannels;
    // braid's NET nodes do not keep the NIC's latency attribute; NCCL's IB and socket plugins report 0.
    f.latencyInter = 0;
    return f;
  };
  GraphFigures ring = figures(graphs.ring);
  ring.bwIntra = ch.value().bwIntra;
  ring.bwInter = ch.value().bwInter;
  ring.typeIntra = ch.value().typeIntra;
  ring.typeInter = ch.value().typeInter;
  GraphFigures tree = figures(graphs.tree);
  tree.plainTree = graphs.tree.pattern == GraphPattern::kTree;
  const GraphFigures nvls = figures(graphs.nvls);
  in.graphs[kRing] = ring;
  in.graphs[kTree] = tree;
  in.graphs[kPat] = tree;  // NCCL runs PAT on the tree's graph
  in.graphs[kNvls] = nvls;
  in.graphs[kNvlsTree] = nvls;
  in.graphs[kCollNetDirect] = ring;  // no collnet search in braid (no plugin): placeholders, never enabled
  in.graphs[kCollNetChain] = ring;
  in.nvlsSupport = graphs.nvls.nChannels > 0;
  in.allNvlink = gpuNodes.size() > 1 && allJoinedByNvlink(g, gpuNodes);
  return in;
}

bool allJoinedByNvlink(const TopoGraph& g, const std::vector<int>& gpuNodes) {
  for (int i : gpuNodes) {
    for (int j : gpuNodes) {
      if (i != j && g.path(i, j).type != PathType::kNvl) return false;
    }
  }
  return true;
}

void restrictToBraidGpu(GpuModelInput* in) {
  in->ll128Setting = 0;
  in->nvlsSupport = false;
  in->collNetSupport = false;
  in->patEnable = false;
}

DirectGpuShape directShapeOf(const GpuModelInput& in) {
  DirectGpuShape s;
  s.nRanks = in.nRanks;
  s.nNodes = in.nNodes;
  s.minSm = in.minSm;
  s.lanes = in.directLanes;
  s.byModel = in.directByModel;
  s.allNvlink = in.allNvlink;
  return s;
}

std::string describeGpuModel(const GpuModel& m, FilterColl c) {
  const int ci = static_cast<int>(c);
  std::string out = strPrintf("# %s over %d ranks, %d node(s), sm%d, %d channels: NCCL's model\n", filterCollName(c),
                              m.in.nRanks, m.in.nNodes, m.in.minSm, m.in.commChannels);
  out += strPrintf("%-14s %-7s %9s %9s %10s\n", "algorithm", "proto", "busBw", "algBw", "latency");
  out += strPrintf("%-14s %-7s %9s %9s %10s\n", "", "", "(GB/s)", "(GB/s)", "(us)");
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      const std::string why = disabledReason(m.in, c, static_cast<AlgoId>(a), static_cast<ProtoId>(p));
      if (why == "not an algorithm of this collective" || why == "Simple only") continue;
      const char* an = algoNames()[static_cast<size_t>(a)].c_str();
      const char* pn = protoNames()[static_cast<size_t>(p)].c_str();
      if (m.algBw[ci][a][p] > 0) {
        out += strPrintf("%-14s %-7s %9.1f %9.1f %10.1f\n", an, pn, m.busBw[ci][a][p], m.algBw[ci][a][p],
                         m.latency[ci][a][p]);
      } else {
        out += strPrintf("%-14s %-7s %9s %9s %10s  off: %s\n", an, pn, "-", "-", "-",
                         why.empty() ? "no bandwidth" : why.c_str());
      }
    }
  }
  return out;
}

std::string describeGpuSweep(const GpuModel& m, FilterColl c, size_t minBytes, size_t maxBytes, size_t factor) {
  if (factor < 2) factor = 2;
  const int ci = static_cast<int>(c);
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      if (m.algBw[ci][a][p] > 0) pairs.emplace_back(a, p);
    }
  }
  std::string out =
      strPrintf("# predicted time (us) of %s per algorithm/protocol by bytes (the largest buffer), and the choice\n",
                filterCollName(c));
  out += strPrintf("%12s", "bytes");
  for (const auto& ap : pairs) {
    const std::string name =
        algoNames()[static_cast<size_t>(ap.first)] + "/" + protoNames()[static_cast<size_t>(ap.second)];
    out += strPrintf(" %13s", name.c_str());
  }
  out += "  choice\n";
  for (size_t bytes = minBytes; bytes <= maxBytes && bytes > 0; bytes *= factor) {
    out += strPrintf("%12zu", bytes);
    for (const auto& ap : pairs) {
      out += strPrintf(" %13.1f",
                       predictGpuUs(m, c, static_cast<AlgoId>(ap.first), static_cast<ProtoId>(ap.second), bytes));
    }
    const GpuChoice ch = selectGpu(m, c, bytes);
    if (ch.timeUs < 0) {
      out += "  none\n";
    } else {
      out += strPrintf("  %s/%s\n", algoNames()[static_cast<size_t>(ch.algo)].c_str(),
                       protoNames()[static_cast<size_t>(ch.proto)].c_str());
    }
    if (bytes > maxBytes / factor) break;
  }
  return out;
}

}  // namespace braid
