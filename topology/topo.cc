#include "topology/topo.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {

namespace {

constexpr const char* kNvidiaVirtualTopo = "/var/run/nvidia-topologyd/virtualTopology.xml";
constexpr const char* kBlobMagic = "BRAIDTOPO1";

bool fileExists(const std::string& path) {
  return access(path.c_str(), R_OK) == 0;
}

bool containsGpu(const XmlNode& n) {
  if (n.name == "gpu") return true;
  for (const auto& c : n.children) {
    if (containsGpu(*c)) return true;
  }
  return false;
}

// Copies an element's name and attributes, not its children.
std::unique_ptr<XmlNode> shell(const XmlNode& n) {
  auto s = std::make_unique<XmlNode>();
  s->name = n.name;
  s->attrs = n.attrs;
  return s;
}

void mergePciChildren(XmlNode* base, const XmlNode& found) {
  for (const auto& c : found.children) {
    if (c->name != "pci" || !containsGpu(*c)) continue;
    XmlNode* existing = base->findChild("pci", "busid", c->attrOr("busid", ""));
    if (existing == nullptr) {
      base->children.push_back(c->findChild("gpu") ? c->clone() : shell(*c));
      existing = base->children.back().get();
      if (c->findChild("gpu")) continue;
    }
    if (!c->findChild("gpu")) mergePciChildren(existing, *c);
  }
}

void setHostHash(XmlNode* system, const std::string& hostId) {
  std::string hash = strPrintf("0x%llx", static_cast<unsigned long long>(hostHash(hostId)));
  for (const auto& c : system->children) {
    if (c->name == "cpu") c->setAttr("host_hash", hash);
  }
}

}  // namespace

Result<TopoOptions> topoOptionsFromParams() {
  TopoOptions o;
  o.topoFile = params::TopoFile();
  if (o.topoFile.empty() && fileExists(kNvidiaVirtualTopo)) o.topoFile = kNvidiaVirtualTopo;
  o.hwlocXml = params::HwlocXml();
  o.hostId = params::HostId();
  BRAID_ASSIGN_OR_RETURN(o.paths, pathOptionsFromParams());
  return o;
}

std::string localHostId() {
  std::string id = params::HostId();
  if (!id.empty()) return id;
  // NCCL's identity: the host name and the boot id. Containers on one machine share the boot id but not always
  // /dev/shm, and their host names differ.
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const std::string boot = localBootId();
  return boot.empty() ? std::string(host) : std::string(host) + ":" + boot;
}

std::string localBootId() {
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (in) std::getline(in, boot);
  return boot;
}

uint64_t hostHash(const std::string& hostId) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : hostId) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

Result<TopoSystem> systemFromXml(std::unique_ptr<XmlNode> xml, const std::string& source, const PathOptions& paths) {
  BRAID_ASSIGN_OR_RETURN(TopoGraph graph, TopoGraph::fromXml(*xml, source));
  graph.computePaths(paths);
  TopoSystem sys;
  sys.xml = std::move(xml);
  sys.graph = std::move(graph);
  sys.source = source;
  return sys;
}

Result<TopoSystem> loadTopoFile(const std::string& path, const PathOptions& paths) {
  BRAID_ASSIGN_OR_RETURN(auto xml, parseXmlFile(path));
  return systemFromXml(std::move(xml), path, paths);
}

void mergeDiscoveredGpus(XmlNode* base, const XmlNode& found) {
  for (const auto& cpu : found.children) {
    if (cpu->name != "cpu" || !containsGpu(*cpu)) continue;
    XmlNode* target = base->findChild("cpu", "numaid", cpu->attrOr("numaid", ""));
    if (target == nullptr) {
      base->children.push_back(shell(*cpu));
      target = base->children.back().get();
    }
    mergePciChildren(target, *cpu);
  }
}

Result<TopoSystem> discoverOrLoad(const TopoOptions& opts) {
  std::string hostId = opts.hostId.empty() ? localHostId() : opts.hostId;
  std::string discoveredFrom;
  std::unique_ptr<XmlNode> xml;
  std::string source;
  if (!opts.topoFile.empty()) {
    BRAID_ASSIGN_OR_RETURN(xml, parseXmlFile(opts.topoFile));
    source = opts.topoFile;
    if (opts.mergeDiscovery) {
      auto found = discoverXml(opts.hwlocXml, &discoveredFrom, opts.gpus);
      if (found.isOk()) {
        mergeDiscoveredGpus(xml.get(), *found.value());
      } else {
        BRAID_INFO(kLogGraph, "topology discovery failed (%s); using %s alone", found.status().message().c_str(),
                   opts.topoFile.c_str());
      }
    }
  } else {
    BRAID_ASSIGN_OR_RETURN(xml, discoverXml(opts.hwlocXml, &discoveredFrom, opts.gpus));
    source = discoveredFrom;
  }
  setHostHash(xml.get(), hostId);
  BRAID_ASSIGN_OR_RETURN(TopoSystem sys, systemFromXml(std::move(xml), source, opts.paths));
  sys.hostId = hostId;
  BRAID_INFO(kLogGraph, "topology from %s: %zu GPUs, %zu NICs, %zu NUMA nodes", source.c_str(),
             sys.graph.nodesOf(NodeType::kGpu).size(), sys.graph.nodesOf(NodeType::kNet).size(),
             sys.graph.nodesOf(NodeType::kCpu).size());
  return sys;
}

Status dumpTopo(const TopoSystem& sys, const std::string& path) {
  BRAID_RETURN_IF_ERROR(writeXmlFile(*sys.xml, path));
  BRAID_INFO(kLogGraph, "topology written to %s (NCCL_TOPO_DUMP_FILE)", path.c_str());
  return Status::ok();
}

std::string serializeHostTopo(const TopoSystem& sys) {
  std::string xml = writeXml(*sys.xml);
  return strPrintf("%s %zu %zu\n", kBlobMagic, sys.hostId.size(), xml.size()) + sys.hostId + xml;
}

Result<TopoSystem> deserializeHostTopo(const std::string& blob, const PathOptions& paths) {
  size_t nl = blob.find('\n');
  char magic[16] = {0};
  unsigned long long idLen = 0, xmlLen = 0;
  if (nl == std::string::npos || nl > 64 ||
      sscanf(blob.substr(0, nl).c_str(), "%15s %llu %llu", magic, &idLen, &xmlLen) != 3 ||
      std::string(magic) != kBlobMagic || idLen > blob.size() || xmlLen > blob.size() ||
      nl + 1 + idLen + xmlLen != blob.size()) {
    return invalidArgument("host topology blob is malformed (%zu bytes)", blob.size());
  }
  std::string hostId = blob.substr(nl + 1, idLen);
  BRAID_ASSIGN_OR_RETURN(auto xml, parseXml(blob.substr(nl + 1 + idLen), "topology of host " + hostId));
  BRAID_ASSIGN_OR_RETURN(TopoSystem sys, systemFromXml(std::move(xml), "host " + hostId, paths));
  sys.hostId = hostId;
  return sys;
}

std::vector<int> groupRanksByHost(const std::vector<std::string>& hostIdOfRank) {
  std::map<std::string, int> nodeOfHost;
  std::vector<int> nodeOf(hostIdOfRank.size());
  for (size_t r = 0; r < hostIdOfRank.size(); ++r) {
    auto it = nodeOfHost.emplace(hostIdOfRank[r], static_cast<int>(nodeOfHost.size())).first;
    nodeOf[r] = it->second;
  }
  return nodeOf;
}

}  // namespace braid
