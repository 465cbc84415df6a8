// Topology entry points: where a host's topology comes from, how it is dumped, and how hosts exchange it.
//
// The XML document (NCCL's schema, <system version="1">) is the source of truth: discovery produces one, files are
// one, merges and dumps work on documents; a TopoGraph is built from the document when needed. So a dump is exactly
// what the graph was built from, and loading it back gives an identical graph.
//
// Sources, in order:
//   1. NCCL_TOPO_FILE (or NCCL's default /var/run/nvidia-topologyd/virtualTopology.xml when it exists): the file,
//      plus every GPU that discovery found and the file lacks (NCCL's merge: the file wins for what it describes);
//   2. otherwise discovery: hwloc on this machine, or on the hwloc XML named by BRAID_HWLOC_XML; without hwloc (or
//      if it fails) a minimal document from sysfs, so discovery never fails on a working Linux machine.
// Each <cpu> gets this host's host_hash (from NCCL_HOSTID, else the host name and boot id).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "topology/gpu_probe.h"
#include "topology/topo_graph.h"
#include "topology/xml.h"

namespace braid {

struct TopoOptions {
  std::string topoFile;        // NCCL_TOPO_FILE ("" = discover)
  std::string hwlocXml;        // BRAID_HWLOC_XML ("" = this machine)
  std::string hostId;          // NCCL_HOSTID ("" = boot id)
  bool mergeDiscovery = true;  // with topoFile: add discovered GPUs missing from the file
  PathOptions paths;           // NCCL_P2P_LEVEL, ...
  // Tests: these GPUs instead of asking NVML (discovery places them by bus id under hwloc's PCI tree).
  const std::vector<ProbedGpu>* gpus = nullptr;
};
// Everything above from the parameter registry.
Result<TopoOptions> topoOptionsFromParams();

// One host's topology: its document and the graph built from it.
struct TopoSystem {
  std::unique_ptr<XmlNode> xml;  // <system version="1">
  TopoGraph graph;
  std::string hostId;
  std::string source;  // "NCCL_TOPO_FILE /path", "hwloc", "hwloc XML /path", "sysfs"
};

// Builds this host's topology (see the order above). Errors name the file, line and element.
Result<TopoSystem> discoverOrLoad(const TopoOptions& opts);

// Pieces of the above, for tools and tests.
// `gpus`: nullptr asks NVML when discovering this machine (none when replaying an hwloc XML).
Result<std::unique_ptr<XmlNode>> discoverXml(const std::string& hwlocXml, std::string* sourceOut,
                                             const std::vector<ProbedGpu>* gpus = nullptr);
Result<TopoSystem> systemFromXml(std::unique_ptr<XmlNode> xml, const std::string& source, const PathOptions& paths);
Result<TopoSystem> loadTopoFile(const std::string& path, const PathOptions& paths);
// Adds to `base` the GPUs of `found` that `base` lacks, with their PCI ancestors (NCCL's merge order).
void mergeDiscoveredGpus(XmlNode* base, const XmlNode& found);

// NCCL_TOPO_DUMP_FILE: writes the document (called by the rank NCCL_TOPO_DUMP_FILE_RANK names).
Status dumpTopo(const TopoSystem& sys, const std::string& path);

// This host's identity: NCCL_HOSTID, else "hostname:boot id" (as NCCL); every layer groups ranks by it.
std::string localHostId();
// The running kernel's boot id ("" when unreadable): hosts that report the same one share a machine's CPUs.
std::string localBootId();
uint64_t hostHash(const std::string& hostId);

// Host-topology blob for the init allgather: host id and document, length-prefixed; parse verifies everything.
std::string serializeHostTopo(const TopoSystem& sys);
Result<TopoSystem> deserializeHostTopo(const std::string& blob, const PathOptions& paths);

// Groups ranks into nodes by host id: nodeOf[rank] = node index, nodes numbered by first rank.
std::vector<int> groupRanksByHost(const std::vector<std::string>& hostIdOfRank);

}  // namespace braid
