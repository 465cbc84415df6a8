// The topology model of one host: typed nodes, typed links with bandwidths, and classified paths between them.
//
// A TopoGraph is built from an NCCL-schema topology XML document (topology/topo_xml.h turns files, hwloc discovery
// and merges into such a document), then computePaths() classifies every node-to-node route with NCCL's rules:
//   - a path's type is the worst hop type and its bandwidth the narrowest link on it;
//   - NVLink hops are NVL, or NVB when the route relays through another GPU;
//   - a PCI switch to PCI switch hop is PXB, a PCIe hop touching a CPU is PHB, a CPU-CPU hop SYS, a NIC-NET hop NET;
//   - GPU pairs whose path is worse than NCCL_P2P_LEVEL (default PXB) do not use P2P: their route goes through the
//     local CPU (shared memory), and becomes NET when NCCL_SHM_DISABLE forbids that too;
//   - GPU-NIC paths worse than PXB go through a peer GPU on NVLink that is close to the NIC (PXN), when one exists.
// Bandwidths are GB/s, "effective" figures as NCCL uses them (e.g. 20.6 per sm90 NVLink, 48 per PCIe Gen5 x16).
// Links are directional (one TopoLink per direction); the search consumes them per direction.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "topology/xml.h"

namespace braid {

enum class NodeType : int { kGpu = 0, kPci = 1, kNvs = 2, kCpu = 3, kNic = 4, kNet = 5 };
constexpr int kNumNodeTypes = 6;
const char* nodeTypeName(NodeType t);  // "GPU", "PCI", "NVS", "CPU", "NIC", "NET"

// Values are NCCL's, so link and path types compare (a PCI link is a PIX hop).
enum class LinkType : int { kLoc = 0, kNvl = 1, kC2c = 3, kPci = 4, kSys = 9, kNet = 10 };
const char* linkTypeName(LinkType t);

enum class PathType : int {
  kLoc = 0,
  kNvl = 1,
  kNvb = 2,
  kC2c = 3,
  kPix = 4,
  kPxb = 5,
  kP2c = 6,
  kPxn = 7,
  kPhb = 8,
  kSys = 9,
  kNet = 10,
  kDis = 11,
};
const char* pathTypeName(PathType t);
// Accepts NCCL's names (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS), case-insensitive.
Result<PathType> parsePathType(const std::string& name);

// Bandwidth constants (GB/s), NCCL's effective figures.
constexpr double kLocBw = 5000.0;
// A larger system is refused (the path matrix is quadratic); NCCL allows 640 nodes per type, real hosts use ~100.
constexpr int kMaxTopoNodes = 768;
double nvlinkBwPerLink(int sm);  // sm60 18, sm70/80 20, sm86 12, sm90 20.6, sm100+ 40.1
// PCIe: link_speed text ("32.0 GT/s PCIe") and width -> GB/s; unknown speeds count as Gen3.
double pciBw(const std::string& linkSpeed, int width);
double netBw(int64_t speedMbps);  // Mb/s -> GB/s; <= 0 counts as 10 Gb/s

struct TopoLink {
  int remote = -1;  // node index
  LinkType type = LinkType::kLoc;
  double bw = 0;
};

struct TopoNode {
  NodeType type = NodeType::kCpu;
  int64_t id = 0;     // GPU/PCI/NIC: PCI bus id as an integer; CPU: numa id; NET: dev; NVS: 0
  int cpu = -1;       // index of the CPU node this node hangs under (-1 for NVS and CPUs themselves)
  std::string busId;  // GPU/PCI/NIC: "0000:18:00.0"
  // GPU
  int dev = -1;
  int rank = -1;
  int sm = 0;
  bool gdr = false;
  // CPU
  std::string arch, vendor, affinity;
  int familyId = 0, modelId = 0;
  // NET
  std::string netName, guid;
  int64_t speed = 0;  // Mb/s
  int port = 0, maxConn = 0, rail = -1;
  std::vector<TopoLink> links;  // sorted by descending bandwidth
};

// One hop of a route: the link `link` of node `node`.
struct TopoHop {
  int node = -1;
  int link = -1;
};

struct TopoPath {
  PathType type = PathType::kDis;
  double bw = 0;
  std::vector<TopoHop> hops;  // empty for LOC and DIS
};

// NCCL_P2P_LEVEL and friends, as the path rules use them.
struct PathOptions {
  PathType p2pLevel = PathType::kPxb;  // GPU pairs worse than this do not use P2P
  bool p2pDisable = false;             // NCCL_P2P_DISABLE=1: no GPU pair uses P2P
  bool shmDisable = false;             // NCCL_SHM_DISABLE=1: non-P2P GPU pairs go through the network
  PathType gdrLevel = PathType::kPxb;  // GPU-NIC paths worse than this go through the CPU (or PXN)
  bool pxnDisable = false;             // NCCL_PXN_DISABLE=1
  bool nvbDisable = false;             // NCCL_NVB_DISABLE=1
};
// From the parameter registry (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_NET_GDR_LEVEL, ...).
Result<PathOptions> pathOptionsFromParams();

class TopoGraph {
 public:
  // Builds the graph from an NCCL topology document (<system version="1">); errors name the source, line and element.
  static Result<TopoGraph> fromXml(const XmlNode& system, const std::string& source);

  const std::vector<TopoNode>& nodes() const { return nodes_; }
  const TopoNode& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  int numNodes() const { return static_cast<int>(nodes_.size()); }
  // Indices of the nodes of one type, in ascending id order.
  const std::vector<int>& nodesOf(NodeType t) const { return byType_[static_cast<int>(t)]; }
  int findNode(NodeType t, int64_t id) const;  // -1 when absent

  // Classifies every path (NCCL's rules, above). Must be called after construction; fromXml calls it with defaults.
  void computePaths(const PathOptions& opts);
  const TopoPath& path(int from, int to) const { return paths_[static_cast<size_t>(from) * nodes_.size() + to]; }
  const PathOptions& pathOptions() const { return opts_; }
  // GPU pair may use P2P (direct load/store or copy engines) rather than host memory.
  bool p2pOk(int gpuA, int gpuB) const;

  // Largest NVLink (or PCI, without NVLink) bandwidth out of any GPU: NCCL's totalBw, the search's ceiling.
  double totalGpuBw() const;
  // NET node indices ordered by preference for a GPU: best path type, then bandwidth, then dev.
  std::vector<int> netsByAffinity(int gpu) const;
  // True when the host has an NVSwitch and every GPU is sm90 or newer (NVLS).
  bool nvlsCapable() const;

  // Canonical text: every node with its attributes and links. Two graphs are identical when these are equal.
  std::string describe() const;
  // The path matrix between GPUs, NICs' NETs and CPUs, as braid-topo prints it.
  std::string describePaths() const;
  std::string nodeLabel(int i) const;  // "GPU/0", "NET/3", "CPU/1", "PCI/0000:16:00.0", "NVS/0"

 private:
  int addNode(TopoNode n);
  void addLink(int a, int b, LinkType type, double bw);  // sums bandwidth of parallel links of the same type
  void finishLinks();
  void bfsFrom(int start);
  void routeThrough(int from, int mid, int to, PathType atLeast);

  std::vector<TopoNode> nodes_;
  std::vector<int> byType_[kNumNodeTypes];
  std::map<std::pair<int, int64_t>, int> index_;  // (type, id) -> node
  std::vector<TopoPath> paths_;
  std::vector<char> p2p_;  // n x n, GPU pairs only
  PathOptions opts_;

  friend class TopoBuilder;
};

}  // namespace braid
