// Channel search: rings and trees through one host's GPUs (and NICs, for patterns that leave the host), respecting
// link capacity, as NCCL's search does.
//
// A channel is an order of the host's GPUs; for inter-node patterns it enters from a NET and (rings) leaves through
// a NET. Each channel consumes `bw` GB/s on every link of every hop's path (per direction), so the number of
// channels times the per-channel bandwidth never exceeds what the links carry. The search tries per-channel speeds
// from the best path bandwidth downwards (NCCL's speed tables per GPU generation) and, at each speed, path types
// from the best present upwards; it keeps the solution with the most total bandwidth (channels x speed), stops when
// that reaches the GPU's total NVLink (or PCIe) bandwidth, and does not go below half the best speed found.
// Afterwards channels are duplicated at half bandwidth when bw >= 25 GB/s (not for sm90+ below 50 GB/s with more
// than 4 channels), then the communicator doubles them again (collChannels): the DGX-H100 gives 6 rings x 60 GB/s,
// 12 x 30 after duplication, 24 communicator channels, as NCCL reports on that machine.
// Without GPUs the search returns NCCL's fallback: one channel, 0.1 GB/s, type SYS.
#pragma once

#include <string>
#include <vector>

#include "src/common/status.h"
#include "topology/topo_graph.h"
#include "topology/xml.h"

namespace braid {

// NCCL's graph ids and patterns (graph XML values).
enum class GraphId : int { kRing = 0, kTree = 1, kCollNetChain = 2, kNvls = 3, kCollNetDirect = 4 };
enum class GraphPattern : int { kBalancedTree = 1, kSplitTree = 2, kTree = 3, kRing = 4, kNvls = 5 };

struct TopoChannel {
  std::vector<int> gpus;  // GPU devs, in channel order
  int netIn = -1;         // NET dev the channel enters the host through (inter-node patterns), else -1
  int netOut = -1;        // NET dev it leaves through (inter-node rings), else -1
};

struct SearchedGraph {
  GraphId id = GraphId::kRing;
  GraphPattern pattern = GraphPattern::kRing;
  bool interNode = false;
  int crossNic = 0;
  int nChannels = 0;
  double bwIntra = 0;  // GB/s per channel inside the host
  double bwInter = 0;  // GB/s per channel through the network (inter-node patterns)
  PathType typeIntra = PathType::kLoc;
  PathType typeInter = PathType::kLoc;
  bool sameChannels = true;
  std::vector<TopoChannel> channels;
};

struct SearchOptions {
  GraphPattern pattern = GraphPattern::kRing;
  bool interNode = false;  // the communicator spans several hosts
  int minChannels = 1;
  int maxChannels = 32;  // NCCL: MAXCHANNELS / 2
  int crossNic = 2;      // NCCL_CROSS_NIC
};

// Searches one graph. Never fails on a valid graph (falls back as described above).
SearchedGraph searchGraph(const TopoGraph& g, const SearchOptions& opts);
// NCCL's duplication step: x2 channels at half bandwidth when the rule above allows.
void duplicateChannels(SearchedGraph* graph, int sm);
// Ring, then trees with the ring's channel count, then NVLS when capable; duplicated. The usual entry point.
struct HostGraphs {
  SearchedGraph ring;
  SearchedGraph tree;
  // NCCL's NVLS graph: heads x bwIntra where (heads + 1) x bwIntra fits a GPU's NVLink, bwInter raised towards
  // 2 x bwIntra (DGX-H100: 8 x 40, bwInter 60; 48 across hosts). nChannels 0 when the host is not NVLS-capable.
  SearchedGraph nvls;
};
HostGraphs searchHostGraphs(const TopoGraph& g, bool interNode, int crossNic);
// Channels the communicator runs: NCCL's postset doubling, min(64, 2 x searched channels).
int collChannels(const SearchedGraph& ring);

// The NIC a GPU uses for channel c: its closest NICs (best path type and bandwidth) taken in turn, so channels
// spread over a GPU's rails and GPU i of every host uses the same rail on the same channel. NET dev, or -1.
int netForGpu(const TopoGraph& g, int gpuDev, int channel);

// NCCL_GRAPH_DUMP_FILE / NCCL_GRAPH_FILE: <graphs version="1"><graph id=... pattern=...><channel><net dev/><gpu
// dev/>...</channel></graph></graphs>. Loading checks every GPU and NET against the topology.
std::unique_ptr<XmlNode> graphsToXml(const std::vector<const SearchedGraph*>& graphs);
Result<std::vector<SearchedGraph>> graphsFromXml(const XmlNode& root, const std::string& source, const TopoGraph& g);

// NCCL's GRAPH log lines for one graph: "Pattern 4, crossNic 0, nChannels 12, bw 30.0/30.0, type NVL/PIX, ...".
std::string describeGraph(const SearchedGraph& graph);

}  // namespace braid
