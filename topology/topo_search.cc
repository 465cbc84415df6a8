// Ring/tree search over link capacities (see topo_search.h for the rules it follows).
#include "topology/topo_search.h"

#include <algorithm>
#include <set>

namespace braid {

namespace {

// Per-channel speeds tried (GB/s), NCCL's tables: intra-host and inter-host, default / sm90 / sm100.
const std::vector<double> kIntraSpeeds = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kIntraSpeedsSm90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kIntraSpeedsSm100 = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kInterSpeeds = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kInterSpeedsSm90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kInterSpeedsSm100 = {96, 86,   80, 48, 45.1, 42, 40,  30,  24,   22,
                                               20, 17.5, 15, 12, 6,    3,  2.4, 1.2, 0.24, 0.12};

constexpr int kStepBudget = 1 << 14;  // DFS steps per channel attempt (NCCL's per-attempt budget)
constexpr double kEps = 1e-9;

int maxSm(const TopoGraph& g) {
  int sm = 0;
  for (int i : g.nodesOf(NodeType::kGpu)) sm = std::max(sm, g.node(i).sm);
  return sm;
}

class Searcher {
 public:
  Searcher(const TopoGraph& g, const SearchOptions& o) : g_(g), o_(o), gpus_(g.nodesOf(NodeType::kGpu)) {
    std::sort(gpus_.begin(), gpus_.end(), [&](int a, int b) { return g.node(a).dev < g.node(b).dev; });
    nets_ = g.nodesOf(NodeType::kNet);
    base_.resize(g.nodes().size() + 1, 0);
    for (size_t i = 0; i < g.nodes().size(); ++i) base_[i + 1] = base_[i] + static_cast<int>(g.nodes()[i].links.size());
  }

  // One attempt: as many channels as fit at this speed and these path-type limits.
  SearchedGraph attempt(double speed, PathType typeIntra, PathType typeInter) {
    cap_.assign(static_cast<size_t>(base_.back()), 0);
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      for (size_t l = 0; l < g_.nodes()[i].links.size(); ++l) cap_[base_[i] + l] = g_.nodes()[i].links[l].bw;
    }
    speed_ = speed;
    typeIntra_ = typeIntra;
    typeInter_ = typeInter;
    SearchedGraph out;
    out.pattern = o_.pattern;
    out.interNode = o_.interNode;
    out.bwIntra = out.bwInter = speed;
    out.typeIntra = typeIntra;
    out.typeInter = o_.interNode ? typeInter : PathType::kLoc;
    out.crossNic = o_.crossNic == 1 ? 1 : 0;
    while (static_cast<int>(out.channels.size()) < o_.maxChannels) {
      TopoChannel ch;
      int c = static_cast<int>(out.channels.size());
      bool ok = (!out.channels.empty() && replay(out.channels.back(), &ch)) || findChannel(c, &ch);
      if (!ok) break;
      if (!out.channels.empty() && ch.gpus != out.channels.back().gpus) out.sameChannels = false;
      out.channels.push_back(ch);
    }
    out.nChannels = static_cast<int>(out.channels.size());
    return out;
  }

  const std::vector<int>& gpus() const { return gpus_; }

 private:
  bool isRing() const { return o_.pattern == GraphPattern::kRing; }

  // PCIe links of a PHB path from a GPU through an Intel root complex carry 6/5 of the data (64-byte TLPs), as
  // NCCL accounts for them.
  double pciFactor(int from, const TopoPath& p) const {
    if (p.type != PathType::kPhb || g_.node(from).type != NodeType::kGpu) return 1.0;
    for (const TopoHop& h : p.hops) {
      const TopoNode& n = g_.node(g_.node(h.node).links[h.link].remote);
      if (n.type == NodeType::kCpu && n.vendor == "GenuineIntel" && (n.arch == "x86_64" || n.arch.empty())) return 1.2;
    }
    return 1.0;
  }

  double linkUse(const TopoHop& h, double factor) const {
    return g_.node(h.node).links[h.link].type == LinkType::kPci ? speed_ * factor : speed_;
  }

