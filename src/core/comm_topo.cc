#include "src/core/comm_topo.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "algorithms/selector/gpu_model.h"
#include "algorithms/tree/tree.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "topology/topo.h"
#include "topology/topo_init.h"
#include "transports/transport.h"

namespace braid {
namespace {

// What each rank says before the topologies move: its NUMA node and how big its host's blob is (0 unless it is
// its host's first rank, the one that sends the blob).
struct TopoHeader {
  int32_t numa;
  int32_t pad;
  int64_t blobBytes;
};

// A gathered blob may not exceed this: NCCL_TOPO_FILEs of real machines are tens of KB.
constexpr int64_t kMaxBlobBytes = int64_t{4} << 20;

std::vector<int> processCpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

}  // namespace

Result<std::vector<std::vector<int>>> ringsForChannels(const CommChannels& search, int nch, int nranks) {
  if (search.rings.empty()) return internalError("the topology search made no ring");
  for (size_t c = 0; c < search.rings.size(); ++c) {
    std::vector<int> sorted = search.rings[c];
    std::sort(sorted.begin(), sorted.end());
    bool perm = static_cast<int>(sorted.size()) == nranks;
    for (int i = 0; perm && i < nranks; ++i) perm = sorted[static_cast<size_t>(i)] == i;
    if (!perm) return internalError("the topology search's ring %zu does not visit each of %d ranks once", c, nranks);
  }
  std::vector<std::vector<int>> out;
  for (int c = 0; c < nch; ++c) out.push_back(search.rings[static_cast<size_t>(c) % search.rings.size()]);
  return out;
}

std::vector<std::vector<TreeLinks>> commTrees(const CommTopology& topo, const std::vector<int>& order) {
  std::vector<std::vector<TreeLinks>> out;
  if (topo.nNodes > 1 && topo.search.trees.size() >= 2) {
    // buildCommChannels: channels [0, n/2) carry the binary tree, [n/2, n) the mirrored one.
    out.push_back(topo.search.trees[0]);
    out.push_back(topo.search.trees[topo.search.trees.size() / 2]);
    return out;
  }
  const int n = static_cast<int>(order.size());
  for (int w = 0; w < 2; ++w) {
    std::vector<TreeLinks> links(static_cast<size_t>(n));
    for (int pos = 0; pos < n; ++pos) {
      TreeNode t = treeNode(n, pos, w);
      TreeLinks& l = links[static_cast<size_t>(order[static_cast<size_t>(pos)])];
      l.parent = t.parent < 0 ? -1 : order[static_cast<size_t>(t.parent)];
      for (int child : t.children) {
        if (child >= 0) l.children.push_back(order[static_cast<size_t>(child)]);
      }
    }
    out.push_back(std::move(links));
  }
  return out;
}

void logCommChannels(const std::vector<std::vector<int>>& rings, const std::vector<std::vector<TreeLinks>>& trees,
                     int rank) {
  CommChannels used;
  used.nChannels = static_cast<int>(rings.size());
  used.rings = rings;
  CommChannels t;
  t.nChannels = static_cast<int>(trees.size());
  t.trees = trees;
  if (rank == 0) {
    for (const std::string& line : ringLogLines(used)) BRAID_INFO(kLogInit, "%s", line.c_str());
  }
  BRAID_INFO(kLogInit, "%s", treeLogLine(t, rank).c_str());
}

Result<NetShape> measureNetwork(Bootstrap* bs, int rank, int nranks, const CommTopology& topo, const CostModel& costs,
                                double hostHopUs, const std::vector<Transport*>& transports) {
  NetShape shape;
  shape.nNodes = topo.nNodes;
  shape.hostHopUs = hostHopUs;
  const std::vector<int>& first = topo.firstRankOf;
  shape.localRanks = *std::max_element(topo.ranksOn.begin(), topo.ranksOn.end());
  struct Figures {
    double alphaUs;
    double gbps;
  };
  Figures mine{0, 0};
  if (costs.hasNetFigures()) {
    mine = Figures{costs.netFigures().alphaUs, costs.netFigures().betaGBps};
  } else {
    // The network transport answers for its devices (the first of the registry's transports that is a network).
    Result<double> gbps = invalidUsage("no network transport");
    for (Transport* t : transports) {
      if (t->isNetwork()) {
        gbps = t->linkGBps();
        break;
      }
    }
    mine.gbps = gbps.isOk() ? gbps.value() : 10000 / 8e3;  // connecting will report the network's error
    const int node = topo.nodeOf[static_cast<size_t>(rank)];
    if (first[static_cast<size_t>(node)] == rank) {
      const int next = first[static_cast<size_t>((node + 1) % topo.nNodes)];
      const int prev = first[static_cast<size_t>((node + topo.nNodes - 1) % topo.nNodes)];
      constexpr uint32_t kTagPing = 0x30000, kTagPong = 0x30001;
      constexpr int kRounds = 6;
      double best = -1;
      for (int i = 0; i < kRounds; ++i) {
        uint64_t word = static_cast<uint64_t>(i);
        const auto t0 = std::chrono::steady_clock::now();
        BRAID_RETURN_IF_ERROR(bs->send(next, kTagPing, &word, sizeof(word)));
        BRAID_RETURN_IF_ERROR(bs->recv(prev, kTagPing, &word, sizeof(word)));
        BRAID_RETURN_IF_ERROR(bs->send(prev, kTagPong, &word, sizeof(word)));
        BRAID_RETURN_IF_ERROR(bs->recv(next, kTagPong, &word, sizeof(word)));
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (i > 0 && (best < 0 || us < best)) best = us;  // the first round opens the connections
      }
      mine.alphaUs = best / 2;
    }
  }
  std::vector<Figures> all(static_cast<size_t>(nranks));
  all[static_cast<size_t>(rank)] = mine;
  BRAID_RETURN_IF_ERROR(bs->allGather(all.data(), sizeof(Figures)).withContext("network figures allgather"));
  shape.link.alphaUs = 0;
  shape.link.betaGBps = -1;
  for (const Figures& f : all) {
    shape.link.alphaUs = std::max(shape.link.alphaUs, f.alphaUs);
    if (f.gbps > 0 && (shape.link.betaGBps < 0 || f.gbps < shape.link.betaGBps)) shape.link.betaGBps = f.gbps;
  }
  if (shape.link.betaGBps <= 0) shape.link.betaGBps = 10000 / 8e3;
  return shape;
}

int pickNumaNode(const std::vector<std::vector<int>>& nodeCpus, const std::vector<int>& processCpus, int localRank,
                 int localRanks) {
  if (nodeCpus.empty()) return -1;
  for (size_t k = 0; k < nodeCpus.size(); ++k) {
    const std::vector<int>& cpus = nodeCpus[k];
    bool inside = !processCpus.empty();
    for (int c : processCpus) inside = inside && std::find(cpus.begin(), cpus.end(), c) != cpus.end();
    if (inside) return static_cast<int>(k);  // the launcher (numactl, mpirun --bind-to) already chose
  }
  const int n = static_cast<int>(nodeCpus.size());
  return std::min(n - 1, localRank * n / std::max(1, localRanks));
}

namespace {

int gpuNodeByBusId(const TopoGraph& g, const std::string& busId) {
  for (int n : g.nodesOf(NodeType::kGpu)) {
    if (g.node(n).busId == busId) return n;
  }
  return -1;
}

// This rank's GPU against every GPU rank of its host, from the host's graph (NCCL's P2P rules, NCCL_P2P_LEVEL and
// NCCL_P2P_DISABLE applied by computePaths).
void classifyGpuPairs(const TopoGraph& g, int rank, const std::vector<int>& nodeOf,
                      const std::vector<std::string>& gpuBusOfRank, CommTopology* out) {
  const size_t n = nodeOf.size();
  out->p2pOk.assign(n, -1);
  out->p2pPath.assign(n, "");
  if (gpuBusOfRank.size() != n || gpuBusOfRank[static_cast<size_t>(rank)].empty()) return;
  const int mine = gpuNodeByBusId(g, gpuBusOfRank[static_cast<size_t>(rank)]);
  for (size_t r = 0; r < n; ++r) {
    if (nodeOf[r] != nodeOf[static_cast<size_t>(rank)] || gpuBusOfRank[r].empty()) continue;
    if (gpuBusOfRank[r] == gpuBusOfRank[static_cast<size_t>(rank)]) {
      // The same GPU (ranks sharing it): its own memory, path LOC, whether or not the topology shows it.
      out->p2pOk[r] = 1;
      out->p2pPath[r] = pathTypeName(PathType::kLoc);
      continue;
    }
    const int theirs = gpuNodeByBusId(g, gpuBusOfRank[r]);
    if (mine < 0 || theirs < 0) continue;
    out->p2pOk[r] = g.p2pOk(mine, theirs) || mine == theirs ? 1 : 0;
    out->p2pPath[r] = pathTypeName(g.path(mine, theirs).type);
  }
}

}  // namespace

Result<CommTopology> buildCommTopology(Bootstrap* bs, int rank, int nranks, const std::vector<uint64_t>& hostHashOfRank,
                                       const std::vector<std::string>& gpuBusOfRank) {
  CommTopology out;
  BRAID_ASSIGN_OR_RETURN(TopoSystem sys, initHostTopology(rank));
  out.source = sys.source;

  std::vector<std::string> hostOfRank;
  for (uint64_t h : hostHashOfRank) hostOfRank.push_back(strPrintf("%016llx", static_cast<unsigned long long>(h)));
  out.nodeOf = groupRanksByHost(hostOfRank);
  out.nNodes = 1 + *std::max_element(out.nodeOf.begin(), out.nodeOf.end());
  const int myNode = out.nodeOf[static_cast<size_t>(rank)];
  out.firstRankOf.assign(static_cast<size_t>(out.nNodes), -1);
  out.ranksOn.assign(static_cast<size_t>(out.nNodes), 0);
  for (int r = 0; r < nranks; ++r) {
    const int node = out.nodeOf[static_cast<size_t>(r)];
    if (out.firstRankOf[static_cast<size_t>(node)] < 0) out.firstRankOf[static_cast<size_t>(node)] = r;
    if (node == myNode && r < rank) ++out.localRank;
    ++out.ranksOn[static_cast<size_t>(node)];
  }
  out.localRanks = out.ranksOn[static_cast<size_t>(myNode)];
  const std::vector<int>& firstOfNode = out.firstRankOf;

  // This rank's NUMA node, from the host's CPU nodes and the process's CPU mask.
  std::vector<int> cpuNodes = sys.graph.nodesOf(NodeType::kCpu);
  std::vector<std::vector<int>> nodeCpus;
  for (int n : cpuNodes) nodeCpus.push_back(cpusOfAffinity(sys.graph.node(n).affinity));
  const std::vector<int> mine = processCpus();
  const int k = pickNumaNode(nodeCpus, mine, out.localRank, out.localRanks);
  TopoHeader header{};
  header.numa = k < 0 ? -1 : static_cast<int32_t>(sys.graph.node(cpuNodes[static_cast<size_t>(k)]).id);
  if (k >= 0 && cpuNodes.size() > 1) {
    for (int c : nodeCpus[static_cast<size_t>(k)]) {
      if (std::find(mine.begin(), mine.end(), c) != mine.end()) out.placeCpus.push_back(c);
    }
  }
  if (static_cast<long>(mine.size()) == sysconf(_SC_NPROCESSORS_ONLN)) {
    // Every unrestricted rank of the host sees the same list, so their indices give distinct CPUs; with more ranks
    // than CPUs (on the node) none is placed.
    const std::vector<int>& cpus = out.placeCpus.empty() ? mine : out.placeCpus;
    int index = 0, sharing = 0;  // this rank's index among the host's ranks on the same CPUs, and their number
    for (int j = 0; j < out.localRanks; ++j) {
      const bool same = out.placeCpus.empty() || pickNumaNode(nodeCpus, mine, j, out.localRanks) == k;
      sharing += same ? 1 : 0;
      index += same && j < out.localRank ? 1 : 0;
    }
    if (sharing <= static_cast<int>(cpus.size())) out.homeCpu = cpus[static_cast<size_t>(index)];
  }

  const bool sender = firstOfNode[static_cast<size_t>(myNode)] == rank;
  const std::string blob = sender ? serializeHostTopo(sys) : std::string();
  header.blobBytes = static_cast<int64_t>(blob.size());
  if (header.blobBytes > kMaxBlobBytes) {
    return invalidArgument("the topology of host %s is %lld bytes (from %s); at most %lld can be exchanged",
                           sys.hostId.c_str(), static_cast<long long>(header.blobBytes), sys.source.c_str(),
                           static_cast<long long>(kMaxBlobBytes));
  }
  std::vector<TopoHeader> headers(static_cast<size_t>(nranks));
  headers[static_cast<size_t>(rank)] = header;
  BRAID_RETURN_IF_ERROR(bs->allGather(headers.data(), sizeof(TopoHeader)).withContext("topology header allgather"));
  int64_t maxBytes = 0;
  for (int r = 0; r < nranks; ++r) {
    const TopoHeader& h = headers[static_cast<size_t>(r)];
    out.numaOf.push_back(h.numa);
    if (h.blobBytes < 0 || h.blobBytes > kMaxBlobBytes) {
      return invalidArgument("rank %d sent a host topology of %lld bytes", r, static_cast<long long>(h.blobBytes));
    }
    maxBytes = std::max(maxBytes, h.blobBytes);
  }
  std::vector<char> blobs(static_cast<size_t>(maxBytes) * static_cast<size_t>(nranks));
  if (!blob.empty())
    memcpy(blobs.data() + static_cast<size_t>(maxBytes) * static_cast<size_t>(rank), blob.data(), blob.size());
  if (maxBytes > 0) {
    BRAID_RETURN_IF_ERROR(bs->allGather(blobs.data(), static_cast<size_t>(maxBytes)).withContext("topology allgather"));
  }

  // Every rank parses every host's blob, its own included, so all of them search identical graphs.
  BRAID_ASSIGN_OR_RETURN(PathOptions paths, pathOptionsFromParams());
  std::vector<HostGraphs> graphs;
  std::string searched;
  bool gpusShown = !gpuBusOfRank.empty();
  for (int n = 0; n < out.nNodes; ++n) {
    const int first = firstOfNode[static_cast<size_t>(n)];
    const TopoHeader& h = headers[static_cast<size_t>(first)];
    std::string b(blobs.data() + static_cast<size_t>(maxBytes) * static_cast<size_t>(first),
                  static_cast<size_t>(h.blobBytes));
    auto host = deserializeHostTopo(b, paths);
    if (!host.isOk()) return host.status().withContext(strPrintf("topology sent by rank %d", first));
    const bool own = n == myNode;
    if (own) classifyGpuPairs(host.value().graph, rank, out.nodeOf, gpuBusOfRank, &out);
    BRAID_ASSIGN_OR_RETURN(HostGraphs g, computeHostGraphs(host.value(), out.nNodes > 1, own ? rank : -1));
    if (own) searched = describeGraph(g.ring).substr(0, describeGraph(g.ring).find('\n'));
    // NCCL's GPU model needs every rank's GPU in its host's topology; every rank decides from the same data.
    for (int r = 0; r < nranks; ++r) {
      if (out.nodeOf[static_cast<size_t>(r)] != n) continue;
      const std::string bus = r < static_cast<int>(gpuBusOfRank.size()) ? gpuBusOfRank[static_cast<size_t>(r)] : "";
      gpusShown = gpusShown && !bus.empty() && gpuNodeByBusId(host.value().graph, bus) >= 0;
    }
    if (n == 0 && gpusShown) {
      Result<GpuModelInput> in = gpuModelInputFrom(host.value().graph, g, out.nNodes);
      if (in.isOk()) {
        out.gpuModel = std::make_shared<GpuModelInput>(in.take());
        out.gpuModel->nRanks = nranks;  // the communicator's ranks, not every GPU the host shows
        // And NVLink between the communicator's GPUs on this host, not between every GPU it shows (two ranks on one
        // GPU count as joined).
        const TopoGraph& hg = host.value().graph;
        std::vector<int> gpus;
        for (int r = 0; r < nranks; ++r) {
          if (out.nodeOf[static_cast<size_t>(r)] == 0)
            gpus.push_back(gpuNodeByBusId(hg, gpuBusOfRank[static_cast<size_t>(r)]));
        }
        out.gpuModel->allNvlink = nranks > 1 && allJoinedByNvlink(hg, gpus);
      }
    }
    graphs.push_back(std::move(g));
  }
  if (!gpusShown) out.gpuModel.reset();
  std::vector<RankPlacement> placements(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    placements[static_cast<size_t>(r)].node = out.nodeOf[static_cast<size_t>(r)];
    placements[static_cast<size_t>(r)].numa = out.numaOf[static_cast<size_t>(r)];
  }
  BRAID_ASSIGN_OR_RETURN(out.search, buildCommChannels(graphs, placements));
  out.summary =
      strPrintf("topology from %s: %d node(s), local rank %d/%d on NUMA node %d%s; ring graph %s", out.source.c_str(),
                out.nNodes, out.localRank, out.localRanks, header.numa,
                out.placeCpus.empty() ? "" : strPrintf(" (%zu CPUs)", out.placeCpus.size()).c_str(), searched.c_str());
  return out;
}

std::string gpuBusId(uint64_t gpuPciId) {
  if (gpuPciId == 0) return std::string();
  const uint64_t v = gpuPciId - 1;
  return strPrintf("%04x:%02x:%02x.0", static_cast<unsigned>(v >> 32), static_cast<unsigned>(v >> 8 & 0xff),
                   static_cast<unsigned>(v & 0xff));
}

std::vector<uint8_t> p2pPeers(const CommTopology& topo, int rank, const std::vector<PeerInfo>& peers,
                              const DeviceMemory& device) {
  const PeerInfo& self = peers[static_cast<size_t>(rank)];
  const bool disabled = params::P2pDisable() != 0;
  std::vector<uint8_t> ok(peers.size(), 0);
  for (size_t r = 0; r < peers.size(); ++r) {
    const PeerInfo& p = peers[r];
    if (p.hostHash != self.hostHash || p.cudaDev < 0) continue;
    if (static_cast<int>(r) == rank) {
      ok[r] = 1;
      continue;
    }
    const int8_t byTopo = r < topo.p2pOk.size() ? topo.p2pOk[r] : -1;
    const bool local = p.pid == self.pid;
    std::string why;
    if (disabled) {
      why = "NCCL_P2P_DISABLE=1";
    } else if (byTopo >= 0) {
      ok[r] = static_cast<uint8_t>(byTopo);
      why = strPrintf("path %s, NCCL_P2P_LEVEL %s", topo.p2pPath[r].c_str(),
                      params::P2pLevel().empty() ? "default (PXB)" : params::P2pLevel().c_str());
    } else if (local) {
      ok[r] = device.canAccessPeer(p.cudaDev) ? 1 : 0;
      why = strPrintf("GPUs not in the topology (%s); the driver says peer access is %s", topo.source.c_str(),
                      ok[r] ? "possible" : "impossible");
    } else {
      why = strPrintf("GPUs not in the topology (%s), ranks in different processes: NCCL_TOPO_FILE can describe them",
                      topo.source.c_str());
    }
    BRAID_INFO(kLogInit, "rank %d (GPU %d) and rank %zu (GPU %d%s): %s, %s", rank, self.cudaDev, r, p.cudaDev,
               local ? "" : strPrintf(" of process %d", static_cast<int>(p.pid)).c_str(),
               ok[r] ? "P2P" : "no P2P (host memory)", why.c_str());
  }
  return ok;
}

std::shared_ptr<const GpuModel> gpuModelFor(const CommTopology& topo, const Filter& algo, const Filter& proto,
                                            int channels, int rank) {
  if (!topo.gpuModel) {
    BRAID_INFO(kLogInit | kLogTuning,
               "rank %d: algorithms and protocols chosen by the host cost model: the topology (%s) does not show "
               "every rank's GPU (NCCL_TOPO_FILE can describe them)",
               rank, topo.source.c_str());
    return nullptr;
  }
  GpuModelInput in = *topo.gpuModel;
  in.algoFilter = algo;
  in.protoFilter = proto;
  in.commChannels = channels;
  restrictToBraidGpu(&in);
  BRAID_INFO(kLogInit | kLogTuning,
             "rank %d: algorithms and protocols chosen by NCCL's GPU model (%d ranks, %d node(s), sm %d-%d, ring %d x "
             "%.1f GB/s %s); LL128 off: braid's LL128 kernel has not run on a GPU (NCCL_PROTO=LL128 forces it)",
             rank, in.nRanks, in.nNodes, in.minSm, in.maxSm, in.graphs[static_cast<int>(AlgoId::kRing)].nChannels,
             in.graphs[static_cast<int>(AlgoId::kRing)].bwIntra,
             pathTypeName(in.graphs[static_cast<int>(AlgoId::kRing)].typeIntra));
  return std::make_shared<const GpuModel>(buildGpuModel(in));
}

}  // namespace braid
