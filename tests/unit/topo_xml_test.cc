// NCCL topology XML: parse errors name the file, line and element; dumps load back to identical graphs; discovery
// (this machine, a replayed hwloc XML) always gives a usable graph.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "braid_build_config.h"
#include "topology/topo.h"

namespace braid {
namespace {

std::string fixture(const std::string& name) {
  return std::string(BRAID_FIXTURES_DIR) + "/topo/" + name;
}

std::string tempPath(const char* tag) {
  return strPrintf("/tmp/braid_topo_%s_%d.xml", tag, static_cast<int>(getpid()));
}

Status parseError(const std::string& text) {
  auto xml = parseXml(text, "bad.xml");
  if (!xml.isOk()) return xml.status();
  auto g = TopoGraph::fromXml(*xml.value(), "bad.xml");
  return g.isOk() ? Status::ok() : g.status();
}

TEST(TopoXml, ParsesAttributesEntitiesAndComments) {
  auto r = parseXml(
      "<?xml version=\"1.0\"?>\n<!-- c -->\n<a x=\"1 &amp; 2\" y='&#x41;'>\n  <b/>\n  <c>text</c>\n</a>\n", "s");
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const XmlNode& a = *r.value();
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.attrOr("x", ""), "1 & 2");
  EXPECT_EQ(a.attrOr("y", ""), "A");
  ASSERT_EQ(a.children.size(), 2u);
  EXPECT_EQ(a.children[0]->line, 4);
  EXPECT_EQ(a.children[1]->name, "c");
}

TEST(TopoXml, MalformedDocumentsNameFileLineAndElement) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n",
       "bad.xml:3: <cpu>: end tag </system> does not match"},
      {"<system version=\"1\">\n<cpu numaid=\"0\" numaid=\"1\"/>\n</system>", "bad.xml:2: <cpu>: duplicate attribute"},
      {"<system version=\"1\">\n<cpu numaid=0/>\n</system>",
       "bad.xml:2: <cpu>: attribute 'numaid' value is not quoted"},
      {"<system version=\"1\">\n<cpu numaid=\"x\"/>\n</system>",
       "bad.xml:2: <cpu>: attribute numaid=\"x\" is not an integer"},
      {"<system version=\"1\">\n<cpu/>\n</system>", "bad.xml:2: <cpu>: missing attribute 'numaid'"},
      {"<system version=\"2\"/>", "bad.xml:1: <system>: unsupported version"},
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n <pci busid=\"zz:00\"/>\n</cpu>\n</system>",
       "bad.xml:3: <pci>: busid \"zz:00\" is not a PCI address"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">\n<gpu dev=\"0\" "
       "sm=\"90\">\n<nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x030200\"/>\n</gpu></pci></cpu></system>",
       "bad.xml:3: <nvlink>: target GPU 0000:02:00.0 is not in this system"},
      {"<system version=\"1\">\n<cpu numaid=\"0\"/>\n<cpu numaid=\"0\"/>\n</system>",
       "bad.xml:3: <cpu>: duplicate numaid 0"},
      {"", "bad.xml:1: no root element"},
      {"<system", "bad.xml:1: <system>: unexpected end of file inside the start tag"},
      {"<system version=\"1\">\n\n<cpu numaid=\"0\">", "bad.xml:3: <cpu>: missing end tag </cpu>"},
      {"<a x=\"&bogus;\"/>", "bad.xml:1: <a>: unknown entity &bogus;"},
      {"<a/><b/>", "bad.xml:1: <a>: unexpected content after the root element"},
      {"<!DOCTYPE x><a/>", "bad.xml:1: unsupported markup"},
      {"<?xml version=\"1.0\"?>\n<tree/>", "bad.xml:2: <tree>: root element must be <system>"},
      // Regression (fuzz, topo_search.cc heap overflow): a net dev of 2^32 truncated to 0, so the search's lookup
      // of the channel's NIC by device found nothing and indexed node -1.
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:04:00.0\" class=\"0x020000\"><nic>\n<net "
       "dev=\"4294967296\" speed=\"100000\"/></nic></pci></cpu></system>",
       "bad.xml:2: <net>: attribute dev=4294967296 out of range [0, 2147483647]"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">\n<gpu dev=\"-1\" "
       "sm=\"90\"/></pci></cpu></system>",
       "bad.xml:2: <gpu>: attribute dev=-1 out of range [0, 2147483646]"},
  };
  for (const Case& c : cases) {
    Status s = parseError(c.text);
    EXPECT_FALSE(s.isOk()) << c.text;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << "got: " << s.message() << "\nwant: " << c.expect;
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
  }
}

