// Path computation and classification (NCCL's rules, see topo_graph.h), affinity queries and the path matrix text.
#include <strings.h>
#include <algorithm>
#include <cstdlib>

#include "src/common/params.h"
#include "topology/topo_graph.h"

namespace braid {

namespace {

PathType hopType(const TopoNode& from, const TopoNode& to, const TopoLink& l, const TopoPath& before) {
  // A NIC-NET hop adds nothing: the network's own distance is not a path property inside the host.
  PathType t = l.type == LinkType::kNet ? PathType::kLoc : static_cast<PathType>(static_cast<int>(l.type));
  if (from.type == NodeType::kPci && to.type == NodeType::kPci) t = PathType::kPxb;
  if (l.type == LinkType::kPci && (from.type == NodeType::kCpu || to.type == NodeType::kCpu)) t = PathType::kPhb;
  // Relaying NVLink traffic through an intermediate GPU.
  if (from.type == NodeType::kGpu && before.type == PathType::kNvl && t == PathType::kNvl && !before.hops.empty()) {
    t = PathType::kNvb;
  }
  return t;
}

}  // namespace

Result<PathOptions> pathOptionsFromParams() {
  PathOptions o;
  std::string level = params::P2pLevel();
  if (!level.empty()) {
    char* end = nullptr;
    long v = strtol(level.c_str(), &end, 10);
    if (*end == '\0') {
      // NCCL's numeric form: 0 LOC, 1 NVL, 2 PIX, 3 PXB, 4 PHB, 5 SYS.
      static const PathType kNumeric[] = {PathType::kLoc, PathType::kNvl, PathType::kPix,
                                          PathType::kPxb, PathType::kPhb, PathType::kSys};
      o.p2pLevel = kNumeric[std::max(0L, std::min(5L, v))];
    } else {
      auto t = parsePathType(level);
      if (!t.isOk()) return t.status().withContext("NCCL_P2P_LEVEL");
      o.p2pLevel = t.value();
    }
  }
  std::string gdr = params::NetGdrLevel();
  if (!gdr.empty()) {
    auto t = parsePathType(gdr);
    if (!t.isOk()) return t.status().withContext("NCCL_NET_GDR_LEVEL");
    o.gdrLevel = t.value();
  }
  o.p2pDisable = params::P2pDisable() != 0;
  o.shmDisable = params::ShmDisable() != 0;
  o.pxnDisable = params::PxnDisable() != 0;
  o.nvbDisable = params::NvbDisable() != 0;
  return o;
}

// Breadth-first from `start`: each node is reached with the fewest hops, preferring the widest route among those.
void TopoGraph::bfsFrom(int start) {
  const size_t n = nodes_.size();
  TopoPath* row = &paths_[static_cast<size_t>(start) * n];
  row[start].type = PathType::kLoc;
  row[start].bw = kLocBw;
  std::vector<int> frontier{start};
  std::vector<char> queued(n, 0);
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int u : frontier) {
      const TopoNode& un = nodes_[u];
      const TopoPath& pu = row[u];
      // Traffic never relays through a GPU, except one NVLink hop to another GPU (NVB), and never through a NET.
      if (u != start && un.type == NodeType::kNet) continue;
      for (size_t li = 0; li < un.links.size(); ++li) {
        const TopoLink& l = un.links[li];
        int v = l.remote;
        if (v == start) continue;
        if (u != start && un.type == NodeType::kGpu &&
            (opts_.nvbDisable || l.type != LinkType::kNvl || nodes_[v].type != NodeType::kGpu || pu.hops.size() > 1)) {
          continue;
        }
        double bw = std::min(pu.bw, l.bw);
        TopoPath& pv = row[v];
        bool unset = pv.type == PathType::kDis;
        if (!(unset || pv.hops.size() > pu.hops.size()) || (!unset && pv.bw >= bw)) continue;
        pv.hops = pu.hops;
        pv.hops.push_back({u, static_cast<int>(li)});
        pv.bw = bw;
        pv.type = std::max(pu.type, hopType(un, nodes_[v], l, pu));
        if (!queued[v]) {
          queued[v] = 1;
          next.push_back(v);
        }
      }
    }
    frontier.swap(next);
  }
}

void TopoGraph::routeThrough(int from, int mid, int to, PathType atLeast) {
  const TopoPath& a = path(from, mid);
  const TopoPath& b = path(mid, to);
  if (a.type == PathType::kDis || b.type == PathType::kDis) return;
  TopoPath p;
  p.hops = a.hops;
  p.hops.insert(p.hops.end(), b.hops.begin(), b.hops.end());
  p.bw = std::min(a.bw, b.bw);
  p.type = std::max({a.type, b.type, atLeast});
  paths_[static_cast<size_t>(from) * nodes_.size() + to] = std::move(p);
}

