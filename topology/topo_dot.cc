#include "topology/topo_dot.h"

#include <set>

namespace braid {

namespace {

const char* const kRingColours[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string dotId(int i) {
  return "n" + std::to_string(i);
}

std::string nodeAttrs(const TopoGraph& g, int i) {
  const TopoNode& n = g.node(i);
  switch (n.type) {
    case NodeType::kGpu:
      return strPrintf("label=\"GPU %d\\n%s\\nsm%d\", fillcolor=\"#76b900\", fontcolor=white", n.dev, n.busId.c_str(),
                       n.sm);
    case NodeType::kPci:
      return strPrintf("label=\"PCIe switch\\n%s\", fillcolor=\"#dddddd\"", n.busId.c_str());
    case NodeType::kNvs:
      return "label=\"NVSwitch\", fillcolor=\"#4a4a4a\", fontcolor=white, shape=hexagon";
    case NodeType::kCpu:
      return strPrintf("label=\"CPU %lld\\n%s\", fillcolor=\"#9ecae1\", shape=box3d", static_cast<long long>(n.id),
                       n.vendor.c_str());
    case NodeType::kNic:
      return strPrintf("label=\"NIC\\n%s\", fillcolor=\"#fdd0a2\"", n.busId.empty() ? "-" : n.busId.c_str());
    case NodeType::kNet:
      return strPrintf("label=\"NET %d\\n%s %lldG\", fillcolor=\"#fdae6b\", shape=ellipse", n.dev, n.netName.c_str(),
                       static_cast<long long>(n.speed / 1000));
  }
  return "";
}

int gpuByDev(const TopoGraph& g, int dev) {
  for (int i : g.nodesOf(NodeType::kGpu)) {
    if (g.node(i).dev == dev) return i;
  }
  return -1;
}

}  // namespace

std::string topoToDot(const TopoGraph& g, const HostGraphs* graphs, const DotOptions& opts) {
  std::string out = "digraph topology {\n";
  out += "  graph [fontname=\"Helvetica\", rankdir=TB, nodesep=0.25, ranksep=0.6";
  if (!opts.title.empty()) out += ", label=\"" + opts.title + "\", labelloc=t, fontsize=20";
  out += "];\n  node [fontname=\"Helvetica\", shape=box, style=\"filled,rounded\", fontsize=10];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=8, dir=none, color=\"#888888\"];\n";
  for (int cpu : g.nodesOf(NodeType::kCpu)) {
    out += strPrintf("  subgraph cluster_cpu%d {\n    label=\"NUMA node %lld\"; style=dashed; color=\"#6baed6\";\n",
                     cpu, static_cast<long long>(g.node(cpu).id));
    for (int i = 0; i < g.numNodes(); ++i) {
      const TopoNode& n = g.node(i);
      if (n.cpu == cpu || i == cpu) out += "    " + dotId(i) + " [" + nodeAttrs(g, i) + "];\n";
    }
    out += "  }\n";
  }
  for (int i = 0; i < g.numNodes(); ++i) {
    if (g.node(i).cpu < 0 && g.node(i).type != NodeType::kCpu) out += "  " + dotId(i) + " [" + nodeAttrs(g, i) + "];\n";
  }
  // GPUs on one row.
  if (!g.nodesOf(NodeType::kGpu).empty()) {
    out += "  { rank=same;";
    for (int i : g.nodesOf(NodeType::kGpu)) out += " " + dotId(i) + ";";
    out += " }\n";
  }
  // Links, once per pair and type.
  std::set<std::tuple<int, int, int>> seen;
  for (int i = 0; i < g.numNodes(); ++i) {
    for (const TopoLink& l : g.node(i).links) {
      int a = std::min(i, l.remote), b = std::max(i, l.remote);
      if (!seen.insert({a, b, static_cast<int>(l.type)}).second) continue;
      const char* colour = l.type == LinkType::kNvl ? "#76b900" : l.type == LinkType::kSys ? "#3182bd" : "#888888";
      // NVLink edges to the switch are drawn thick; the CPU-CPU link does not shape the layout.
      out += strPrintf("  %s -> %s [label=\"%s %.1f\", color=\"%s\"%s%s];\n", dotId(i).c_str(), dotId(l.remote).c_str(),
                       linkTypeName(l.type), l.bw, colour, l.type == LinkType::kNvl ? ", penwidth=2" : "",
                       l.type == LinkType::kSys ? ", constraint=false" : "");
    }
  }
  if (graphs) {
    std::set<std::vector<int>> drawn;
    int colour = 0;
    const SearchedGraph& ring = graphs->ring;
    for (size_t c = 0; c < ring.channels.size() && colour < opts.maxRings; ++c) {
      const TopoChannel& ch = ring.channels[c];
      std::vector<int> key = ch.gpus;
      key.push_back(ch.netIn);
      if (ch.gpus.size() < 2 || !drawn.insert(key).second) continue;
      const char* col = kRingColours[colour++ % 6];
      std::vector<int> seq;
      if (ch.netIn >= 0) seq.push_back(g.findNode(NodeType::kNet, ch.netIn));
      for (int dev : ch.gpus) seq.push_back(gpuByDev(g, dev));
      if (ch.netOut >= 0) {
        seq.push_back(g.findNode(NodeType::kNet, ch.netOut));
      } else if (ch.netIn < 0) {
        seq.push_back(seq.front());
      }
      for (size_t k = 0; k + 1 < seq.size(); ++k) {
        out += strPrintf("  %s -> %s [dir=forward, color=\"%s\", penwidth=1.5, constraint=false%s];\n",
                         dotId(seq[k]).c_str(), dotId(seq[k + 1]).c_str(), col,
                         k == 0 ? strPrintf(", xlabel=\"ring %zu\", fontcolor=\"%s\"", c, col).c_str() : "");
      }
    }
    if (opts.drawTree && !graphs->tree.channels.empty()) {
      const TopoChannel& ch = graphs->tree.channels[0];
      std::vector<int> seq;
      if (ch.netIn >= 0) seq.push_back(g.findNode(NodeType::kNet, ch.netIn));
      for (int dev : ch.gpus) seq.push_back(gpuByDev(g, dev));
      for (size_t k = 0; k + 1 < seq.size(); ++k) {
        out += strPrintf("  %s -> %s [dir=forward, style=dashed, color=\"#333333\", constraint=false%s];\n",
                         dotId(seq[k]).c_str(), dotId(seq[k + 1]).c_str(), k == 0 ? ", xlabel=\"tree 0\"" : "");
      }
    }
  }
  out += "}\n";
  return out;
}

}  // namespace braid