TEST(TopoXml, DeepNestingIsRefused) {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "<a>";
  Status s = parseError(deep);
  EXPECT_NE(s.message().find("nested deeper than 64"), std::string::npos) << s.message();
}

TEST(TopoXml, MissingFileNamesThePath) {
  auto r = loadTopoFile("/nonexistent/topo.xml", PathOptions());
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("/nonexistent/topo.xml"), std::string::npos);
}

// load -> dump -> load gives the same graph (nodes, attributes, links) and the same path matrix.
TEST(TopoXml, RoundTripEveryFixture) {
  for (const char* name : {"dgx_h100.xml", "dgx_a100.xml", "p5_48xlarge.xml", "pcie_4gpu.xml", "cpu_2socket.xml"}) {
    auto first = loadTopoFile(fixture(name), PathOptions());
    ASSERT_TRUE(first.isOk()) << first.status().message();
    std::string path = tempPath("rt");
    ASSERT_TRUE(dumpTopo(first.value(), path).isOk());
    auto second = loadTopoFile(path, PathOptions());
    ASSERT_TRUE(second.isOk()) << second.status().message();
    EXPECT_EQ(first.value().graph.describe(), second.value().graph.describe()) << name;
    EXPECT_EQ(first.value().graph.describePaths(), second.value().graph.describePaths()) << name;
    // And the dump of the dump is byte-identical.
    EXPECT_EQ(writeXml(*first.value().xml), writeXml(*second.value().xml)) << name;
    unlink(path.c_str());
  }
}

TEST(TopoXml, HostBlobRoundTrip) {
  auto sys = loadTopoFile(fixture("dgx_h100.xml"), PathOptions());
  ASSERT_TRUE(sys.isOk());
  sys.value().hostId = "host-a";
  std::string blob = serializeHostTopo(sys.value());
  auto back = deserializeHostTopo(blob, PathOptions());
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back.value().hostId, "host-a");
  EXPECT_EQ(back.value().graph.describe(), sys.value().graph.describe());
  EXPECT_FALSE(deserializeHostTopo(blob.substr(0, blob.size() - 3), PathOptions()).isOk());
  EXPECT_FALSE(deserializeHostTopo("garbage", PathOptions()).isOk());
  EXPECT_EQ(groupRanksByHost({"a", "a", "b", "a", "c", "b"}), (std::vector<int>{0, 0, 1, 0, 2, 1}));
}

TEST(TopoDiscovery, ThisMachineNeverFails) {
  TopoOptions o;
  auto sys = discoverOrLoad(o);
  ASSERT_TRUE(sys.isOk()) << sys.status().message();
  EXPECT_GE(sys.value().graph.nodesOf(NodeType::kCpu).size(), 1u);
  EXPECT_FALSE(sys.value().hostId.empty());
  // The discovered document is a valid NCCL topology file: it round-trips.
  auto again = parseXml(writeXml(*sys.value().xml), "dump");
  ASSERT_TRUE(again.isOk());
  auto g = TopoGraph::fromXml(*again.value(), "dump");
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(g.value().describe(), sys.value().graph.describe());
}

