// Discovery: this machine (or a replayed hwloc XML) as an NCCL topology document.
//
// With hwloc: NUMA nodes become <cpu> elements (affinity from their cpuset; vendor, family and model from their
// package), NICs become <pci><nic><net/></nic></pci> under the PCI switches that lead to them (one <pci> per switch,
// named by its upstream port, as NCCL's sysfs walk does; root ports are folded into the CPU). NVIDIA GPUs hwloc
// sees become <pci><gpu> elements when NVML (gpu_probe.h) knows them: compute capability, GPUDirect, and NVLinks
// aggregated per remote (NVSwitch, GPU or CPU). Without hwloc, or when hwloc fails on this machine, a minimal
// document comes from sysfs: one <cpu> per NUMA node, no PCI devices. Discovery of this machine never fails.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "src/common/logging.h"
#include "topology/gpu_probe.h"
#include "topology/topo.h"

#ifdef BRAID_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace braid {

namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

std::string machineArch() {
  struct utsname u;
  if (uname(&u) != 0) return "";
  std::string m = u.machine;
  if (m == "aarch64") return "arm64";
  if (m == "ppc64le") return "ppc64";
  return m;
}

// NCCL's cpumask text from a list of CPU numbers.
std::string maskText(const std::vector<int>& cpus) {
  int maxCpu = 0;
  for (int c : cpus) maxCpu = std::max(maxCpu, c);
  std::vector<uint32_t> words(static_cast<size_t>(maxCpu / 32 + 1), 0);
  for (int c : cpus) words[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    out += strPrintf("%08x", words[i]);
    if (i) out += ",";
  }
  return out;
}

// vendor_id, cpu family and model of the first processor in /proc/cpuinfo.
void cpuIdentity(XmlNode* cpu) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string vendor, family, model;
  while (std::getline(in, line) && (vendor.empty() || family.empty() || model.empty())) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "cpu family" && family.empty()) family = value;
    if (key == "model" && model.empty()) model = value;
  }
  if (!vendor.empty()) cpu->setAttr("vendor", vendor);
  if (!family.empty()) cpu->setAttr("familyid", family);
  if (!model.empty()) cpu->setAttr("modelid", model);
}

std::unique_ptr<XmlNode> newSystem() {
  auto sys = std::make_unique<XmlNode>();
  sys->name = "system";
  sys->setAttr("version", "1");
  return sys;
}

std::unique_ptr<XmlNode> sysfsDiscover() {
  auto sys = newSystem();
  std::string arch = machineArch();
  for (int node = 0; node < 4096; ++node) {
    std::string dir = "/sys/devices/system/node/node" + std::to_string(node);
    if (access(dir.c_str(), F_OK) != 0) {
      if (node > 64) break;  // node numbers may have holes; stop after a generous gap
      continue;
    }
    XmlNode* cpu = sys->addChild("cpu");
    cpu->setAttr("numaid", std::to_string(node));
    std::string mask = readLine(dir + "/cpumap");
    if (!mask.empty()) cpu->setAttr("affinity", mask);
    cpu->setAttr("arch", arch);
    cpuIdentity(cpu);
  }
  if (sys->children.empty()) {
    XmlNode* cpu = sys->addChild("cpu");
    cpu->setAttr("numaid", "0");
    std::vector<int> all;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    for (long i = 0; i < std::max(1L, n); ++i) all.push_back(static_cast<int>(i));
    cpu->setAttr("affinity", maskText(all));
    cpu->setAttr("arch", arch);
    cpuIdentity(cpu);
  }
  return sys;
}

#ifdef BRAID_HAVE_HWLOC

std::string busIdText(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  return strPrintf("%04x:%02x:%02x.%x", domain, bus, dev, func);
}

