// What communicator init calls (src/core/comm_topo.cc; docs/topology.md "At communicator init").
//
//   1. auto sys = initHostTopology(rank);                        // discovery or NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE
//   2. blob = serializeHostTopo(sys) ; allgather blobs, host ids  // bootstrap (src/core)
//   3. nodeOf = groupRanksByHost(hostIds) ; one TopoSystem per node from deserializeHostTopo
//   4. graphs[n] = computeHostGraphs(node n's system, nNodes > 1, rank)   // NCCL_GRAPH_FILE / _DUMP_FILE
//   5. channels = buildCommChannels(graphs, placements) ; logChannels(channels, rank)
// Every rank runs 3-5 on the same gathered data, so every rank gets the same channels.
#pragma once

#include <vector>

#include "src/common/status.h"
#include "topology/topo.h"
#include "topology/topo_channels.h"
#include "topology/topo_search.h"

namespace braid {

// This host's topology from the registry's knobs; rank NCCL_TOPO_DUMP_FILE_RANK writes NCCL_TOPO_DUMP_FILE.
Result<TopoSystem> initHostTopology(int rank);

// Ring/tree/NVLS graphs of one host: NCCL_GRAPH_FILE when set (checked against the topology), else the search with
// NCCL_CROSS_NIC; rank NCCL_GRAPH_DUMP_FILE_RANK writes NCCL_GRAPH_DUMP_FILE. Logs the graphs at INFO (GRAPH).
Result<HostGraphs> computeHostGraphs(const TopoSystem& sys, bool interNode, int rank);

// INFO lines in NCCL's style: rank 0 logs every "Channel cc/NN : ..." line; each rank logs its "Trees ..." line.
void logChannels(const CommChannels& ch, int rank);

// CPUs of a NUMA node from its <cpu affinity> mask (NCCL's comma-separated 32-bit hex words); empty if unknown.
// For placing a rank's worker threads and shared segments on its NUMA node.
std::vector<int> cpusOfAffinity(const std::string& mask);
// The NUMA node (CPU node id) closest to a GPU or NIC node, or -1.
int numaOf(const TopoGraph& g, int node);

}  // namespace braid