  // Takes this channel's bandwidth from every link of the path from -> to; all or nothing.
  bool consume(int from, int to) {
    const TopoPath& p = g_.path(from, to);
    double f = pciFactor(from, p);
    for (size_t i = 0; i < p.hops.size(); ++i) {
      double& c = cap_[base_[p.hops[i].node] + p.hops[i].link];
      c -= linkUse(p.hops[i], f);
      if (c < -kEps) {
        for (size_t j = 0; j <= i; ++j) cap_[base_[p.hops[j].node] + p.hops[j].link] += linkUse(p.hops[j], f);
        return false;
      }
    }
    return true;
  }
  void release(int from, int to) {
    const TopoPath& p = g_.path(from, to);
    double f = pciFactor(from, p);
    for (const TopoHop& h : p.hops) cap_[base_[h.node] + h.link] += linkUse(h, f);
  }

  bool tryHop(int from, int to, PathType limit) {
    const TopoPath& p = g_.path(from, to);
    if (p.type > limit || p.type == PathType::kDis) return false;
    return consume(from, to);
  }

  int netIndexOfDev(int dev) const { return g_.findNode(NodeType::kNet, dev); }

  // Replays the previous channel's order (NCCL's sameChannels) when its links still have room.
  bool replay(const TopoChannel& prev, TopoChannel* out) {
    if (o_.interNode) return false;  // each inter-node channel takes its own NIC
    std::vector<std::pair<int, int>> done;
    auto undo = [&] {
      for (auto& d : done) release(d.first, d.second);
    };
    std::vector<int> idx;
    for (int dev : prev.gpus) idx.push_back(gpuIndex(dev));
    size_t hops = isRing() ? idx.size() : idx.size() - 1;
    for (size_t i = 0; i < hops && idx.size() > 1; ++i) {
      int a = idx[i], b = idx[(i + 1) % idx.size()];
      if (!tryHop(a, b, typeIntra_)) {
        undo();
        return false;
      }
      done.emplace_back(a, b);
    }
    *out = prev;
    return true;
  }

  int gpuIndex(int dev) const {
    for (int i : gpus_) {
      if (g_.node(i).dev == dev) return i;
    }
    return -1;
  }