void TopoGraph::computePaths(const PathOptions& opts) {
  opts_ = opts;
  const size_t n = nodes_.size();
  paths_.assign(n * n, TopoPath());
  for (size_t i = 0; i < n; ++i) bfsFrom(static_cast<int>(i));

  const auto& gpus = nodesOf(NodeType::kGpu);
  const auto& nets = nodesOf(NodeType::kNet);
  // P2P is decided on the physical route, before any rerouting below.
  p2p_.assign(n * n, 0);
  for (int a : gpus) {
    for (int b : gpus) {
      PathType t = path(a, b).type;
      p2p_[static_cast<size_t>(a) * n + b] = !opts_.p2pDisable && t != PathType::kDis && t <= opts_.p2pLevel;
    }
  }
  // Peer-to-peer between GPUs, or through the first GPU's CPU (host memory), or through the network.
  for (int a : gpus) {
    for (int b : gpus) {
      if (a == b || p2pOk(a, b)) continue;
      int cpu = nodes_[a].cpu;
      if (opts_.shmDisable) {
        TopoPath& p = paths_[static_cast<size_t>(a) * n + b];
        p.type = PathType::kNet;
      } else if (cpu >= 0) {
        routeThrough(a, cpu, b, PathType::kPhb);
      }
    }
  }
  // GPU-NIC: PXN through a peer GPU on NVLink close to the NIC; otherwise through the GPU's CPU without GPUDirect.
  for (int g : gpus) {
    for (int net : nets) {
      const TopoPath& direct = path(g, net);
      if (direct.type == PathType::kDis) continue;
      int relay = -1;
      if (!opts_.pxnDisable) {
        for (int p : gpus) {
          if (p == g || !nodes_[p].gdr || !nodes_[net].gdr) continue;
          const TopoPath& pn = path(p, net);
          const TopoPath& gp = path(g, p);
          if (pn.type > PathType::kPxb || gp.type != PathType::kNvl) continue;
          if (pn.bw > direct.bw || direct.type > PathType::kPxn) {
            if (relay < 0 || pn.bw > path(relay, net).bw) relay = p;
          }
        }
      }
      if (relay >= 0) {
        routeThrough(g, relay, net, PathType::kPxn);
        paths_[static_cast<size_t>(g) * n + net].type = PathType::kPxn;
        routeThrough(net, relay, g, PathType::kPxn);
        paths_[static_cast<size_t>(net) * n + g].type = PathType::kPxn;
        continue;
      }
      bool gdr = nodes_[g].gdr && nodes_[net].gdr && direct.type <= opts_.gdrLevel;
      if (!gdr && nodes_[g].cpu >= 0) {
        routeThrough(g, nodes_[g].cpu, net, PathType::kPhb);
        routeThrough(net, nodes_[g].cpu, g, PathType::kPhb);
      }
    }
  }
}

bool TopoGraph::p2pOk(int a, int b) const {
  if (a == b) return true;
  return p2p_[static_cast<size_t>(a) * nodes_.size() + b] != 0;
}

double TopoGraph::totalGpuBw() const {
  double best = 0;
  for (int g : nodesOf(NodeType::kGpu)) {
    double nvl = 0, pci = 0;
    for (const TopoLink& l : nodes_[g].links) {
      if (l.type == LinkType::kNvl || l.type == LinkType::kC2c) nvl += l.bw;
      if (l.type == LinkType::kPci) pci = std::max(pci, l.bw);
    }
    best = std::max(best, nvl > 0 ? nvl : pci);
  }
  return best;
}

std::vector<int> TopoGraph::netsByAffinity(int gpu) const {
  std::vector<int> nets = nodesOf(NodeType::kNet);
  std::stable_sort(nets.begin(), nets.end(), [&](int a, int b) {
    const TopoPath& pa = path(gpu, a);
    const TopoPath& pb = path(gpu, b);
    if (pa.type != pb.type) return pa.type < pb.type;
    if (pa.bw != pb.bw) return pa.bw > pb.bw;
    return nodes_[a].id < nodes_[b].id;
  });
  return nets;
}

bool TopoGraph::nvlsCapable() const {
  if (nodesOf(NodeType::kNvs).empty() || nodesOf(NodeType::kGpu).empty()) return false;
  for (int g : nodesOf(NodeType::kGpu)) {
    if (nodes_[g].sm < 90) return false;
  }
  return true;
}

std::string TopoGraph::describePaths() const {
  std::vector<int> rows = nodesOf(NodeType::kGpu);
  std::vector<int> cols = rows;
  for (int x : nodesOf(NodeType::kNet)) cols.push_back(x);
  for (int x : nodesOf(NodeType::kCpu)) cols.push_back(x);
  if (rows.empty()) rows = nodesOf(NodeType::kCpu);
  std::string out = strPrintf("%-8s", "");
  for (int c : cols) out += strPrintf(" %11s", nodeLabel(c).c_str());
  out += "\n";
  for (int r : rows) {
    out += strPrintf("%-8s", nodeLabel(r).c_str());
    for (int c : cols) {
      const TopoPath& p = path(r, c);
      if (p.type == PathType::kLoc || p.type == PathType::kDis) {
        out += strPrintf(" %11s", pathTypeName(p.type));
      } else {
        out += strPrintf(" %5s/%-5.1f", pathTypeName(p.type), p.bw);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace braid
