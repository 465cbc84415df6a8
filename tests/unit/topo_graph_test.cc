// Topology model on the fixtures of tests/fixtures/topo (written by make_fixtures.py from public facts):
// links, bandwidths and path classification with NCCL's rules.
#include <gtest/gtest.h>

#include <string>

#include "topology/topo.h"

namespace braid {
namespace {

std::string fixture(const std::string& name) {
  return std::string(BRAID_FIXTURES_DIR) + "/topo/" + name;
}

TopoSystem load(const std::string& name, const PathOptions& opts = PathOptions()) {
  auto r = loadTopoFile(fixture(name), opts);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.take();
}

int gpu(const TopoGraph& g, int dev) {
  for (int i : g.nodesOf(NodeType::kGpu)) {
    if (g.node(i).dev == dev) return i;
  }
  return -1;
}
int net(const TopoGraph& g, int dev) {
  return g.findNode(NodeType::kNet, dev);
}
int cpu(const TopoGraph& g, int numa) {
  return g.findNode(NodeType::kCpu, numa);
}

TEST(TopoGraph, DgxH100Nodes) {
  TopoSystem s = load("dgx_h100.xml");
  const TopoGraph& g = s.graph;
  EXPECT_EQ(g.nodesOf(NodeType::kGpu).size(), 8u);
  EXPECT_EQ(g.nodesOf(NodeType::kNet).size(), 8u);
  EXPECT_EQ(g.nodesOf(NodeType::kCpu).size(), 2u);
  // The four NVSwitches collapse into one NVS node, as in NCCL.
  ASSERT_EQ(g.nodesOf(NodeType::kNvs).size(), 1u);
  EXPECT_EQ(g.nodesOf(NodeType::kPci).size(), 8u);
  // 18 NVLink4 links x 20.6 GB/s = 370.8 GB/s from each GPU to the NVSwitch (NCCL's figure for H100 SXM).
  const TopoNode& g0 = g.node(gpu(g, 0));
  ASSERT_FALSE(g0.links.empty());
  EXPECT_EQ(g0.links[0].type, LinkType::kNvl);
  EXPECT_NEAR(g0.links[0].bw, 370.8, 1e-9);
  EXPECT_DOUBLE_EQ(g.totalGpuBw(), g0.links[0].bw);
  EXPECT_TRUE(g.nvlsCapable());
}

TEST(TopoGraph, DgxH100Paths) {
  TopoSystem s = load("dgx_h100.xml");
  const TopoGraph& g = s.graph;
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      const TopoPath& p = g.path(gpu(g, a), gpu(g, b));
      if (a == b) {
        EXPECT_EQ(p.type, PathType::kLoc);
      } else {
        EXPECT_EQ(p.type, PathType::kNvl) << a << "->" << b;
        EXPECT_NEAR(p.bw, 370.8, 1e-9);
        EXPECT_EQ(p.hops.size(), 2u);  // GPU -> NVS -> GPU
        EXPECT_TRUE(g.p2pOk(gpu(g, a), gpu(g, b)));
      }
    }
    // GPU i and NIC i share a PCIe Gen5 switch: PIX at 48 GB/s (x16 Gen5); the 400G NIC is 50 GB/s.
    const TopoPath& own = g.path(gpu(g, a), net(g, a));
    EXPECT_EQ(own.type, PathType::kPix);
    EXPECT_DOUBLE_EQ(own.bw, 48.0);
    // Any other NIC is reached through the GPU next to it over NVLink (PXN), NCCL's default on this machine.
    const TopoPath& other = g.path(gpu(g, a), net(g, (a + 1) % 8));
    EXPECT_EQ(other.type, PathType::kPxn) << "GPU " << a;
    EXPECT_DOUBLE_EQ(other.bw, 48.0);
    // Rail affinity: the GPU's own NIC first.
    EXPECT_EQ(g.netsByAffinity(gpu(g, a)).front(), net(g, a));
  }
  // Between the sockets: SYS at Sapphire Rapids' 22 GB/s.
  EXPECT_EQ(g.path(cpu(g, 0), cpu(g, 1)).type, PathType::kSys);
  EXPECT_DOUBLE_EQ(g.path(cpu(g, 0), cpu(g, 1)).bw, 22.0);
  EXPECT_EQ(g.path(gpu(g, 0), cpu(g, 0)).type, PathType::kPhb);
  EXPECT_EQ(g.path(gpu(g, 0), cpu(g, 1)).type, PathType::kSys);
}