  // Next-GPU candidates from `prev`: widest path first, then fewest hops, then the next index (ring neighbours).
  std::vector<int> candidates(int prev, const std::vector<char>& used) const {
    std::vector<int> out;
    for (size_t k = 0; k < gpus_.size(); ++k) {
      if (!used[k]) out.push_back(static_cast<int>(k));
    }
    int n = static_cast<int>(gpus_.size());
    int prevK = -1;
    for (int k = 0; k < n; ++k) {
      if (gpus_[k] == prev) prevK = k;
    }
    std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
      const TopoPath& pa = g_.path(prev, gpus_[a]);
      const TopoPath& pb = g_.path(prev, gpus_[b]);
      if (pa.type != pb.type) return pa.type < pb.type;
      if (pa.bw != pb.bw) return pa.bw > pb.bw;
      if (pa.hops.size() != pb.hops.size()) return pa.hops.size() < pb.hops.size();
      int da = prevK < 0 ? a : (a - prevK + n) % n;
      int db = prevK < 0 ? b : (b - prevK + n) % n;
      return da < db;
    });
    return out;
  }

  // NETs a channel may leave through, given the one it entered by (NCCL_CROSS_NIC).
  std::vector<int> exitNets(int netIn) const {
    std::vector<int> out{netIn};
    if (o_.crossNic == 0) return out;
    const TopoNode& in = g_.node(netIn);
    for (int n : nets_) {
      if (n != netIn && in.rail >= 0 && g_.node(n).rail == in.rail) out.push_back(n);
    }
    for (int n : nets_) {
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    return out;
  }

  bool dfs(std::vector<int>* order, std::vector<char>* used, TopoChannel* ch) {
    if (--steps_ < 0) return false;
    if (order->size() == gpus_.size()) {
      int last = order->back();
      if (o_.interNode && isRing()) {
        for (int net : exitNets(netIndexOfDev(ch->netIn))) {
          if (tryHop(last, net, typeInter_)) {
            ch->netOut = g_.node(net).dev;
            return true;
          }
        }
        return false;
      }
      if (isRing() && order->size() > 1) return tryHop(last, order->front(), typeIntra_);
      return true;
    }
    int prev = order->back();
    for (int k : candidates(prev, *used)) {
      int next = gpus_[k];
      if (!tryHop(prev, next, typeIntra_)) continue;
      (*used)[k] = 1;
      order->push_back(next);
      if (dfs(order, used, ch)) return true;
      order->pop_back();
      (*used)[k] = 0;
      release(prev, next);
      if (steps_ < 0) return false;
    }
    return false;
  }

  bool findChannel(int c, TopoChannel* ch) {
    std::vector<int> starts;
    std::vector<int> netsTried;
    if (o_.interNode) {
      if (nets_.empty()) return false;
      // Channel c starts on NIC c (rotating), entering through the GPU closest to it.
      for (size_t k = 0; k < nets_.size(); ++k) netsTried.push_back(nets_[(c + k) % nets_.size()]);
    } else {
      netsTried.push_back(-1);
    }
    for (int net : netsTried) {
      std::vector<int> firsts;
      if (net >= 0) {
        firsts = gpus_;
        std::stable_sort(firsts.begin(), firsts.end(), [&](int a, int b) {
          const TopoPath& pa = g_.path(net, a);
          const TopoPath& pb = g_.path(net, b);
          if (pa.type != pb.type) return pa.type < pb.type;
          return pa.bw > pb.bw;
        });
      } else {
        firsts = isRing() ? std::vector<int>{gpus_.front()} : gpus_;
      }
      for (int first : firsts) {
        if (net >= 0 && !tryHop(net, first, typeInter_)) continue;
        std::vector<int> order{first};
        std::vector<char> used(gpus_.size(), 0);
        for (size_t k = 0; k < gpus_.size(); ++k) used[k] = gpus_[k] == first;
        TopoChannel out;
        out.netIn = net >= 0 ? g_.node(net).dev : -1;
        steps_ = kStepBudget;
        if (dfs(&order, &used, &out)) {
          for (int i : order) out.gpus.push_back(g_.node(i).dev);
          *ch = out;
          return true;
        }
        if (net >= 0) release(net, first);
      }
    }
    return false;
  }

  const TopoGraph& g_;
  SearchOptions o_;
  std::vector<int> gpus_;
  std::vector<int> nets_;
  std::vector<int> base_;
  std::vector<double> cap_;
  double speed_ = 0;
  PathType typeIntra_ = PathType::kLoc, typeInter_ = PathType::kLoc;
  int steps_ = 0;
};

std::vector<PathType> typesPresent(const TopoGraph& g, bool inter) {
  std::set<PathType> s;
  for (int a : g.nodesOf(NodeType::kGpu)) {
    if (inter) {
      for (int n : g.nodesOf(NodeType::kNet)) s.insert(g.path(a, n).type);
    } else {
      for (int b : g.nodesOf(NodeType::kGpu)) {
        if (a != b) s.insert(g.path(a, b).type);
      }
    }
  }
  s.erase(PathType::kDis);
  if (s.empty()) s.insert(PathType::kLoc);
  return std::vector<PathType>(s.begin(), s.end());
}

SearchedGraph fallback(const TopoGraph& g, const SearchOptions& o) {
  SearchedGraph out;
  out.pattern = o.pattern;
  out.interNode = o.interNode;
  out.nChannels = 1;
  out.bwIntra = out.bwInter = 0.1;
  out.typeIntra = out.typeInter = PathType::kSys;
  TopoChannel ch;
  std::vector<int> gpus = g.nodesOf(NodeType::kGpu);
  for (int i : gpus) ch.gpus.push_back(g.node(i).dev);
  std::sort(ch.gpus.begin(), ch.gpus.end());
  const auto& nets = g.nodesOf(NodeType::kNet);
  if (o.interNode && !nets.empty()) {
    ch.netIn = g.node(nets[0]).dev;
    if (o.pattern == GraphPattern::kRing) ch.netOut = ch.netIn;
  }
  out.channels.push_back(ch);
  return out;
}

