// NCCL's GPU tuning model (graph/tuning.cc, reference/nccl.md section 6) over braid's searched topology graphs.
//
// For every (collective, algorithm, protocol) the model gives a bus bandwidth and a latency from the searched
// graph of that algorithm (channels x per-channel GB/s, path types), the GPU generation, the CPU vendor and the
// node count; an operation of n bytes is predicted to take
//     time = latency x latCount + n / (1000 x algBw)   (us; algBw = busBw converted to the algorithm's bytes)
// and the selector takes the argmin over the enabled pairs. It is a model of NCCL's model, not of the hardware:
// the constants are NCCL's (2.30.7), so braid on a GPU machine picks what NCCL would pick. CUDA communicators
// choose with it when the topology shows their GPUs (src/core/comm_topo.h, gpuModelFor); `braid-topo --tune`
// prints the tables and the choices for a topology file.
//
// Inputs are a narrow struct (GpuModelInput), built from a host topology and its searched graphs by
// gpuModelInputFrom(), or by hand in tests. Everything here is a pure function of that struct.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/selector/algo_filter.h"
#include "algorithms/selector/sym_model.h"
#include "src/common/status.h"
#include "topology/topo.h"
#include "topology/topo_search.h"

namespace braid {

// NCCL's compute-capability index: Volta 0 (and older), Ampere 1, Hopper 2, Blackwell 3.
enum class GpuArch : int { kVolta = 0, kAmpere = 1, kHopper = 2, kBlackwell = 3 };
constexpr int kGpuArchs = 4;
GpuArch gpuArchOf(int sm);  // sm 90 -> kHopper

// NCCL's CPU classes as the model uses them: AMD (or a mix) raises the ring's per-step network overhead and picks
// the second llMaxBw row across nodes; Power de-penalises PCI Tree/Simple latency.
enum class CpuVendor : int { kIntel = 0, kAmd = 1, kOther = 2 };
enum class CpuArch : int { kX86 = 0, kPower = 1, kArm = 2 };

// One algorithm's searched graph, as the model reads it.
struct GraphFigures {
  int nChannels = 0;
  double bwIntra = 0;  // GB/s per channel inside a node
  double bwInter = 0;  // GB/s per channel across nodes
  PathType typeIntra = PathType::kLoc;
  PathType typeInter = PathType::kLoc;
  double latencyInter = 0;   // us, the NIC's reported latency (NCCL's graph latencyInter)
  bool sameChannels = true;  // Broadcast/Reduce ring latency: one hop when every channel repeats the first
  bool plainTree = false;    // the tree graph used NCCL's plain TREE pattern (bw x 0.85)
};

// NCCL's constants the model starts from (what a v5+ tuner plugin's init() receives): latencies in us
// [algorithm][protocol] and [link: NVLink, PCI, network][algorithm][protocol]; bandwidth caps in GB/s [GPU arch][1
// node, 2 nodes, >= 3 nodes].
struct GpuConstants {
  double baseLat[kAlgos][kProtos];
  double hwLat[3][kAlgos][kProtos];
  double llMaxBw[kGpuArchs][3];
  double perChMaxRingLL128Bw[kGpuArchs][3];
  double perChMaxTreeLL128Bw[kGpuArchs][3];
  double perChMaxTreeBw[kGpuArchs][3];
  double perChMaxNvlsTreeBw[kGpuArchs][3];
};
const GpuConstants& ncclGpuConstants();

struct GpuModelInput {
  int nRanks = 1;
  int nNodes = 1;
  int minSm = 90, maxSm = 90;  // compute capability x 10 over all GPUs
  CpuVendor cpuVendor = CpuVendor::kIntel;
  CpuArch cpuArch = CpuArch::kX86;
  int commChannels = 0;  // channels the communicator runs (the ring-Simple plateau rule divides by them)
  // Per algorithm (AlgoId order): Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT. NCCL gives PAT the
  // tree's graph and NVLSTree the NVLS graph; the CollNet ones are only used when collNetSupport is set.
  std::array<GraphFigures, kAlgos> graphs{};
  bool nvlsSupport = false;     // NVSwitch + sm90 + multicast (the NVLS graph found heads)
  bool collNetSupport = false;  // a collnet (SHARP) plugin: braid has none
  bool patEnable = true;        // NCCL_PAT_ENABLE; PAT runs only with one rank per node
  int ll128Setting = 2;         // NCCL_LL128 style: 0 off, 1 forced on, 2 auto (the path-type rule below)
  bool allNvlink = false;       // every pair of the GPUs joined by NVLink (path NVL): NCCL's isAllDirectNvlink
  // braid's NVLS-style path on a CUDA communicator (sym_model.h): its lanes (0: none) and whether the model may take
  // it. Not part of NCCL's tables: the selector prices that path separately (directShapeOf).
  int directLanes = 0;
  bool directByModel = false;  // BRAID_GPU_DIRECT_AUTO=1 on every rank
  Filter algoFilter;           // NCCL_ALGO
  Filter protoFilter;          // NCCL_PROTO
  // The constants the tables start from: a v5+ tuner plugin's edited ones (src/core/tuner_plugin.cc reads them
  // back after its init); null: NCCL's (ncclGpuConstants).
  std::shared_ptr<const GpuConstants> constants;
  const GpuConstants& k() const { return constants ? *constants : ncclGpuConstants(); }
  int ppn() const { return nRanks / (nNodes > 0 ? nNodes : 1); }
};

// The tuning tables: bandwidth in GB/s (bus bytes), latency in us; 0 bandwidth = disabled.
struct GpuModel {
  GpuModelInput in;
  double busBw[kFilterColls][kAlgos][kProtos] = {};
  double algBw[kFilterColls][kAlgos][kProtos] = {};  // busBw converted as NCCL does (what time() divides by)
  double latency[kFilterColls][kAlgos][kProtos] = {};
  bool enabled(FilterColl c, AlgoId a, ProtoId p) const {
    return algBw[static_cast<int>(c)][static_cast<int>(a)][static_cast<int>(p)] > 0;
  }
};

// Builds the tables (NCCL's ncclTopoTuneModel).
GpuModel buildGpuModel(const GpuModelInput& in);

// Why a pair is off, or "" when it is on: "not implemented for this collective", "NCCL_PROTO", "LL128 path rule",
// "needs NVLS", ... (braid-topo prints it; tests check the rule that fired).
std::string disabledReason(const GpuModelInput& in, FilterColl c, AlgoId a, ProtoId p);

// Whether every pair of these GPU nodes is joined by NVLink (path NVL, NVSwitch included); a node listed twice (two
// ranks on one GPU) counts as joined to itself. NCCL's isAllDirectNvlink, for GpuModelInput::allNvlink.
bool allJoinedByNvlink(const TopoGraph& g, const std::vector<int>& gpuNodes);

// NCCL's model restricted to what braid runs on GPUs: LL128 only when NCCL_PROTO forces it (braid's LL128 kernel has
// not run on a GPU), no NVLS algorithm of NCCL's (braid's NVLS-style path is priced by predictDirectGpuUs instead),
// no CollNet (no plugin) and no PAT (not built for GPUs). CUDA communicators and braid-topo --tune use it.
void restrictToBraidGpu(GpuModelInput* in);

// The NVLS-style path's shape for predictDirectGpuUs.
DirectGpuShape directShapeOf(const GpuModelInput& in);

// Predicted microseconds for nBytes (the largest buffer of the operation), or -1 when the pair is disabled.
// latCount: ops aggregated in one launch (1 for a lone collective).
double predictGpuUs(const GpuModel& m, FilterColl c, AlgoId a, ProtoId p, size_t nBytes, int numPipeOps = 1);
// NCCL's empirical tree correction for AllReduce: bandwidth x factor[proto][log2(nBytes / 64)] (1 outside the table).
double treeCorrection(ProtoId p, size_t nBytes);

struct GpuChoice {
  AlgoId algo = AlgoId::kRing;
  ProtoId proto = ProtoId::kSimple;
  double timeUs = -1;  // -1: nothing enabled
};
// argmin over the enabled pairs (ties keep NCCL's order: algorithm, then protocol).
GpuChoice selectGpu(const GpuModel& m, FilterColl c, size_t nBytes, int numPipeOps = 1);

// The model's input for a communicator over `nNodes` copies of this host, one rank per GPU: figures from the host's
// searched graphs (aggregated across nodes as NCCL's postset does), CPU vendor and arch from the topology, NVLS from
// the NVLS graph. NCCL_ALGO / NCCL_PROTO are not read here (callers set the filters).
Result<GpuModelInput> gpuModelInputFrom(const TopoGraph& g, const HostGraphs& graphs, int nNodes);

// NCCL's TUNING dump: the bandwidth/latency table for one collective, and a size sweep (time of every enabled pair
// and the choice) from minBytes to maxBytes by `factor`.
std::string describeGpuModel(const GpuModel& m, FilterColl c);
std::string describeGpuSweep(const GpuModel& m, FilterColl c, size_t minBytes, size_t maxBytes, size_t factor);

// "allreduce" -> kAllReduce (also all_reduce, reducescatter, reduce_scatter, ...).
Result<FilterColl> parseGpuColl(const std::string& name);

}  // namespace braid