// link_speed / link_width: sysfs on this machine; from hwloc's total GB/s (assuming x16) when replaying XML.
void setLink(XmlNode* pci, const std::string& busId, float linkGBps, bool live) {
  if (live) {
    std::string base = "/sys/bus/pci/devices/" + busId;
    std::string speed = readLine(base + "/max_link_speed");
    std::string width = readLine(base + "/max_link_width");
    if (!speed.empty() && !width.empty() && speed.find("Unknown") == std::string::npos) {
      pci->setAttr("link_speed", speed);
      pci->setAttr("link_width", width);
      return;
    }
  }
  if (linkGBps <= 0) return;
  double lane = linkGBps / 16.0;
  const char* speed = lane >= 3.5    ? "32.0 GT/s PCIe"
                      : lane >= 1.7  ? "16.0 GT/s PCIe"
                      : lane >= 0.9  ? "8.0 GT/s PCIe"
                      : lane >= 0.45 ? "5.0 GT/s PCIe"
                                     : "2.5 GT/s PCIe";
  pci->setAttr("link_speed", speed);
  pci->setAttr("link_width", "16");
}

void setPciIds(XmlNode* e, hwloc_obj_t o, bool live) {
  const auto& a = o->attr->pcidev;
  std::string busId = busIdText(a.domain, a.bus, a.dev, a.func);
  e->setAttr("busid", busId);
  e->setAttr("class", strPrintf("0x%06x", static_cast<unsigned>(a.class_id) << 8));
  e->setAttr("vendor", strPrintf("0x%04x", a.vendor_id));
  e->setAttr("device", strPrintf("0x%04x", a.device_id));
  e->setAttr("subsystem_vendor", strPrintf("0x%04x", a.subvendor_id));
  e->setAttr("subsystem_device", strPrintf("0x%04x", a.subdevice_id));
  setLink(e, busId, a.linkspeed, live);
}

class HwlocDiscovery {
 public:
  ~HwlocDiscovery() {
    if (loaded_) hwloc_topology_destroy(topo_);
  }

  Result<std::unique_ptr<XmlNode>> run(const std::string& xmlPath, const std::vector<ProbedGpu>& gpus) {
    gpus_ = &gpus;
    if (hwloc_topology_init(&topo_) != 0) return systemError("hwloc_topology_init failed");
    loaded_ = true;
    live_ = xmlPath.empty();
    hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (!live_ && hwloc_topology_set_xml(topo_, xmlPath.c_str()) != 0) {
      return invalidArgument("BRAID_HWLOC_XML %s: hwloc cannot read it as an hwloc XML export", xmlPath.c_str());
    }
    if (hwloc_topology_load(topo_) != 0) {
      return systemError("hwloc_topology_load failed%s%s", live_ ? "" : " on ", xmlPath.c_str());
    }
    auto sys = newSystem();
    sys_ = sys.get();
    addCpus();
    addDevices();
    dropDanglingNvlinks(sys_);
    return sys;
  }