// NCCL's NVLS search in closed form. All GPUs hang off one (merged) NVSwitch, so a search over orders is not
// needed: each head channel moves `speed` through every GPU's NVLink to the switch in each direction, twice through
// its head GPU (which both pulls its share from the switch and pushes it back), so k heads fit at `speed` when
// (k + 1) x speed <= a GPU's NVLink bandwidth. Inside a host every GPU is a head (NCCL forces min = max channels so
// all GPUs pull evenly); across hosts the heads are the GPUs closest to a NIC, and a head's NIC carries `speed`.
// Speeds come from the same tables as the ring search (intra table inside a host, inter table across hosts), starting
// at the first speed <= the widest path with speed x minChannels <= the GPU's NVLink total x n / (n - 1) (NCCL scales
// the total for non-ring patterns). More heads win, then more heads x bwInter; lower speeds are tried while the
// next one is above 0.49 x the best. Then NCCL's second pass raises bwInter alone, one table step at a time, while
// it is below 2 x bwIntra and (across hosts) the heads' NICs and NIC paths still carry it: the DGX-H100 gets 8 heads,
// bwIntra 40 (9 x 40 = 360 <= 370.8; 50 needs 450), bwInter 60 on one host (the table's top) and 48 across hosts.
SearchedGraph searchNvls(const TopoGraph& g, bool interNode) {
  SearchedGraph out;
  out.id = GraphId::kNvls;
  out.pattern = GraphPattern::kNvls;
  out.interNode = interNode;
  out.sameChannels = false;
  if (!g.nvlsCapable()) return out;
  const auto& nvsNodes = g.nodesOf(NodeType::kNvs);
  std::vector<int> gpus = g.nodesOf(NodeType::kGpu);
  std::sort(gpus.begin(), gpus.end(), [&](int a, int b) { return g.node(a).dev < g.node(b).dev; });
  if (nvsNodes.empty() || gpus.empty()) return out;
  const int nvs = nvsNodes[0];
  const int n = static_cast<int>(gpus.size());
  constexpr int kMaxNvlsArity = 32;
  // Candidate heads: inside a host every GPU; across hosts each NET's closest GPU (once), with that NET.
  struct Head {
    int gpu;
    int net;  // node index, -1 inside a host
  };
  std::vector<Head> candidates;
  if (!interNode) {
    for (int i = 0; i < std::min(n, kMaxNvlsArity); ++i) candidates.push_back({gpus[static_cast<size_t>(i)], -1});
  } else {
    for (int net : g.nodesOf(NodeType::kNet)) {
      int best = -1;
      for (int gpu : gpus) {
        const TopoPath& p = g.path(gpu, net);
        if (p.type == PathType::kDis) continue;
        if (best < 0 || p.type < g.path(best, net).type ||
            (p.type == g.path(best, net).type && p.bw > g.path(best, net).bw + kEps))
          best = gpu;
      }
      bool dup = false;
      for (const Head& h : candidates) dup = dup || h.gpu == best;
      if (best >= 0 && !dup && static_cast<int>(candidates.size()) < std::min(n, kMaxNvlsArity))
        candidates.push_back({best, net});
    }
  }
  if (candidates.empty()) return out;
  double linkBw = kLocBw;  // the narrowest GPU-switch path
  for (int gpu : gpus) linkBw = std::min(linkBw, g.path(gpu, nvs).bw);
  const int sm = maxSm(g);
  const std::vector<double>& speeds = interNode ? (sm >= 100 ? kInterSpeedsSm100 : kInterSpeedsSm90)
                                                : (sm >= 100 ? kIntraSpeedsSm100 : kIntraSpeedsSm90);
  double maxBw = 0;
  for (int a : gpus) {
    if (interNode) {
      for (int net : g.nodesOf(NodeType::kNet)) maxBw = std::max(maxBw, g.path(a, net).bw);
    } else {
      for (int b : gpus) {
        if (a != b) maxBw = std::max(maxBw, g.path(a, b).bw);
      }
    }
  }
  const int minChannels = interNode ? 1 : static_cast<int>(candidates.size());
  const double totalBw = n > 1 ? g.totalGpuBw() * n / (n - 1) : g.totalGpuBw();
  size_t start = 0;
  while (start + 1 < speeds.size() && (speeds[start] > maxBw || speeds[start] * minChannels > totalBw + kEps)) ++start;
  // Heads that fit at (intra, inter) speeds, in candidate order.
  auto fit = [&](double intra, double inter) {
    std::vector<Head> heads;
    for (const Head& h : candidates) {
      if (h.net >= 0 && (g.path(h.gpu, h.net).bw + kEps < inter || netBw(g.node(h.net).speed) + kEps < inter)) continue;
      if ((static_cast<double>(heads.size()) + 2) * intra > linkBw + kEps) break;
      heads.push_back(h);
    }
    if (static_cast<int>(heads.size()) < minChannels) heads.clear();
    return heads;
  };
  std::vector<Head> best;
  double bestIntra = 0, bestInter = 0;
  size_t bestIndex = 0;
  for (size_t i = start; i < speeds.size(); ++i) {
    if (!best.empty() && speeds[i] / bestInter <= 0.49) break;
    std::vector<Head> heads = fit(speeds[i], speeds[i]);
    if (heads.size() > best.size() ||
        (heads.size() == best.size() && heads.size() * speeds[i] > best.size() * bestInter + kEps)) {
      best = heads;
      bestIntra = bestInter = speeds[i];
      bestIndex = i;
    }
  }
  if (best.empty()) return out;
  // Second pass: raise bwInter with the same heads.
  while (bestIndex > 0 && bestInter < 2 * bestIntra) {
    std::vector<Head> heads = fit(bestIntra, speeds[bestIndex - 1]);
    if (heads.size() < best.size()) break;
    bestInter = speeds[--bestIndex];
  }
  out.nChannels = static_cast<int>(best.size());
  out.bwIntra = bestIntra;
  out.bwInter = bestInter;
  out.typeIntra = PathType::kNvl;
  out.typeInter = interNode ? g.path(best[0].gpu, best[0].net).type : PathType::kLoc;
  for (const Head& h : best) {
    TopoChannel ch;
    ch.gpus.push_back(g.node(h.gpu).dev);  // the head first, then the other GPUs in dev order
    for (int gpu : gpus) {
      if (gpu != h.gpu) ch.gpus.push_back(g.node(gpu).dev);
    }
    if (h.net >= 0) ch.netIn = ch.netOut = g.node(h.net).dev;
    out.channels.push_back(ch);
  }
  return out;
}

}  // namespace