TEST(TopoGraph, DgxH100PxnDisabled) {
  PathOptions o;
  o.pxnDisable = true;
  TopoSystem s = load("dgx_h100.xml", o);
  const TopoGraph& g = s.graph;
  EXPECT_EQ(g.path(gpu(g, 0), net(g, 1)).type, PathType::kPhb);  // same socket, through the CPU
  EXPECT_EQ(g.path(gpu(g, 0), net(g, 5)).type, PathType::kSys);  // other socket
}

TEST(TopoGraph, DgxA100Paths) {
  TopoSystem s = load("dgx_a100.xml");
  const TopoGraph& g = s.graph;
  EXPECT_EQ(g.nodesOf(NodeType::kGpu).size(), 8u);
  EXPECT_EQ(g.nodesOf(NodeType::kNvs).size(), 1u);
  // 12 NVLink3 links x 20 GB/s.
  EXPECT_NEAR(g.path(gpu(g, 0), gpu(g, 7)).bw, 240.0, 1e-9);
  EXPECT_EQ(g.path(gpu(g, 0), gpu(g, 7)).type, PathType::kNvl);
  // GPU and NIC sit under different downstream switches of one PCIe Gen4 switch: PXB (as nvidia-smi shows).
  EXPECT_EQ(g.path(gpu(g, 0), net(g, 0)).type, PathType::kPxb);
  EXPECT_EQ(g.path(gpu(g, 0), net(g, 1)).type, PathType::kPxb);
  EXPECT_DOUBLE_EQ(g.path(gpu(g, 0), net(g, 0)).bw, 24.0);
  EXPECT_EQ(g.path(gpu(g, 0), net(g, 2)).type, PathType::kPxn);
  EXPECT_DOUBLE_EQ(g.path(cpu(g, 0), cpu(g, 1)).bw, 16.0);  // AMD
  EXPECT_FALSE(g.nvlsCapable());                            // sm80
}

TEST(TopoGraph, P5Paths) {
  TopoSystem s = load("p5_48xlarge.xml");
  const TopoGraph& g = s.graph;
  EXPECT_EQ(g.nodesOf(NodeType::kNet).size(), 32u);
  for (int a = 0; a < 8; ++a) {
    auto nets = g.netsByAffinity(gpu(g, a));
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(nets[r], net(g, 4 * a + r));
      EXPECT_EQ(g.path(gpu(g, a), nets[r]).type, PathType::kPix);
      EXPECT_DOUBLE_EQ(g.path(gpu(g, a), nets[r]).bw, 12.5);  // 100 Gb/s EFA
    }
  }
  EXPECT_EQ(g.node(net(g, 5)).rail, 1);
}

TEST(TopoGraph, PcieBoxPaths) {
  TopoSystem s = load("pcie_4gpu.xml");
  const TopoGraph& g = s.graph;
  EXPECT_TRUE(g.nodesOf(NodeType::kNvs).empty());
  EXPECT_FALSE(g.nvlsCapable());
  // Same switch: PIX and P2P at PCIe Gen4 x16 (24 GB/s).
  EXPECT_EQ(g.path(gpu(g, 0), gpu(g, 1)).type, PathType::kPix);
  EXPECT_DOUBLE_EQ(g.path(gpu(g, 0), gpu(g, 1)).bw, 24.0);
  EXPECT_TRUE(g.p2pOk(gpu(g, 0), gpu(g, 1)));
  // Across switches the route touches the CPU: PHB, beyond the default NCCL_P2P_LEVEL (PXB), so no P2P.
  EXPECT_EQ(g.path(gpu(g, 0), gpu(g, 2)).type, PathType::kPhb);
  EXPECT_FALSE(g.p2pOk(gpu(g, 0), gpu(g, 2)));
  EXPECT_EQ(g.path(gpu(g, 0), net(g, 0)).type, PathType::kPix);
  EXPECT_EQ(g.path(gpu(g, 3), net(g, 0)).type, PathType::kPhb);
  EXPECT_DOUBLE_EQ(g.totalGpuBw(), 24.0);
}