 private:
  void addCpus() {
    hwloc_obj_t root = hwloc_get_root_obj(topo_);
    const char* archInfo = hwloc_obj_get_info_by_name(root, "Architecture");
    std::string arch = archInfo ? archInfo : (live_ ? machineArch() : "");
    if (arch == "aarch64") arch = "arm64";
    int n = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      XmlNode* cpu = sys_->addChild("cpu");
      cpu->setAttr("numaid", std::to_string(numa->os_index));
      std::vector<int> cpus;
      if (numa->cpuset) {
        for (int b = hwloc_bitmap_first(numa->cpuset); b >= 0; b = hwloc_bitmap_next(numa->cpuset, b)) {
          cpus.push_back(b);
        }
      }
      if (!cpus.empty()) cpu->setAttr("affinity", maskText(cpus));
      if (!arch.empty()) cpu->setAttr("arch", arch);
      hwloc_obj_t pkg = numa->parent;
      while (pkg && pkg->type != HWLOC_OBJ_PACKAGE) pkg = pkg->parent;
      if (!pkg) pkg = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, 0);
      if (pkg) {
        const char* vendor = hwloc_obj_get_info_by_name(pkg, "CPUVendor");
        const char* family = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber");
        const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModelNumber");
        if (vendor) cpu->setAttr("vendor", vendor);
        if (family) cpu->setAttr("familyid", family);
        if (model) cpu->setAttr("modelid", model);
      }
      cpuByNuma_[numa->os_index] = cpu;
    }
    if (sys_->children.empty()) {
      XmlNode* cpu = sys_->addChild("cpu");
      cpu->setAttr("numaid", "0");
      if (!arch.empty()) cpu->setAttr("arch", arch);
      cpuByNuma_[0] = cpu;
    }
  }

  XmlNode* cpuOf(hwloc_obj_t o) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo_, o);
    if (anc && anc->nodeset) {
      int first = hwloc_bitmap_first(anc->nodeset);
      auto it = cpuByNuma_.find(static_cast<unsigned>(first));
      if (first >= 0 && it != cpuByNuma_.end()) return it->second;
    }
    return cpuByNuma_.begin()->second;
  }

  // The <pci> element of a switch (or the CPU) this device hangs under, created on first use.
  XmlNode* parentElement(hwloc_obj_t dev) {
    std::vector<hwloc_obj_t> bridges;  // PCI-to-PCI bridges from the device up, root port last
    for (hwloc_obj_t p = dev->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
      if (p->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;
      bridges.push_back(p);
    }
    if (!bridges.empty()) bridges.pop_back();  // the root port belongs to the CPU
    // A switch is an upstream port above a downstream port: keep the upstream one of each pair.
    std::vector<hwloc_obj_t> switches;
    for (size_t i = 0; i < bridges.size(); i += 2) switches.push_back(bridges[std::min(i + 1, bridges.size() - 1)]);
    XmlNode* parent = cpuOf(dev);
    for (size_t i = switches.size(); i-- > 0;) {
      const auto& a = switches[i]->attr->pcidev;
      std::string busId = busIdText(a.domain, a.bus, a.dev, a.func);
      XmlNode* e = parent->findChild("pci", "busid", busId);
      if (!e) {
        e = parent->addChild("pci");
        setPciIds(e, switches[i], live_);
      }
      parent = e;
    }
    return parent;
  }

  // A GPU NVML knows: <pci> with <gpu dev sm rank gdr> and one <nvlink> per remote.
  void addGpu(hwloc_obj_t o) {
    const auto& a = o->attr->pcidev;
    std::string busId = busIdText(a.domain, a.bus, a.dev, a.func);
    const ProbedGpu* probed = nullptr;
    for (const ProbedGpu& g : *gpus_) {
      if (normalizeBusId(g.busId) == busId) probed = &g;
    }
    if (!probed) return;  // no driver view of it: not usable
    XmlNode* pci = parentElement(o)->addChild("pci");
    setPciIds(pci, o, live_);
    XmlNode* gpu = pci->addChild("gpu");
    gpu->setAttr("dev", std::to_string(probed->dev));
    gpu->setAttr("sm", std::to_string(probed->sm));
    gpu->setAttr("rank", std::to_string(probed->dev));
    gpu->setAttr("gdr", probed->gdr ? "1" : "0");
    for (const ProbedNvlink& l : probed->nvlinks) {
      XmlNode* e = gpu->addChild("nvlink");
      e->setAttr("target", normalizeBusId(l.remoteBusId));
      e->setAttr("count", std::to_string(l.count));
      e->setAttr("tclass", l.remote == ProbedNvlink::Remote::kGpu   ? "0x030200"
                           : l.remote == ProbedNvlink::Remote::kCpu ? "0x068001"
                                                                    : "0x068000");
    }
    gpuBusIds_.push_back(busId);
  }

  // NVLinks to GPUs that did not make it into the document (no driver view) would not resolve: drop them.
  void dropDanglingNvlinks(XmlNode* n) {
    auto& kids = n->children;
    for (size_t i = 0; i < kids.size();) {
      XmlNode* c = kids[i].get();
      bool gpuLink = c->name == "nvlink" && c->attrOr("tclass", "").compare(0, 4, "0x03") == 0;
      if (gpuLink && std::find(gpuBusIds_.begin(), gpuBusIds_.end(), c->attrOr("target", "")) == gpuBusIds_.end()) {
        kids.erase(kids.begin() + static_cast<long>(i));
        continue;
      }
      dropDanglingNvlinks(c);
      ++i;
    }
  }

  void addDevices() {
    int dev = 0;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo_, nullptr); o; o = hwloc_get_next_pcidev(topo_, o)) {
      if (o->attr->pcidev.vendor_id == 0x10de && (o->attr->pcidev.class_id >> 8) == 0x03) {
        addGpu(o);
        continue;
      }
      std::string fabric, netdev;
      for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && fabric.empty()) fabric = c->name;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && netdev.empty()) netdev = c->name;
      }
      unsigned cls = o->attr->pcidev.class_id;
      bool nicClass = (cls >> 8) == 0x02 || cls == 0x0c06;
      if (!nicClass || (fabric.empty() && netdev.empty())) continue;
      XmlNode* pci = parentElement(o)->addChild("pci");
      setPciIds(pci, o, live_);
      XmlNode* net = pci->addChild("nic")->addChild("net");
      net->setAttr("name", fabric.empty() ? netdev : fabric);
      net->setAttr("dev", std::to_string(dev++));
      std::string speed = live_ && !netdev.empty() ? readLine("/sys/class/net/" + netdev + "/speed") : "";
      long mbps = atol(speed.c_str());
      net->setAttr("speed", std::to_string(mbps > 0 ? mbps : 10000));
      net->setAttr("port", "1");
      net->setAttr("maxconn", "65536");
      // GPUDirect RDMA: an RDMA device, with the GPU driver's peer-memory module loaded (what NCCL's IB plugin checks).
      bool peerMem = false;
      for (const ProbedGpu& g : *gpus_) peerMem = peerMem || g.gdr;
      net->setAttr("gdr", !fabric.empty() && peerMem ? "1" : "0");
    }
  }

  hwloc_topology_t topo_;
  bool loaded_ = false;
  bool live_ = true;
  XmlNode* sys_ = nullptr;
  std::map<unsigned, XmlNode*> cpuByNuma_;
  const std::vector<ProbedGpu>* gpus_ = nullptr;
  std::vector<std::string> gpuBusIds_;
};

