#include "topology/topo_init.h"

#include <cstdlib>

#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {

Result<TopoSystem> initHostTopology(int rank) {
  BRAID_ASSIGN_OR_RETURN(TopoOptions opts, topoOptionsFromParams());
  BRAID_ASSIGN_OR_RETURN(TopoSystem sys, discoverOrLoad(opts));
  std::string dump = params::TopoDumpFile();
  if (!dump.empty() && rank == params::TopoDumpFileRank()) BRAID_RETURN_IF_ERROR(dumpTopo(sys, dump));
  return sys;
}

Result<HostGraphs> computeHostGraphs(const TopoSystem& sys, bool interNode, int rank) {
  HostGraphs out;
  std::string file = params::GraphFile();
  if (!file.empty()) {
    BRAID_ASSIGN_OR_RETURN(auto xml, parseXmlFile(file));
    BRAID_ASSIGN_OR_RETURN(std::vector<SearchedGraph> graphs, graphsFromXml(*xml, file, sys.graph));
    bool haveRing = false;
    for (SearchedGraph& g : graphs) {
      if (g.id == GraphId::kRing) {
        out.ring = g;
        haveRing = true;
      } else if (g.id == GraphId::kTree) {
        out.tree = g;
      } else if (g.id == GraphId::kNvls) {
        out.nvls = g;
      }
    }
    if (!haveRing) return invalidArgument("NCCL_GRAPH_FILE %s has no ring graph (id 0)", file.c_str());
    if (out.tree.nChannels == 0) {
      out.tree = out.ring;
      out.tree.id = GraphId::kTree;
      out.tree.pattern = GraphPattern::kTree;
    }
    BRAID_INFO(kLogGraph, "graphs from NCCL_GRAPH_FILE %s", file.c_str());
  } else {
    int crossNic = static_cast<int>(params::CrossNic());
    out = searchHostGraphs(sys.graph, interNode, crossNic < 0 || crossNic > 2 ? 2 : crossNic);
  }
  BRAID_INFO(kLogGraph, "ring graph: %s", describeGraph(out.ring).c_str());
  BRAID_INFO(kLogGraph, "tree graph: %s", describeGraph(out.tree).c_str());
  std::string dump = params::GraphDumpFile();
  if (!dump.empty() && rank == params::GraphDumpFileRank()) {
    std::vector<const SearchedGraph*> list{&out.ring, &out.tree};
    if (out.nvls.nChannels > 0) list.push_back(&out.nvls);
    BRAID_RETURN_IF_ERROR(writeXmlFile(*graphsToXml(list), dump));
  }
  return out;
}

void logChannels(const CommChannels& ch, int rank) {
  if (rank == 0) {
    for (const std::string& line : ringLogLines(ch)) BRAID_INFO(kLogInit, "%s", line.c_str());
  }
  if (rank >= 0 && !ch.trees.empty() && rank < static_cast<int>(ch.trees[0].size())) {
    BRAID_INFO(kLogInit, "%s", treeLogLine(ch, rank).c_str());
  }
}

std::vector<int> cpusOfAffinity(const std::string& mask) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : mask) {
    if (c == ',') {
      words.push_back(cur);
      cur.clear();
    } else if (isxdigit(static_cast<unsigned char>(c))) {
      cur.push_back(c);
    } else if ((c == 'x' || c == 'X') && cur == "0") {
      cur.clear();  // a 0x prefix
    } else {
      return {};
    }
  }
  words.push_back(cur);
  std::vector<int> cpus;
  int base = 0;
  for (size_t i = words.size(); i-- > 0; base += 32) {
    if (words[i].size() > 8) return {};
    unsigned long w = strtoul(words[i].empty() ? "0" : words[i].c_str(), nullptr, 16);
    for (int b = 0; b < 32; ++b) {
      if (w & (1ul << b)) cpus.push_back(base + b);
    }
  }
  return cpus;
}

int numaOf(const TopoGraph& g, int node) {
  if (node < 0 || node >= g.numNodes()) return -1;
  int cpu = g.node(node).type == NodeType::kCpu ? node : g.node(node).cpu;
  return cpu < 0 ? -1 : static_cast<int>(g.node(cpu).id);
}

}  // namespace braid