TEST(TopoGraph, PcieBoxP2pKnobs) {
  PathOptions o;
  o.p2pLevel = PathType::kPhb;  // NCCL_P2P_LEVEL=PHB
  EXPECT_TRUE(load("pcie_4gpu.xml", o).graph.p2pOk(0, 0));
  TopoSystem s = load("pcie_4gpu.xml", o);
  EXPECT_TRUE(s.graph.p2pOk(gpu(s.graph, 0), gpu(s.graph, 2)));
  PathOptions d;
  d.p2pDisable = true;  // NCCL_P2P_DISABLE=1
  TopoSystem t = load("pcie_4gpu.xml", d);
  EXPECT_FALSE(t.graph.p2pOk(gpu(t.graph, 0), gpu(t.graph, 1)));
  EXPECT_EQ(t.graph.path(gpu(t.graph, 0), gpu(t.graph, 1)).type, PathType::kPhb);  // through host memory
  d.shmDisable = true;  // and NCCL_SHM_DISABLE=1: the network
  TopoSystem u = load("pcie_4gpu.xml", d);
  EXPECT_EQ(u.graph.path(gpu(u.graph, 0), gpu(u.graph, 1)).type, PathType::kNet);
}

TEST(TopoGraph, CpuOnlyServer) {
  TopoSystem s = load("cpu_2socket.xml");
  const TopoGraph& g = s.graph;
  EXPECT_TRUE(g.nodesOf(NodeType::kGpu).empty());
  ASSERT_EQ(g.nodesOf(NodeType::kCpu).size(), 2u);
  EXPECT_EQ(g.path(cpu(g, 0), cpu(g, 1)).type, PathType::kSys);
  EXPECT_DOUBLE_EQ(g.path(cpu(g, 0), cpu(g, 1)).bw, 10.0);  // Skylake/Cascade Lake UPI figure
  // The NIC is on socket 0: PHB from there, SYS from the other socket. x8 Gen3 = 6 GB/s, 25G NIC = 3.125 GB/s.
  EXPECT_EQ(g.path(cpu(g, 0), net(g, 0)).type, PathType::kPhb);
  EXPECT_DOUBLE_EQ(g.path(cpu(g, 0), net(g, 0)).bw, 3.125);
  EXPECT_EQ(g.path(cpu(g, 1), net(g, 0)).type, PathType::kSys);
  EXPECT_EQ(g.node(net(g, 0)).cpu, cpu(g, 0));
}

TEST(TopoGraph, PathTypeNames) {
  EXPECT_STREQ(pathTypeName(PathType::kPxn), "PXN");
  auto r = parsePathType("phb");
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r.value(), PathType::kPhb);
  EXPECT_FALSE(parsePathType("XYZ").isOk());
  EXPECT_DOUBLE_EQ(pciBw("32.0 GT/s PCIe", 16), 48.0);
  EXPECT_DOUBLE_EQ(pciBw("16.0 GT/s PCIe", 16), 24.0);
  EXPECT_DOUBLE_EQ(pciBw("8.0 GT/s PCIe", 16), 12.0);
  EXPECT_DOUBLE_EQ(pciBw("8.0 GT/s PCIe", 0), 12.0);  // width 0 counts as x16
  EXPECT_DOUBLE_EQ(netBw(400000), 50.0);
}

}  // namespace
}  // namespace braid
