// TopoGraph construction from NCCL's topology XML, bandwidth constants, and the canonical description.
#include "topology/topo_graph.h"

#include <strings.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

namespace braid {

const char* nodeTypeName(NodeType t) {
  static const char* const kNames[] = {"GPU", "PCI", "NVS", "CPU", "NIC", "NET"};
  return kNames[static_cast<int>(t)];
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::kLoc:
      return "LOC";
    case LinkType::kNvl:
      return "NVL";
    case LinkType::kC2c:
      return "C2C";
    case LinkType::kPci:
      return "PCI";
    case LinkType::kSys:
      return "SYS";
    case LinkType::kNet:
      return "NET";
  }
  return "???";
}

namespace {
const char* const kPathNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
}  // namespace

const char* pathTypeName(PathType t) {
  return kPathNames[static_cast<int>(t)];
}

Result<PathType> parsePathType(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(PathType::kDis); ++i) {
    if (strcasecmp(name.c_str(), kPathNames[i]) == 0) return static_cast<PathType>(i);
  }
  return invalidArgument("unknown path type '%s' (expected LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or NET)",
                         name.c_str());
}

double nvlinkBwPerLink(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 70) return 20.0;
  return 18.0;
}

double pciBw(const std::string& linkSpeed, int width) {
  if (width <= 0) width = 16;
  double gts = atof(linkSpeed.c_str());
  // Per-lane effective figure in units of 1/80 GB/s: 2.5 GT/s -> 15, doubling per generation.
  double perLane = 60;  // Gen3 when unknown
  if (gts >= 60) {
    perLane = 480;
  } else if (gts >= 30) {
    perLane = 240;
  } else if (gts >= 15) {
    perLane = 120;
  } else if (gts >= 7.5) {
    perLane = 60;
  } else if (gts >= 4.5) {
    perLane = 30;
  } else if (gts >= 2) {
    perLane = 15;
  }
  return width * perLane / 80.0;
}

double netBw(int64_t speedMbps) {
  return (speedMbps <= 0 ? 10000 : speedMbps) / 8000.0;
}

namespace {

// CPU-to-CPU (SMP interconnect) bandwidth by processor, NCCL's figures.
double sysBw(const TopoNode& cpu) {
  if (cpu.arch == "ppc64") return 32;
  if (cpu.arch == "arm64" || cpu.arch == "aarch64") return 6;
  if (cpu.vendor == "AuthenticAMD") return 16;
  if (cpu.vendor == "GenuineIntel" && cpu.familyId == 6) {
    if (cpu.modelId >= 0xCF) return 40;  // Emerald Rapids
    if (cpu.modelId >= 0x8F) return 22;  // Sapphire Rapids
    if (cpu.modelId >= 0x55) return 10;  // Skylake
    return 6;                            // Broadwell
  }
  if (cpu.vendor.find("Centaur") != std::string::npos || cpu.vendor.find("Shanghai") != std::string::npos) return 6;
  return 10;
}

constexpr int64_t kIntMin = std::numeric_limits<int>::min();
constexpr int64_t kIntMax = std::numeric_limits<int>::max();

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// Walks the document and creates nodes and links; NVLinks and pcilinks are resolved once every node exists.
class TopoBuilder {
 public:
  TopoBuilder(TopoGraph* g, const std::string& source) : g_(g), source_(source) {}

  Status build(const XmlNode& system) {
    if (system.name != "system") return err(system, "root element must be <system>");
    const std::string* version = system.attr("version");
    if (version && *version != "1") return err(system, "unsupported version '" + *version + "' (expected 1)");
    for (const auto& c : system.children) {
      if (c->name == "cpu") BRAID_RETURN_IF_ERROR(walkCpu(*c));
    }
    BRAID_RETURN_IF_ERROR(resolveLinks());
    const auto& cpus = g_->byType_[static_cast<int>(NodeType::kCpu)];
    for (int a : cpus) {
      for (int b : cpus) {
        if (a != b) g_->addLink(a, b, LinkType::kSys, std::min(sysBw(g_->nodes_[a]), sysBw(g_->nodes_[b])));
      }
    }
    g_->finishLinks();
    return Status::ok();
  }

 private:
  struct PendingNvlink {
    int gpu;
    const XmlNode* elem;
  };
  struct PendingPciLink {
    int pci;
    const XmlNode* elem;
  };

