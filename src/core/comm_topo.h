// The topology stage of communicator init: every rank finds its host's topology (discovery, or NCCL_TOPO_FILE),
// the first rank of each host shares it, and every rank builds the same rings and trees from the same gathered
// data (NCCL's initTransportsRank order: peer info, system, paths, search, postset).
//
// Host-memory ranks have no GPU, so the search's rings visit a host's ranks NUMA node by NUMA node; each rank's
// NUMA node is where its worker threads and the FIFOs it receives into are placed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/selector/cost_model.h"
#include "algorithms/selector/gpu_model.h"
#include "src/bootstrap/bootstrap.h"
#include "src/common/status.h"
#include "topology/topo_channels.h"
#include "transports/transport.h"

namespace braid {

struct CommTopology {
  int nNodes = 1;
  std::vector<int> nodeOf;       // [rank] node index (nodes numbered by their first rank)
  std::vector<int> firstRankOf;  // [node] its first rank
  std::vector<int> ranksOn;      // [node] how many ranks it has
  int localRank = 0;             // this rank's index among its host's ranks
  int localRanks = 1;
  std::vector<int> numaOf;     // [rank] NUMA node (CPU node id), -1 when unknown
  std::vector<int> placeCpus;  // CPUs of this rank's NUMA node it may use; empty: leave its threads unbound
  CommChannels search;         // rings and trees as the search built them (the search's channel count)
  std::string source;          // where this host's topology came from
  std::string summary;         // one line for the INIT log
  bool netPeers = false;       // some peer is reached through a network transport (set by the communicator)
  // The CPU of its own this rank's collectives run on (BRAID_PLACE_THREADS): local rank i on the i-th CPU of its
  // process's mask (on a NUMA host, of its node's), when that mask holds every online CPU; -1 otherwise.
  int homeCpu = -1;
  // CUDA ranks: [rank] whether this rank's GPU and that rank's (same host) may use P2P by the host's topology and
  // NCCL_P2P_LEVEL / NCCL_P2P_DISABLE (1 yes, 0 no, -1 unknown: a GPU the topology does not show), and the path.
  std::vector<int8_t> p2pOk;
  std::vector<std::string> p2pPath;
  // CUDA ranks whose GPUs every host's topology shows: NCCL's GPU tuning model's input, from the first host's
  // graphs (the same on every rank); null otherwise.
  std::shared_ptr<GpuModelInput> gpuModel;
};

// Collective over `bs`: runs discovery (cached per process), writes NCCL_TOPO_DUMP_FILE / NCCL_GRAPH_DUMP_FILE on
// the ranks that name them, exchanges host topologies (one per host) and builds the channels. `hostHashOfRank`
// and `gpuBusOfRank` ("0000:18:00.0", empty for a host rank) come from the init exchange. Errors name the file or
// rank that caused them.
Result<CommTopology> buildCommTopology(Bootstrap* bs, int rank, int nranks, const std::vector<uint64_t>& hostHashOfRank,
                                       const std::vector<std::string>& gpuBusOfRank = {});

// For a CUDA communicator: NCCL's GPU tuning model over `topo` with the communicator's filters and channel count,
// restricted to what braid runs (restrictToBraidGpu; the NVLS-style path is priced once the backend set it up:
// Communicator::priceDirectOnGpu); null when the topology does not show every rank's GPU. Logs which model
// chooses, and why, at INFO.
std::shared_ptr<const GpuModel> gpuModelFor(const CommTopology& topo, const Filter& algo, const Filter& proto,
                                            int channels, int rank);

// "dddd:bb:dd.0" for a backend's gpuPciId (src/backends/backend.h), "" for 0 (no GPU).
std::string gpuBusId(uint64_t gpuPciId);

// Which peers (by rank) this CUDA rank reaches over P2P: itself, a rank on the same GPU, and host peers whose GPU
// the topology allows (CommTopology::p2pOk); where the topology does not show both GPUs, ranks of this process ask
// the driver (cuDeviceCanAccessPeer both ways) and ranks of other processes do not use P2P. NCCL_P2P_DISABLE=1:
// none but itself. Logs the decision per peer at INFO. Both ends of a pair decide alike.
std::vector<uint8_t> p2pPeers(const CommTopology& topo, int rank, const std::vector<PeerInfo>& peers,
                              const DeviceMemory& device);

// The ring of each of the communicator's `nch` channels: the search's rings, reused in turn when the communicator
// runs more channels than the search made. Errors when a ring is not a permutation of the ranks.
Result<std::vector<std::vector<int>>> ringsForChannels(const CommChannels& search, int nch, int nranks);

// The two trees of the double binary tree, [tree][rank]. Over several hosts, NCCL's: a chain inside each host and
// binary trees (the second mirrored) between the hosts' first ranks, so each tree crosses the network once per
// host. On one host, balanced binary trees over `order` (positions in channel 0's ring, so a subtree stays on a
// NUMA node): host memory has no reason for NCCL's intra-node chain, which is as deep as the host has ranks.
std::vector<std::vector<TreeLinks>> commTrees(const CommTopology& topo, const std::vector<int>& order);

// INFO lines in NCCL's style for what runs: rank 0 logs "Channel cc/NN : r0 r1 ..." for each channel; every rank
// logs its "Trees [0] c0/c1/c2->rank->parent [1] ..." line, where [w] is tree w of the double binary tree (every
// channel carries both, each with half of the channel's data).
void logCommChannels(const std::vector<std::vector<int>>& rings, const std::vector<std::vector<TreeLinks>>& trees,
                     int rank);

// Collective, for a communicator over several hosts: the network's figures for the cost model. The first rank of
// each host times a few bootstrap round trips to the next host's first rank (the same network path; a tc netem
// delay shows up here), every rank takes the largest; the bandwidth is the smallest of every rank's network
// device speed. A tuning file's "net" line replaces both. Every rank gets the same NetShape.
// `transports`: the backend's, in order; the first network among them reports the link's bandwidth.
Result<NetShape> measureNetwork(Bootstrap* bs, int rank, int nranks, const CommTopology& topo, const CostModel& costs,
                                double hostHopUs, const std::vector<Transport*>& transports);

// The NUMA node a host-memory rank runs on: the node holding all of `processCpus` when there is one, else the
// local ranks are spread over the nodes in blocks (local rank i of n on node i * nodes / n). `nodeCpus[k]` are the
// CPUs of the k-th NUMA node in id order. Returns the index into nodeCpus, or -1 when there are none.
int pickNumaNode(const std::vector<std::vector<int>>& nodeCpus, const std::vector<int>& processCpus, int localRank,
                 int localRanks);

}  // namespace braid