SearchedGraph searchGraph(const TopoGraph& g, const SearchOptions& opts) {
  const auto& gpus = g.nodesOf(NodeType::kGpu);
  if (gpus.empty() || (opts.interNode && g.nodesOf(NodeType::kNet).empty())) return fallback(g, opts);
  int sm = maxSm(g);
  const std::vector<double>& speeds = opts.interNode ? (sm >= 100  ? kInterSpeedsSm100
                                                        : sm >= 90 ? kInterSpeedsSm90
                                                                   : kInterSpeeds)
                                                     : (sm >= 100  ? kIntraSpeedsSm100
                                                        : sm >= 90 ? kIntraSpeedsSm90
                                                                   : kIntraSpeeds);
  // maxBw: the widest single path the channel needs; totalBw: what one GPU can move in all.
  double maxBw = 0;
  for (int a : gpus) {
    if (opts.interNode) {
      for (int n : g.nodesOf(NodeType::kNet)) maxBw = std::max(maxBw, g.path(a, n).bw);
    } else {
      for (int b : gpus) {
        if (a != b) maxBw = std::max(maxBw, g.path(a, b).bw);
      }
    }
  }
  if (gpus.size() == 1 && !opts.interNode) maxBw = kLocBw;
  double totalBw = g.totalGpuBw();
  if (gpus.size() == 1 && !opts.interNode) totalBw = kLocBw;
  size_t start = 0;
  while (start + 1 < speeds.size() && (speeds[start] > maxBw || speeds[start] * opts.minChannels > totalBw)) ++start;

  std::vector<PathType> intraTypes = typesPresent(g, false);
  std::vector<PathType> interTypes = opts.interNode ? typesPresent(g, true) : std::vector<PathType>{PathType::kLoc};
  Searcher s(g, opts);
  SearchedGraph best;
  for (size_t i = start; i < speeds.size(); ++i) {
    double speed = speeds[i];
    if (best.nChannels > 0 && speed / best.bwIntra <= 0.49) break;
    SearchedGraph found;
    for (PathType ti : intraTypes) {
      for (PathType te : interTypes) {
        SearchedGraph r = s.attempt(speed, ti, te);
        if (r.nChannels >= opts.minChannels) {
          found = r;
          break;
        }
      }
      if (found.nChannels > 0) break;
    }
    if (found.nChannels * found.bwIntra > best.nChannels * best.bwIntra + kEps) best = found;
    if (best.nChannels > 0 && best.nChannels * best.bwIntra >= totalBw - kEps) break;
  }
  if (best.nChannels == 0) return fallback(g, opts);
  return best;
}