  Status err(const XmlNode& e, const std::string& what) const { return xmlElementError(source_, e, what); }

  Status intAttr(const XmlNode& e, const char* key, bool required, int64_t fallback, int64_t* out) const {
    return xmlIntAttr(source_, e, key, required, fallback, out);
  }

  // For attributes kept as int: a value outside [lo, hi] is an error naming it (a dev of 2^32 would otherwise
  // truncate to another device's number and break every lookup by device).
  Status intAttrIn(const XmlNode& e, const char* key, bool required, int64_t fallback, int64_t lo, int64_t hi,
                   int* out) const {
    int64_t v = 0;
    BRAID_RETURN_IF_ERROR(intAttr(e, key, required, fallback, &v));
    if (v < lo || v > hi) {
      return err(e, std::string("attribute ") + key + "=" + std::to_string(v) + " out of range [" + std::to_string(lo) +
                        ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<int>(v);
    return Status::ok();
  }

  Status busIdValue(const XmlNode& e, std::string* busId, int64_t* value) const {
    const std::string* v = e.attr("busid");
    if (!v) return err(e, "missing attribute 'busid'");
    std::string digits;
    for (char c : *v) {
      if (isxdigit(static_cast<unsigned char>(c))) {
        digits.push_back(c);
      } else if (c != ':' && c != '.') {
        return err(e, "busid \"" + *v + "\" is not a PCI address");
      }
    }
    if (digits.empty() || digits.size() > 12) return err(e, "busid \"" + *v + "\" is not a PCI address");
    *value = static_cast<int64_t>(strtoull(digits.c_str(), nullptr, 16));
    *busId = lower(*v);
    return Status::ok();
  }

  // addNode refuses past kMaxTopoNodes; every caller turns that into an error naming the element.
  Status add(const XmlNode& e, TopoNode n, int* idx) {
    *idx = g_->addNode(std::move(n));
    if (*idx < 0) return err(e, "more than " + std::to_string(kMaxTopoNodes) + " nodes in one system");
    return Status::ok();
  }

  Status walkCpu(const XmlNode& e) {
    TopoNode cpu;
    cpu.type = NodeType::kCpu;
    BRAID_RETURN_IF_ERROR(intAttr(e, "numaid", true, 0, &cpu.id));
    if (g_->findNode(NodeType::kCpu, cpu.id) >= 0) return err(e, "duplicate numaid " + std::to_string(cpu.id));
    cpu.arch = e.attrOr("arch", "");
    cpu.vendor = e.attrOr("vendor", "");
    cpu.affinity = e.attrOr("affinity", "");
    BRAID_RETURN_IF_ERROR(intAttrIn(e, "familyid", false, 0, kIntMin, kIntMax, &cpu.familyId));
    BRAID_RETURN_IF_ERROR(intAttrIn(e, "modelid", false, 0, kIntMin, kIntMax, &cpu.modelId));
    int idx = -1;
    BRAID_RETURN_IF_ERROR(add(e, cpu, &idx));
    g_->nodes_[idx].cpu = idx;
    for (const auto& c : e.children) {
      if (c->name == "pci") {
        BRAID_RETURN_IF_ERROR(walkPci(*c, idx, idx));
      } else if (c->name == "nic") {
        BRAID_RETURN_IF_ERROR(walkNic(*c, idx, idx, "", -1, 0));
      }
    }
    return Status::ok();
  }

  Status walkPci(const XmlNode& e, int parent, int cpu) {
    std::string busId;
    int64_t busValue = 0;
    BRAID_RETURN_IF_ERROR(busIdValue(e, &busId, &busValue));
    int64_t cls = 0;
    BRAID_RETURN_IF_ERROR(intAttr(e, "class", false, 0, &cls));
    int64_t width = 0;
    BRAID_RETURN_IF_ERROR(intAttr(e, "link_width", false, 16, &width));
    if (width < 0 || width > 64) return err(e, "link_width " + std::to_string(width) + " out of range");
    double bw = pciBw(e.attrOr("link_speed", ""), static_cast<int>(width));
    const XmlNode* gpu = e.findChild("gpu");
    const XmlNode* nic = e.findChild("nic");
    if (gpu) {
      TopoNode n;
      n.type = NodeType::kGpu;
      n.id = busValue;
      n.busId = busId;
      n.cpu = cpu;
      int64_t v = 0;
      BRAID_RETURN_IF_ERROR(intAttrIn(*gpu, "dev", false, nextGpuDev_, 0, kIntMax - 1, &n.dev));
      nextGpuDev_ = std::max<int64_t>(nextGpuDev_, int64_t(n.dev) + 1);
      BRAID_RETURN_IF_ERROR(intAttrIn(*gpu, "rank", false, n.dev, -1, kIntMax, &n.rank));
      BRAID_RETURN_IF_ERROR(intAttr(*gpu, "sm", false, 0, &v));
      if (v < 0 || v > 1000) return err(*gpu, "sm " + std::to_string(v) + " out of range");
      n.sm = static_cast<int>(v);
      BRAID_RETURN_IF_ERROR(intAttr(*gpu, "gdr", false, 0, &v));
      n.gdr = v != 0;
      if (g_->findNode(NodeType::kGpu, n.id) >= 0) return err(e, "duplicate GPU busid " + busId);
      int idx = -1;
      BRAID_RETURN_IF_ERROR(add(e, n, &idx));
      g_->addLink(idx, parent, LinkType::kPci, bw);
      g_->addLink(parent, idx, LinkType::kPci, bw);
      for (const auto& c : gpu->children) {
        if (c->name == "nvlink") {
          nvlinks_.push_back({idx, c.get()});
        } else if (c->name == "c2c") {
          int64_t count = 0, mbps = 0;
          BRAID_RETURN_IF_ERROR(intAttr(*c, "count", true, 0, &count));
          BRAID_RETURN_IF_ERROR(intAttr(*c, "bw", true, 0, &mbps));
          if (count < 0 || mbps < 0 || count > 1024) return err(*c, "negative or huge count/bw");
          double cbw = static_cast<double>(count) * static_cast<double>(mbps) / 1000.0;
          g_->addLink(idx, cpu, LinkType::kC2c, cbw);
          g_->addLink(cpu, idx, LinkType::kC2c, cbw);
        }
      }
      return Status::ok();
    }
    if (nic) return walkNic(*nic, parent, cpu, busId, busValue, bw);
    if ((cls >> 8) != 0x0604) return Status::ok();  // other endpoints (NVSwitch, storage, ...) are not modelled
    TopoNode n;
    n.type = NodeType::kPci;
    n.id = busValue;
    n.busId = busId;
    n.cpu = cpu;
    if (g_->findNode(NodeType::kPci, n.id) >= 0) return err(e, "duplicate PCI busid " + busId);
    int idx = -1;
    BRAID_RETURN_IF_ERROR(add(e, n, &idx));
    g_->addLink(idx, parent, LinkType::kPci, bw);
    g_->addLink(parent, idx, LinkType::kPci, bw);
    for (const auto& c : e.children) {
      if (c->name == "pci") {
        BRAID_RETURN_IF_ERROR(walkPci(*c, idx, cpu));
      } else if (c->name == "pcilink") {
        pciLinks_.push_back({idx, c.get()});
      }
    }
    return Status::ok();
  }

  // A <nic> with its <net> children. Under a <pci> the NIC is that device; directly under a <cpu> it has no bus id.
  Status walkNic(const XmlNode& e, int parent, int cpu, const std::string& busId, int64_t busValue, double pciLinkBw) {
    TopoNode nic;
    nic.type = NodeType::kNic;
    nic.busId = busId;
    nic.id = busValue >= 0 ? busValue : (int64_t(1) << 48) + nextVirtualNic_++;
    nic.cpu = cpu;
    if (g_->findNode(NodeType::kNic, nic.id) >= 0) return err(e, "duplicate NIC busid " + busId);
    int nicIdx = -1;
    BRAID_RETURN_IF_ERROR(add(e, nic, &nicIdx));
    double maxNet = 0;
    for (const auto& c : e.children) {
      if (c->name != "net") continue;
      TopoNode net;
      net.type = NodeType::kNet;
      BRAID_RETURN_IF_ERROR(intAttrIn(*c, "dev", true, 0, 0, kIntMax, &net.dev));
      net.id = net.dev;
      if (g_->findNode(NodeType::kNet, net.id) >= 0) return err(*c, "duplicate net dev " + std::to_string(net.id));
      net.cpu = cpu;
      net.netName = c->attrOr("name", "");
      net.guid = c->attrOr("guid", "");
      int64_t v = 0;
      BRAID_RETURN_IF_ERROR(intAttr(*c, "speed", false, 0, &net.speed));
      BRAID_RETURN_IF_ERROR(intAttrIn(*c, "port", false, 0, kIntMin, kIntMax, &net.port));
      BRAID_RETURN_IF_ERROR(intAttrIn(*c, "maxconn", false, 64, kIntMin, kIntMax, &net.maxConn));
      BRAID_RETURN_IF_ERROR(intAttr(*c, "gdr", false, 0, &v));
      net.gdr = v != 0;
      BRAID_RETURN_IF_ERROR(intAttrIn(*c, "rail", false, -1, kIntMin, kIntMax, &net.rail));
      double bw = netBw(net.speed);
      maxNet = std::max(maxNet, bw);
      int netIdx = -1;
      BRAID_RETURN_IF_ERROR(add(*c, net, &netIdx));
      g_->addLink(nicIdx, netIdx, LinkType::kNet, bw);
      g_->addLink(netIdx, nicIdx, LinkType::kNet, bw);
    }
    // A NIC without a PCI parent gets a link as wide as its fastest port (it does not constrain anything).
    double linkBw = busValue >= 0 ? pciLinkBw : std::max(maxNet, 1.0);
    g_->addLink(nicIdx, parent, LinkType::kPci, linkBw);
    g_->addLink(parent, nicIdx, LinkType::kPci, linkBw);
    return Status::ok();
  }

  Status resolveLinks() {
    for (const PendingPciLink& p : pciLinks_) {
      std::string busId;
      int64_t v = 0;
      const std::string* target = p.elem->attr("target");
      if (!target) return err(*p.elem, "missing attribute 'target'");
      XmlNode probe;
      probe.name = "pcilink";
      probe.line = p.elem->line;
      probe.setAttr("busid", *target);
      BRAID_RETURN_IF_ERROR(busIdValue(probe, &busId, &v));
      int other = g_->findNode(NodeType::kPci, v);
      if (other < 0) return err(*p.elem, "target " + *target + " is not a PCI switch of this system");
      g_->addLink(p.pci, other, LinkType::kPci, kLocBw);
      g_->addLink(other, p.pci, LinkType::kPci, kLocBw);
    }
    int nvs = -1;
    for (const PendingNvlink& p : nvlinks_) {
      const XmlNode& e = *p.elem;
      int64_t count = 0, tclass = 0;
      BRAID_RETURN_IF_ERROR(intAttr(e, "count", false, 1, &count));
      if (count < 0 || count > 1024) return err(e, "count " + std::to_string(count) + " out of range");
      BRAID_RETURN_IF_ERROR(intAttr(e, "tclass", false, 0, &tclass));
      const std::string* target = e.attr("target");
      if (!target) return err(e, "missing attribute 'target'");
      // Copies, not a reference: adding the NVS node below may move the node vector.
      const int gpuCpu = g_->nodes_[p.gpu].cpu;
      double bw = static_cast<double>(count) * nvlinkBwPerLink(g_->nodes_[p.gpu].sm);
      int remote = -1;
      if (tclass == 0x068001) {
        remote = gpuCpu;  // NVLink to the CPU (POWER)
      } else if ((tclass >> 16) == 0x03) {
        XmlNode probe;
        probe.name = "nvlink";
        probe.line = e.line;
        probe.setAttr("busid", *target);
        std::string busId;
        int64_t v = 0;
        BRAID_RETURN_IF_ERROR(busIdValue(probe, &busId, &v));
        remote = g_->findNode(NodeType::kGpu, v);
        if (remote < 0) return err(e, "target GPU " + *target + " is not in this system");
        if (remote == p.gpu) return err(e, "NVLink from a GPU to itself");
      } else {
        // NVSwitches (and remote ends we cannot see) all collapse into one NVS node, as in NCCL.
        if (nvs < 0) {
          TopoNode n;
          n.type = NodeType::kNvs;
          BRAID_RETURN_IF_ERROR(add(e, n, &nvs));
        }
        remote = nvs;
        g_->addLink(nvs, p.gpu, LinkType::kNvl, bw);
      }
      g_->addLink(p.gpu, remote, LinkType::kNvl, bw);
      if (tclass == 0x068001) g_->addLink(remote, p.gpu, LinkType::kNvl, bw);
    }
    return Status::ok();
  }

  TopoGraph* g_;
  const std::string& source_;
  std::vector<PendingNvlink> nvlinks_;
  std::vector<PendingPciLink> pciLinks_;
  int64_t nextGpuDev_ = 0;
  int64_t nextVirtualNic_ = 0;
};

Result<TopoGraph> TopoGraph::fromXml(const XmlNode& system, const std::string& source) {
  TopoGraph g;
  TopoBuilder b(&g, source);
  BRAID_RETURN_IF_ERROR(b.build(system));
  g.computePaths(PathOptions());
  return g;
}

int TopoGraph::addNode(TopoNode n) {
  if (nodes_.size() >= static_cast<size_t>(kMaxTopoNodes)) return -1;
  nodes_.push_back(std::move(n));
  int idx = static_cast<int>(nodes_.size()) - 1;
  byType_[static_cast<int>(nodes_.back().type)].push_back(idx);
  index_[{static_cast<int>(nodes_.back().type), nodes_.back().id}] = idx;
  return idx;
}

void TopoGraph::addLink(int a, int b, LinkType type, double bw) {
  for (TopoLink& l : nodes_[a].links) {
    if (l.remote == b && l.type == type) {
      l.bw += bw;
      return;
    }
  }
  nodes_[a].links.push_back({b, type, bw});
}

void TopoGraph::finishLinks() {
  for (auto& list : byType_) {
    std::stable_sort(list.begin(), list.end(), [this](int a, int b) { return nodes_[a].id < nodes_[b].id; });
  }
  for (TopoNode& n : nodes_) {
    std::stable_sort(n.links.begin(), n.links.end(), [this](const TopoLink& x, const TopoLink& y) {
      if (x.bw != y.bw) return x.bw > y.bw;
      const TopoNode& a = nodes_[x.remote];
      const TopoNode& b = nodes_[y.remote];
      if (a.type != b.type) return a.type < b.type;
      return a.id < b.id;
    });
  }
}

int TopoGraph::findNode(NodeType t, int64_t id) const {
  auto it = index_.find({static_cast<int>(t), id});
  return it == index_.end() ? -1 : it->second;
}

std::string TopoGraph::nodeLabel(int i) const {
  const TopoNode& n = nodes_[i];
  switch (n.type) {
    case NodeType::kGpu:
      return strPrintf("GPU/%d", n.dev);
    case NodeType::kNet:
      return strPrintf("NET/%lld", static_cast<long long>(n.id));
    case NodeType::kCpu:
      return strPrintf("CPU/%lld", static_cast<long long>(n.id));
    case NodeType::kNvs:
      return "NVS/0";
    case NodeType::kPci:
      return "PCI/" + n.busId;
    case NodeType::kNic:
      return "NIC/" + (n.busId.empty() ? std::to_string(n.id - (int64_t(1) << 48)) : n.busId);
  }
  return "?";
}

std::string TopoGraph::describe() const {
  std::string out;
  for (int t = 0; t < kNumNodeTypes; ++t) {
    for (int i : byType_[t]) {
      const TopoNode& n = nodes_[i];
      out += nodeLabel(i);
      if (n.cpu >= 0 && n.type != NodeType::kCpu) out += " cpu=" + nodeLabel(n.cpu);
      switch (n.type) {
        case NodeType::kGpu:
          out += strPrintf(" busid=%s rank=%d sm=%d gdr=%d", n.busId.c_str(), n.rank, n.sm, n.gdr ? 1 : 0);
          break;
        case NodeType::kCpu:
          out += strPrintf(" arch=%s vendor=%s family=%d model=%d affinity=%s", n.arch.c_str(), n.vendor.c_str(),
                           n.familyId, n.modelId, n.affinity.c_str());
          break;
        case NodeType::kNet:
          out += strPrintf(" name=%s speed=%lld port=%d guid=%s maxconn=%d gdr=%d rail=%d", n.netName.c_str(),
                           static_cast<long long>(n.speed), n.port, n.guid.c_str(), n.maxConn, n.gdr ? 1 : 0, n.rail);
          break;
        default:
          break;
      }
      out += "\n";
      for (const TopoLink& l : n.links) {
        out += strPrintf("  + %s[%.1f] - %s\n", linkTypeName(l.type), l.bw, nodeLabel(l.remote).c_str());
      }
    }
  }
  return out;
}

}  // namespace braid
