// Graphviz rendering of a host's topology with its searched rings and trees drawn on it (braid-topo --dot).
#pragma once

#include <string>

#include "topology/topo_graph.h"
#include "topology/topo_search.h"

namespace braid {

struct DotOptions {
  int maxRings = 4;      // distinct ring orders drawn, one colour each
  bool drawTree = true;  // channel 0's tree, dashed
  std::string title;
};

// A `dot` digraph: one cluster per CPU (NUMA node) holding its PCI switches, GPUs, NICs and NETs; the NVSwitch
// above; every link once, labelled with its type and GB/s; rings as coloured arrows between consecutive GPUs (and
// NETs), the tree as dashed arrows from parent to child.
std::string topoToDot(const TopoGraph& g, const HostGraphs* graphs, const DotOptions& opts);

}  // namespace braid