void duplicateChannels(SearchedGraph* graph, int sm) {
  if (graph->bwIntra < 25.0) return;
  if (sm > 80 && graph->bwIntra < 50.0 && graph->nChannels > 4) return;
  if (graph->nChannels * 2 > 64) return;
  std::vector<TopoChannel> copy = graph->channels;
  graph->channels.insert(graph->channels.end(), copy.begin(), copy.end());
  graph->nChannels *= 2;
  graph->bwIntra /= 2;
  graph->bwInter /= 2;
}

HostGraphs searchHostGraphs(const TopoGraph& g, bool interNode, int crossNic) {
  HostGraphs out;
  int sm = maxSm(g);
  SearchOptions ro;
  ro.pattern = GraphPattern::kRing;
  ro.interNode = interNode;
  ro.crossNic = crossNic;
  out.ring = searchGraph(g, ro);
  out.ring.id = GraphId::kRing;
  SearchOptions to = ro;
  // NCCL starts every tree search as a balanced tree and falls back to the plain TREE pattern on sm90+ only when
  // the balanced search does not fill its channels. Inside one host it always does (no NIC to split), so NCCL's
  // single-node tree stays pattern 1 and the model does not apply its 0.85 plain-tree penalty (reference 6.7).
  to.pattern = sm >= 90 && interNode ? GraphPattern::kTree : GraphPattern::kBalancedTree;
  to.minChannels = to.maxChannels = out.ring.nChannels;
  out.tree = searchGraph(g, to);
  out.tree.id = GraphId::kTree;
  duplicateChannels(&out.ring, sm);
  duplicateChannels(&out.tree, sm);
  out.nvls = searchNvls(g, interNode);
  return out;
}

int collChannels(const SearchedGraph& ring) {
  return std::min(64, 2 * ring.nChannels);
}

int netForGpu(const TopoGraph& g, int gpuDev, int channel) {
  int gpu = -1;
  for (int i : g.nodesOf(NodeType::kGpu)) {
    if (g.node(i).dev == gpuDev) gpu = i;
  }
  if (gpu < 0) return -1;
  std::vector<int> nets = g.netsByAffinity(gpu);
  if (nets.empty()) return -1;
  const TopoPath& best = g.path(gpu, nets[0]);
  size_t n = 0;
  while (n < nets.size() && g.path(gpu, nets[n]).type == best.type && g.path(gpu, nets[n]).bw == best.bw) ++n;
  return g.node(nets[static_cast<size_t>(channel) % n]).dev;
}

}  // namespace braid
