#include "topology/topo_channels.h"

#include <algorithm>

namespace braid {

SearchedGraph aggregateGraphs(const std::vector<const SearchedGraph*>& perNode) {
  SearchedGraph out = *perNode.front();
  for (const SearchedGraph* g : perNode) {
    out.nChannels = std::min(out.nChannels, g->nChannels);
    out.bwIntra = std::min(out.bwIntra, g->bwIntra);
    out.bwInter = std::min(out.bwInter, g->bwInter);
    out.typeIntra = std::max(out.typeIntra, g->typeIntra);
    out.typeInter = std::max(out.typeInter, g->typeInter);
    out.crossNic = std::max(out.crossNic, g->crossNic);
  }
  out.channels.resize(static_cast<size_t>(out.nChannels));
  return out;
}

void binaryTree(int n, int r, int* parent, int* child0, int* child1) {
  *parent = *child0 = *child1 = -1;
  if (n <= 1 || r < 0 || r >= n) return;
  if (r == 0) {
    int pow2 = 1;
    while (pow2 < n) pow2 <<= 1;
    *child0 = pow2 >> 1;
    return;
  }
  int bit = r & -r;
  int up = (r ^ bit) | (bit << 1);
  *parent = up >= n ? (r ^ bit) : up;
  int half = bit >> 1;
  if (half == 0) return;  // odd ranks are leaves
  *child0 = r - half;
  int off = half;
  while (off > 0 && r + off >= n) off >>= 1;
  if (off > 0) *child1 = r + off;
}

void mirrorTree(int n, int r, int* parent, int* child0, int* child1) {
  int p = -1, c0 = -1, c1 = -1;
  if (n % 2 == 0) {
    binaryTree(n, n - 1 - r, &p, &c0, &c1);
    auto map = [n](int x) { return x < 0 ? -1 : n - 1 - x; };
    *parent = map(p);
    *child0 = map(c0);
    *child1 = map(c1);
  } else {
    binaryTree(n, (r - 1 + n) % n, &p, &c0, &c1);
    auto map = [n](int x) { return x < 0 ? -1 : (x + 1) % n; };
    *parent = map(p);
    *child0 = map(c0);
    *child1 = map(c1);
  }
}

namespace {

// A node's ranks in a channel's GPU order; GPUs without a rank are skipped, ranks without a GPU come last, by NUMA
// node then rank.
std::vector<int> nodeOrder(const TopoChannel* ch, const std::vector<int>& nodeRanks,
                           const std::vector<RankPlacement>& ranks) {
  std::vector<int> out;
  if (ch) {
    for (int dev : ch->gpus) {
      for (int r : nodeRanks) {
        if (ranks[r].gpuDev == dev && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
      }
    }
  }
  std::vector<int> rest;
  for (int r : nodeRanks) {
    if (std::find(out.begin(), out.end(), r) == out.end()) rest.push_back(r);
  }
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return ranks[a].numa < ranks[b].numa; });
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace

Result<CommChannels> buildCommChannels(const std::vector<HostGraphs>& perNode,
                                       const std::vector<RankPlacement>& ranks) {
  int nNodes = static_cast<int>(perNode.size());
  if (nNodes == 0 || ranks.empty()) return invalidArgument("buildCommChannels: no nodes or no ranks");
  std::vector<std::vector<int>> nodeRanks(static_cast<size_t>(nNodes));
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].node < 0 || ranks[r].node >= nNodes) {
      return invalidArgument("rank %zu is on node %d, but there are %d nodes", r, ranks[r].node, nNodes);
    }
    nodeRanks[static_cast<size_t>(ranks[r].node)].push_back(static_cast<int>(r));
  }
  for (int n = 0; n < nNodes; ++n) {
    if (nodeRanks[n].empty()) return invalidArgument("node %d has no rank", n);
  }
  std::vector<const SearchedGraph*> rings, trees;
  for (const HostGraphs& h : perNode) {
    rings.push_back(&h.ring);
    trees.push_back(&h.tree);
  }
  SearchedGraph ring = aggregateGraphs(rings);
  SearchedGraph tree = aggregateGraphs(trees);
  int nSearch = std::max(1, std::min(ring.nChannels, tree.nChannels));
  CommChannels out;
  out.nChannels = std::min(64, 2 * nSearch);
  out.bwIntra = ring.bwIntra;
  out.bwInter = ring.bwInter;
  out.typeIntra = ring.typeIntra;
  out.typeInter = ring.typeInter;
  int nRanks = static_cast<int>(ranks.size());
  for (int c = 0; c < out.nChannels; ++c) {
    int sc = c % nSearch;
    std::vector<int> order;
    for (int n = 0; n < nNodes; ++n) {
      const auto& chans = perNode[n].ring.channels;
      const TopoChannel* ch = sc < static_cast<int>(chans.size()) ? &chans[sc] : nullptr;
      for (int r : nodeOrder(ch, nodeRanks[n], ranks)) order.push_back(r);
    }
    out.rings.push_back(order);

    std::vector<TreeLinks> links(static_cast<size_t>(nRanks));
    std::vector<std::vector<int>> chains(static_cast<size_t>(nNodes));
    for (int n = 0; n < nNodes; ++n) {
      const auto& chans = perNode[n].tree.channels;
      const TopoChannel* ch = sc < static_cast<int>(chans.size()) ? &chans[sc] : nullptr;
      chains[n] = nodeOrder(ch, nodeRanks[n], ranks);
    }
    bool second = c >= nSearch;  // channels c and c + nSearch use the two trees of the double binary tree
    for (int n = 0; n < nNodes; ++n) {
      int p, c0, c1;
      if (second) {
        mirrorTree(nNodes, n, &p, &c0, &c1);
      } else {
        binaryTree(nNodes, n, &p, &c0, &c1);
      }
      const std::vector<int>& chain = chains[n];
      for (size_t i = 0; i < chain.size(); ++i) {
        TreeLinks& t = links[chain[i]];
        if (i + 1 < chain.size()) t.children.push_back(chain[i + 1]);
        if (i > 0) {
          t.parent = chain[i - 1];
        } else {
          t.parent = p >= 0 ? chains[p].front() : -1;
          for (int child : {c0, c1}) {
            if (child >= 0) t.children.push_back(chains[child].front());
          }
        }
      }
    }
    out.trees.push_back(links);
  }
  return out;
}

std::vector<std::string> ringLogLines(const CommChannels& ch) {
  std::vector<std::string> out;
  for (int c = 0; c < ch.nChannels; ++c) {
    std::string line = strPrintf("Channel %02d/%02d :", c, ch.nChannels);
    for (int r : ch.rings[c]) line += strPrintf(" %d", r);
    out.push_back(line);
  }
  return out;
}

std::string treeLogLine(const CommChannels& ch, int rank) {
  std::string line = "Trees";
  for (int c = 0; c < ch.nChannels; ++c) {
    const TreeLinks& t = ch.trees[c][rank];
    int kids[3] = {-1, -1, -1};
    for (size_t i = 0; i < t.children.size() && i < 3; ++i) kids[i] = t.children[i];
    line += strPrintf(" [%d] %d/%d/%d->%d->%d", c, kids[0], kids[1], kids[2], rank, t.parent);
  }
  return line;
}

}  // namespace braid