TEST(TopoDiscovery, ReplaysHwlocXml) {
  if (std::string(BRAID_BUILD_HWLOC) != "ON") GTEST_SKIP() << "built without hwloc";
  TopoOptions o;
  o.hwlocXml = fixture("hwloc_2socket.xml");
  auto sys = discoverOrLoad(o);
  ASSERT_TRUE(sys.isOk()) << sys.status().message();
  const TopoGraph& g = sys.value().graph;
  ASSERT_EQ(g.nodesOf(NodeType::kCpu).size(), 2u);
  EXPECT_DOUBLE_EQ(g.path(g.findNode(NodeType::kCpu, 0), g.findNode(NodeType::kCpu, 1)).bw, 22.0);  // SPR
  ASSERT_EQ(g.nodesOf(NodeType::kNet).size(), 2u);
  int ib = g.findNode(NodeType::kNet, 0);
  int eth = g.findNode(NodeType::kNet, 1);
  EXPECT_EQ(g.node(ib).netName, "mlx5_0");
  EXPECT_EQ(g.node(eth).netName, "ens1f0");
  // mlx5_0 sits behind a switch (named by its upstream port 16:00.0) on socket 0; the root port folds into the CPU.
  EXPECT_EQ(g.nodesOf(NodeType::kPci).size(), 1u);
  EXPECT_EQ(g.node(g.nodesOf(NodeType::kPci)[0]).busId, "0000:16:00.0");
  EXPECT_EQ(g.path(g.findNode(NodeType::kCpu, 0), ib).type, PathType::kPhb);
  EXPECT_DOUBLE_EQ(g.path(g.findNode(NodeType::kCpu, 0), ib).bw, 1.25);  // speed unknown in a replay: 10 Gb/s
  EXPECT_EQ(g.node(eth).cpu, g.findNode(NodeType::kCpu, 1));
  EXPECT_EQ(g.node(g.findNode(NodeType::kCpu, 1)).affinity, "0000000c");
  EXPECT_EQ(sys.value().source, "hwloc XML " + o.hwlocXml);
}

// GPUs the driver reports are placed by bus id under the PCI tree hwloc found, with their NVLinks; a GPU the driver
// does not report is left out, and NVLinks to it are dropped.
TEST(TopoDiscovery, GpusFromDriverUnderHwlocTree) {
  if (std::string(BRAID_BUILD_HWLOC) != "ON") GTEST_SKIP() << "built without hwloc";
  std::vector<ProbedGpu> gpus(2);
  for (int i = 0; i < 2; ++i) {
    gpus[i].dev = i;
    gpus[i].busId = i == 0 ? "00000000:18:00.0" : "00000000:19:00.0";  // NVML's long form
    gpus[i].sm = 90;
    gpus[i].gdr = true;
    gpus[i].nvlinks.push_back({"00000000:05:00.0", ProbedNvlink::Remote::kSwitch, 9});
    gpus[i].nvlinks.push_back({"00000000:06:00.0", ProbedNvlink::Remote::kSwitch, 9});
    gpus[i].nvlinks.push_back({"00000000:1f:00.0", ProbedNvlink::Remote::kGpu, 2});  // the unreported GPU
  }
  TopoOptions o;
  o.hwlocXml = fixture("hwloc_gpu_switch.xml");
  o.gpus = &gpus;
  auto sys = discoverOrLoad(o);
  ASSERT_TRUE(sys.isOk()) << sys.status().message();
  const TopoGraph& g = sys.value().graph;
  ASSERT_EQ(g.nodesOf(NodeType::kGpu).size(), 2u);
  ASSERT_EQ(g.nodesOf(NodeType::kNvs).size(), 1u);
  int g0 = g.nodesOf(NodeType::kGpu)[0], g1 = g.nodesOf(NodeType::kGpu)[1];
  EXPECT_EQ(g.node(g0).busId, "0000:18:00.0");
  EXPECT_EQ(g.path(g0, g1).type, PathType::kNvl);
  EXPECT_NEAR(g.path(g0, g1).bw, 18 * 20.6, 1e-9);
  int net = g.findNode(NodeType::kNet, 0);
  ASSERT_GE(net, 0);
  // One switch (16:00.0) between GPU and NIC; GPUDirect on both (the driver's peer-memory module is loaded).
  EXPECT_EQ(g.path(g0, net).type, PathType::kPix);
  EXPECT_DOUBLE_EQ(g.path(g0, net).bw, 1.25);  // replayed: NIC speed unknown, 10 Gb/s
  EXPECT_TRUE(g.nvlsCapable());
  // The discovered document is NCCL's schema: it round-trips through the XML writer.
  auto again = parseXml(writeXml(*sys.value().xml), "dump");
  ASSERT_TRUE(again.isOk());
  auto g2 = TopoGraph::fromXml(*again.value(), "dump");
  ASSERT_TRUE(g2.isOk()) << g2.status().message();
  EXPECT_EQ(g2.value().describe(), g.describe());
}

