// Communicator-wide channels from every host's searched graphs: NCCL's aggregation, postset and double binary
// trees, and the INFO lines rank 0 logs ("Channel 00/24 : 0 1 2 ...", "Trees [0] 1/-1/-1->0->-1 ...").
//
// Inputs are plain data so the communicator can call this after its init allgather: the host graphs of every node
// (HostGraphs, or deserialised ones), and where each rank sits (its node and its GPU dev; for ranks without a GPU,
// gpuDev = -1 and the node's ranks are taken by NUMA node, then rank, so a ring crosses the socket link twice). Every
// rank computes the same result from the same inputs, so every rank ends up with the same channels.
#pragma once

#include <string>
#include <vector>

#include "src/common/status.h"
#include "topology/topo_search.h"

namespace braid {

struct RankPlacement {
  int node = 0;     // index from groupRanksByHost
  int gpuDev = -1;  // the rank's GPU on its host, -1 for host-memory ranks
  int numa = -1;    // host-memory ranks: the NUMA node the rank runs on; rings visit one NUMA node's ranks together
};

struct TreeLinks {
  int parent = -1;
  std::vector<int> children;  // intra-node child first, then children on other nodes
};

struct CommChannels {
  int nChannels = 0;                                                // after the postset doubling
  double bwIntra = 0, bwInter = 0;                                  // per channel, the minimum over nodes
  PathType typeIntra = PathType::kLoc, typeInter = PathType::kLoc;  // the worst over nodes
  std::vector<std::vector<int>> rings;        // [channel] ranks in ring order (ring[i] sends to ring[i+1])
  std::vector<std::vector<TreeLinks>> trees;  // [channel][rank]
};

// NCCL's aggregation across nodes: fewest channels, lowest bandwidths, worst path types; returned, not in place.
SearchedGraph aggregateGraphs(const std::vector<const SearchedGraph*>& perNode);

// Builds rings and trees. perNode[n] holds node n's graphs; ranks[r] says where rank r is. Errors when a node has
// no rank or a rank names a node or GPU that does not exist.
Result<CommChannels> buildCommChannels(const std::vector<HostGraphs>& perNode, const std::vector<RankPlacement>& ranks);

// NCCL's binary tree over n nodes: parent and up to two children of node r (-1 when absent).
void binaryTree(int n, int r, int* parent, int* child0, int* child1);
// The second tree of the double binary tree: the mirror for even n, the shift by one for odd n.
void mirrorTree(int n, int r, int* parent, int* child0, int* child1);

std::vector<std::string> ringLogLines(const CommChannels& ch);
std::string treeLogLine(const CommChannels& ch, int rank);

}  // namespace braid