#endif  // BRAID_HAVE_HWLOC

}  // namespace

namespace {

Result<std::unique_ptr<XmlNode>> discoverXmlUncached(const std::string& hwlocXml, std::string* sourceOut,
                                                     const std::vector<ProbedGpu>* gpus) {
#ifdef BRAID_HAVE_HWLOC
  // This machine's driver only describes this machine: a replayed hwloc XML gets GPUs only when they are given.
  std::vector<ProbedGpu> probed;
  if (gpus) {
    probed = *gpus;
  } else if (hwlocXml.empty()) {
    std::string why;
    probed = probeGpusNvml(&why);
    if (probed.empty()) BRAID_INFO(kLogGraph, "no GPU from NVML: %s", why.c_str());
  }
  HwlocDiscovery d;
  auto r = d.run(hwlocXml, probed);
  if (r.isOk()) {
    if (sourceOut) *sourceOut = hwlocXml.empty() ? "hwloc" : "hwloc XML " + hwlocXml;
    return r;
  }
  if (!hwlocXml.empty()) return r.status();  // a file the user named must work
  BRAID_INFO(kLogGraph, "hwloc discovery failed (%s); falling back to sysfs", r.status().message().c_str());
#else
  if (!hwlocXml.empty()) {
    return invalidUsage("BRAID_HWLOC_XML=%s needs braid built with hwloc (BRAID_WITH_HWLOC)", hwlocXml.c_str());
  }
#endif
  if (sourceOut) *sourceOut = "sysfs";
  return sysfsDiscover();
}

}  // namespace

Result<std::unique_ptr<XmlNode>> discoverXml(const std::string& hwlocXml, std::string* sourceOut,
                                             const std::vector<ProbedGpu>* gpus) {
  if (gpus != nullptr) return discoverXmlUncached(hwlocXml, sourceOut, gpus);
  // Every communicator init discovers its host; hwloc takes about 50 ms here, a process's machine does not change,
  // and a test process creates hundreds of communicators. Only successes are kept, per hwloc XML name.
  static std::mutex mu;
  static std::map<std::string, std::pair<std::unique_ptr<XmlNode>, std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(hwlocXml);
  if (it == cache.end()) {
    std::string source;
    BRAID_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> xml, discoverXmlUncached(hwlocXml, &source, nullptr));
    it = cache.emplace(hwlocXml, std::make_pair(std::move(xml), source)).first;
  }
  if (sourceOut) *sourceOut = it->second.second;
  return it->second.first->clone();
}

}  // namespace braid