TEST(TopoDiscovery, BusIdNormalisation) {
  EXPECT_EQ(normalizeBusId("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(normalizeBusId("0000:AB:1f.7"), "0000:ab:1f.7");
  EXPECT_EQ(normalizeBusId("18:00.0"), "");
  EXPECT_EQ(normalizeBusId("0000:18:00.0:1"), "");
}

TEST(TopoDiscovery, NvmlAbsentIsNotAnError) {
  std::string why;
  std::vector<ProbedGpu> gpus = probeGpusNvml(&why);
  if (gpus.empty()) {
    EXPECT_FALSE(why.empty());
  }
  for (const ProbedGpu& g : gpus) EXPECT_FALSE(normalizeBusId(g.busId).empty());
}

TEST(TopoDiscovery, BadHwlocXmlIsAnError) {
  if (std::string(BRAID_BUILD_HWLOC) != "ON") GTEST_SKIP() << "built without hwloc";
  TopoOptions o;
  o.hwlocXml = fixture("does_not_exist.xml");
  auto sys = discoverOrLoad(o);
  ASSERT_FALSE(sys.isOk());
  EXPECT_NE(sys.status().message().find("does_not_exist.xml"), std::string::npos);
}

// NCCL_TOPO_FILE with discovery merged in: the file's contents win, the file's graph is what we get here (no GPU
// on CI machines to add).
TEST(TopoDiscovery, TopoFileWithMerge) {
  TopoOptions o;
  o.topoFile = fixture("dgx_h100.xml");
  o.hostId = "fixture-host";
  auto sys = discoverOrLoad(o);
  ASSERT_TRUE(sys.isOk()) << sys.status().message();
  EXPECT_EQ(sys.value().graph.nodesOf(NodeType::kGpu).size(), 8u);
  EXPECT_EQ(sys.value().xml->children[0]->attrOr("host_hash", ""),
            strPrintf("0x%llx", static_cast<unsigned long long>(hostHash("fixture-host"))));
}

TEST(TopoDiscovery, MergeAddsMissingGpus) {
  auto base = parseXml("<system version=\"1\"><cpu numaid=\"0\"/></system>", "base");
  auto found = parseXml(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:10:00.0\" class=\"0x060400\"><pci "
      "busid=\"0000:11:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"90\"/></pci></pci><pci busid=\"0000:20:00.0\" "
      "class=\"0x020000\"><nic><net dev=\"0\"/></nic></pci></cpu><cpu numaid=\"1\"/></system>",
      "found");
  ASSERT_TRUE(base.isOk() && found.isOk());
  mergeDiscoveredGpus(base.value().get(), *found.value());
  auto g = TopoGraph::fromXml(*base.value(), "merged");
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(g.value().nodesOf(NodeType::kGpu).size(), 1u);
  EXPECT_EQ(g.value().nodesOf(NodeType::kPci).size(), 1u);
  EXPECT_EQ(g.value().nodesOf(NodeType::kNet).size(), 0u);  // NICs come from the file
  EXPECT_EQ(g.value().nodesOf(NodeType::kCpu).size(), 1u);
}

}  // namespace
}  // namespace braid
