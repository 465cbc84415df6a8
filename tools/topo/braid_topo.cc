// braid-topo: the detected (or loaded) topology, its path matrix, the searched rings and trees, the channels a
// communicator over N such hosts would use, and a Graphviz picture of it all.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "algorithms/selector/gpu_model.h"
#include "algorithms/selector/selector.h"
#include "src/common/params.h"
#include "topology/topo.h"
#include "topology/topo_channels.h"
#include "topology/topo_dot.h"
#include "topology/topo_init.h"
#include "topology/topo_search.h"

namespace {

void usage(FILE* f) {
  fprintf(f,
          "usage: braid-topo [options]\n"
          "  (default)            discover this machine (hwloc), or load NCCL_TOPO_FILE / BRAID_HWLOC_XML when set\n"
          "  --topo FILE          load an NCCL topology XML (same as NCCL_TOPO_FILE, without merging discovery)\n"
          "  --hwloc-xml FILE     discover from an hwloc XML export (same as BRAID_HWLOC_XML)\n"
          "  --nodes N            channels of a communicator over N such hosts, one rank per GPU (default 1)\n"
          "  --dot FILE           write Graphviz (the machine, rings and tree 0) to FILE ('-' = stdout only)\n"
          "  --dump FILE          write the topology XML (as NCCL_TOPO_DUMP_FILE would)\n"
          "  --graph-dump FILE    write the searched graphs (as NCCL_GRAPH_DUMP_FILE would)\n"
          "  --quiet              no text report (with --dot -)\n"
          "  --tune               NCCL's tuning model over the searched graphs instead of the report: busBw and\n"
          "                       latency per algorithm/protocol, then predicted times and the choice, 8 B .. 8 GB\n"
          "  --coll NAME          with --tune: allreduce (default), allgather, reducescatter, broadcast, reduce, all\n"
          "  --factor F           with --tune: size step (default 4)\n"
          "NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_NET_GDR_LEVEL, NCCL_PXN_DISABLE, NCCL_CROSS_NIC,\n"
          "NCCL_GRAPH_FILE and NCCL_HOSTID apply as in the library; with --tune, NCCL_ALGO and NCCL_PROTO too.\n");
}

int fail(const braid::Status& s) {
  fprintf(stderr, "braid-topo: %s\n", s.message().c_str());
  return 1;
}

// What a braid CUDA communicator over these GPUs would run (the library's own selector, so the two agree): the
// FIFO path's choice from NCCL's model restricted to what braid runs on GPUs, and the NVLS-style path priced by
// NCCL's symmetric-kernel model with the channels a communicator takes by default (BRAID_CPU_NCHANNELS within
// NCCL_MIN/MAX_NCHANNELS) as lanes. BRAID_GPU_DIRECT_AUTO, BRAID_DIRECT and BRAID_DETERMINISTIC apply; tuning files
// and plugins do not.
std::string describeBraidSweep(const braid::GpuModelInput& nccl, braid::FilterColl c, size_t factor) {
  braid::CollKind kind = braid::CollKind::kAllReduce;
  if (c == braid::FilterColl::kAllGather) kind = braid::CollKind::kAllGather;
  if (c == braid::FilterColl::kReduceScatter) kind = braid::CollKind::kReduceScatter;
  if (c == braid::FilterColl::kBroadcast) kind = braid::CollKind::kBroadcast;
  if (c == braid::FilterColl::kReduce) kind = braid::CollKind::kReduce;
  int64_t lanes = std::max<int64_t>(1, braid::params::CpuChannels());
  const braid::Result<int64_t> lo = braid::getIntParam(braid::params::kMinNChannels);
  const braid::Result<int64_t> hi = braid::getIntParam(braid::params::kMaxNChannels);
  if (lo.isOk() && lo.value() > 0) lanes = std::max(lanes, lo.value());
  if (hi.isOk() && hi.value() > 0) lanes = std::min(lanes, hi.value());
  braid::GpuModelInput in = nccl;
  braid::restrictToBraidGpu(&in);
  in.commChannels = static_cast<int>(lanes);
  in.directLanes = static_cast<int>(lanes);
  in.directByModel = braid::params::GpuDirectAuto() == 1;
  braid::SelectorConfig sc;
  sc.nranks = in.nRanks;
  sc.nNodes = in.nNodes;
  sc.algo = in.algoFilter;
  sc.proto = in.protoFilter;
  sc.deterministic = braid::params::Deterministic() != 0;
  sc.gpu = std::make_shared<const braid::GpuModel>(braid::buildGpuModel(in));
  braid::Selector sel(std::move(sc));
  sel.setDirect(in.nNodes == 1 && braid::params::Direct() != 0);
  const braid::DirectGpuShape shape = braid::directShapeOf(in);
  const char* why = braid::directGpuUnpriced(shape, c);
  std::string out = braid::strPrintf(
      "# what braid runs on these GPUs (%d ranks, %d channels): the FIFO path as NCCL's model picks among braid's GPU "
      "kernels, the NVLS-style path (%s)%s\n%12s %13s %13s  choice\n",
      in.nRanks, static_cast<int>(lanes),
      *why != '\0' ? why : braid::strPrintf("%d lanes, peer pointers", shape.lanes).c_str(),
      c == braid::FilterColl::kAllGather || c == braid::FilterColl::kReduceScatter ? "; bytes per rank" : "", "bytes",
      "FIFO", "NVLS-style");
  for (size_t bytes = 8; bytes <= (size_t{8} << 30); bytes *= factor) {
    const braid::FifoChoice fifo = sel.chooseFifo(kind, bytes);
    const braid::FifoChoice run = sel.chosen(kind, bytes);
    out += braid::strPrintf("%12zu %13.1f %13.1f  %s/%s\n", bytes, fifo.predictedUs,
                            braid::predictDirectGpuUs(shape, c, bytes), braid::algoName(run.algo),
                            braid::protoName(run.proto));
    if (bytes > (size_t{8} << 30) / factor) break;
  }
  return out;
}

// --tune: NCCL's tuning tables and choices for a communicator over `nodes` such hosts, one rank per GPU.
int printTuning(const braid::TopoGraph& g, const braid::HostGraphs& graphs, int nodes, const std::string& collName,
                int factor) {
  if (factor < 2) {
    fprintf(stderr, "braid-topo: --factor must be >= 2\n");
    return 2;
  }
  auto inR = braid::gpuModelInputFrom(g, graphs, nodes);
  if (!inR.isOk()) return fail(inR.status());
  braid::GpuModelInput in = inR.take();
  auto algo = braid::parseFilter(braid::params::Algo(), braid::algoNames(), "NCCL_ALGO");
  if (!algo.isOk()) return fail(algo.status());
  auto proto = braid::parseFilter(braid::params::Proto(), braid::protoNames(), "NCCL_PROTO");
  if (!proto.isOk()) return fail(proto.status());
  in.algoFilter = algo.take();
  in.protoFilter = proto.take();
  std::vector<braid::FilterColl> colls;
  if (collName == "all") {
    for (int c = braid::kFilterColls - 1; c >= 0; --c) colls.push_back(static_cast<braid::FilterColl>(c));
  } else {
    auto c = braid::parseGpuColl(collName);
    if (!c.isOk()) return fail(c.status());
    colls.push_back(c.value());
  }
  const braid::GpuModel m = braid::buildGpuModel(in);
  printf("# graphs: ring %d x %.1f/%.1f GB/s %s/%s, tree %d x %.1f/%.1f, nvls %d heads x %.1f/%.1f\n",
         in.graphs[1].nChannels, in.graphs[1].bwIntra, in.graphs[1].bwInter,
         braid::pathTypeName(in.graphs[1].typeIntra), braid::pathTypeName(in.graphs[1].typeInter),
         in.graphs[0].nChannels, in.graphs[0].bwIntra, in.graphs[0].bwInter, in.graphs[4].nChannels,
         in.graphs[4].bwIntra, in.graphs[4].bwInter);
  for (braid::FilterColl c : colls) {
    printf("\n%s\n", braid::describeGpuModel(m, c).c_str());
    printf("%s", braid::describeGpuSweep(m, c, 8, size_t{8} << 30, static_cast<size_t>(factor)).c_str());
    printf("%s", describeBraidSweep(in, c, static_cast<size_t>(factor)).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string topoFile, hwlocXml, dotFile, dumpFile, graphDump;
  int nodes = 1;
  bool quiet = false, tune = false;
  std::string collName = "allreduce";
  int factor = 4;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* what) -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "braid-topo: %s needs %s\n", a.c_str(), what);
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--topo") {
      topoFile = next("a file");
    } else if (a == "--hwloc-xml") {
      hwlocXml = next("a file");
    } else if (a == "--nodes") {
      nodes = atoi(next("a count").c_str());
    } else if (a == "--dot") {
      dotFile = next("a file");
    } else if (a == "--dump") {
      dumpFile = next("a file");
    } else if (a == "--graph-dump") {
      graphDump = next("a file");
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--tune") {
      tune = true;
    } else if (a == "--coll") {
      collName = next("a collective");
    } else if (a == "--factor") {
      factor = atoi(next("a factor").c_str());
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (nodes < 1 || nodes > 4096) {
    fprintf(stderr, "braid-topo: --nodes must be 1..4096\n");
    return 2;
  }
  auto optsR = braid::topoOptionsFromParams();
  if (!optsR.isOk()) return fail(optsR.status());
  braid::TopoOptions opts = optsR.take();
  if (!topoFile.empty()) {
    opts.topoFile = topoFile;
    opts.mergeDiscovery = false;
  }
  if (!hwlocXml.empty()) {
    opts.hwlocXml = hwlocXml;
    if (topoFile.empty()) opts.topoFile.clear();
  }
  auto sysR = braid::discoverOrLoad(opts);
  if (!sysR.isOk()) return fail(sysR.status());
  const braid::TopoSystem& sys = sysR.value();
  const braid::TopoGraph& g = sys.graph;
  if (!dumpFile.empty()) {
    braid::Status s = braid::dumpTopo(sys, dumpFile);
    if (!s.isOk()) return fail(s);
  }
  auto graphsR = braid::computeHostGraphs(sys, nodes > 1, 0);
  if (!graphsR.isOk()) return fail(graphsR.status());
  const braid::HostGraphs& graphs = graphsR.value();
  if (!graphDump.empty()) {
    braid::Status s = braid::writeXmlFile(*braid::graphsToXml({&graphs.ring, &graphs.tree}), graphDump);
    if (!s.isOk()) return fail(s);
  }

  if (tune) return printTuning(g, graphs, nodes, collName, factor);
  if (!quiet) {
    printf("# topology of host %s, from %s\n", sys.hostId.c_str(), sys.source.c_str());
    printf("# %zu GPUs, %zu NICs, %zu NUMA nodes, %zu PCI switches%s\n\n", g.nodesOf(braid::NodeType::kGpu).size(),
           g.nodesOf(braid::NodeType::kNet).size(), g.nodesOf(braid::NodeType::kCpu).size(),
           g.nodesOf(braid::NodeType::kPci).size(), g.nvlsCapable() ? ", NVLS capable" : "");
    printf("## System (links: type[GB/s] - peer)\n%s\n", g.describe().c_str());
    printf("## Paths (type/GB/s)\n%s\n", g.describePaths().c_str());
    printf("## Ring graph%s\n%s\n", nodes > 1 ? " (inter-node)" : "", braid::describeGraph(graphs.ring).c_str());
    printf("## Tree graph\n%s\n", braid::describeGraph(graphs.tree).c_str());
    if (graphs.nvls.nChannels > 0) {
      printf("## NVLS: %d heads, bw %.1f/%.1f\n\n", graphs.nvls.nChannels, graphs.nvls.bwIntra, graphs.nvls.bwInter);
    }
    if (!g.nodesOf(braid::NodeType::kNet).empty() && !g.nodesOf(braid::NodeType::kGpu).empty()) {
      printf("## NIC per GPU and channel (rail-aligned)\n");
      for (int i : g.nodesOf(braid::NodeType::kGpu)) {
        int dev = g.node(i).dev;
        printf("GPU/%d:", dev);
        for (int c = 0; c < 8; ++c) printf(" %d", braid::netForGpu(g, dev, c));
        printf("\n");
      }
      printf("\n");
    }
    // One rank per GPU (or one per NUMA node on a host without GPUs) on each of `nodes` identical hosts.
    std::vector<braid::RankPlacement> ranks;
    size_t perHost = g.nodesOf(braid::NodeType::kGpu).size();
    bool gpus = perHost > 0;
    if (!gpus) perHost = g.nodesOf(braid::NodeType::kCpu).size();
    for (int n = 0; n < nodes; ++n) {
      for (size_t k = 0; k < perHost; ++k) {
        int dev = gpus ? g.node(g.nodesOf(braid::NodeType::kGpu)[k]).dev : -1;
        int numa = gpus ? -1 : static_cast<int>(g.node(g.nodesOf(braid::NodeType::kCpu)[k]).id);
        ranks.push_back({n, dev, numa});
      }
    }
    std::vector<braid::HostGraphs> perNode(static_cast<size_t>(nodes), graphs);
    auto ch = braid::buildCommChannels(perNode, ranks);
    if (!ch.isOk()) return fail(ch.status());
    printf("## Channels of a communicator over %d host(s), %zu ranks\n", nodes, ranks.size());
    for (const std::string& line : braid::ringLogLines(ch.value())) printf("%s\n", line.c_str());
    printf("%s\n", braid::treeLogLine(ch.value(), 0).c_str());
  }
  if (!dotFile.empty()) {
    braid::DotOptions d;
    d.title = "braid-topo: " + sys.source;
    std::string dot = braid::topoToDot(g, &graphs, d);
    if (dotFile == "-") {
      fputs(dot.c_str(), stdout);
    } else {
      FILE* f = fopen(dotFile.c_str(), "w");
      if (!f || fputs(dot.c_str(), f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "braid-topo: cannot write %s\n", dotFile.c_str());
        return 1;
      }
    }
  }
  return 0;
}
