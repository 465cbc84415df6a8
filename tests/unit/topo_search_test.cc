// Channel search on the fixtures: channel counts, bandwidths, path types, NIC assignment, link capacity, graph XML,
// and the communicator-wide rings and trees.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "topology/topo.h"
#include "topology/topo_channels.h"
#include "topology/topo_search.h"

namespace braid {
namespace {

std::string fixture(const std::string& name) {
  return std::string(BRAID_FIXTURES_DIR) + "/topo/" + name;
}

TopoSystem load(const std::string& name) {
  auto r = loadTopoFile(fixture(name), PathOptions());
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.take();
}

int gpuNode(const TopoGraph& g, int dev) {
  for (int i : g.nodesOf(NodeType::kGpu)) {
    if (g.node(i).dev == dev) return i;
  }
  return -1;
}

// Every channel is a permutation of the host's GPUs, and the channels together never ask a link for more than its
// bandwidth (each hop consumes bw on every link of its path, per direction).
void expectValid(const TopoGraph& g, const SearchedGraph& gr, bool ring) {
  std::map<std::pair<int, int>, double> used;
  size_t nGpus = g.nodesOf(NodeType::kGpu).size();
  for (const TopoChannel& ch : gr.channels) {
    ASSERT_EQ(ch.gpus.size(), nGpus);
    std::vector<int> nodes;
    if (ch.netIn >= 0) nodes.push_back(g.findNode(NodeType::kNet, ch.netIn));
    for (int dev : ch.gpus) nodes.push_back(gpuNode(g, dev));
    if (ch.netOut >= 0) {
      nodes.push_back(g.findNode(NodeType::kNet, ch.netOut));
    } else if (ring && ch.netIn < 0 && nodes.size() > 1) {
      nodes.push_back(nodes.front());
    }
    for (size_t i = 0; i + 1 < nodes.size(); ++i) {
      for (const TopoHop& h : g.path(nodes[i], nodes[i + 1]).hops) used[{h.node, h.link}] += gr.bwIntra;
    }
  }
  for (const auto& u : used) {
    EXPECT_LE(u.second, g.node(u.first.first).links[u.first.second].bw + 1e-6)
        << g.nodeLabel(u.first.first) << " link " << u.first.second;
  }
}

TEST(TopoSearch, DgxH100SingleNode) {
  TopoSystem s = load("dgx_h100.xml");
  SearchOptions o;
  SearchedGraph raw = searchGraph(s.graph, o);
  // 6 rings x 60 GB/s fill 360 of the 370.8 GB/s of NVLink per GPU.
  EXPECT_EQ(raw.nChannels, 6);
  EXPECT_DOUBLE_EQ(raw.bwIntra, 60.0);
  EXPECT_EQ(raw.typeIntra, PathType::kNvl);
  expectValid(s.graph, raw, true);
  HostGraphs h = searchHostGraphs(s.graph, false, 0);
  // Duplicated to 12 x 30, and the communicator doubles again: 24 channels. NCCL logs "24 coll channels" on a
  // single DGX-H100 (8 ranks), the figure checked here.
  EXPECT_EQ(h.ring.nChannels, 12);
  EXPECT_DOUBLE_EQ(h.ring.bwIntra, 30.0);
  EXPECT_EQ(collChannels(h.ring), 24);
  EXPECT_EQ(h.tree.nChannels, 12);
  // One host: NCCL's balanced-tree search fills its channels at once, so the pattern stays balanced (1); the sm90
  // fallback to the plain tree (parent and children on one GPU) only matters across hosts.
  EXPECT_EQ(h.tree.pattern, GraphPattern::kBalancedTree);
  EXPECT_EQ(h.ring.channels[0].gpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(h.ring.sameChannels);
  // NVLS: NVSwitch + sm90, every GPU a head. 9 x 50 = 450 GB/s would not fit a GPU's 370.8 of NVLink (its own
  // head counts twice), 9 x 40 does; then bwInter rises to the table's top (60), as NCCL's second pass does.
  EXPECT_EQ(h.nvls.nChannels, 8);
  EXPECT_DOUBLE_EQ(h.nvls.bwIntra, 40.0);
  EXPECT_DOUBLE_EQ(h.nvls.bwInter, 60.0);
}

TEST(TopoSearch, DgxH100MultiNode) {
  TopoSystem s = load("dgx_h100.xml");
  HostGraphs h = searchHostGraphs(s.graph, true, 0);
  // One ring per NIC. 48 GB/s (x16 Gen5) does not fit: 8 rings would need 8 x 48 = 384 GB/s of NVLink into each
  // GPU (370.8), so 8 x 45. Rail-aligned: ring c enters and leaves on NIC c, entering at GPU c (PIX) and leaving
  // from GPU c-1 through GPU c (PXN). No duplication (sm90 below 50 GB/s with more than 4 channels): 16 channels.
  EXPECT_EQ(h.ring.nChannels, 8);
  EXPECT_DOUBLE_EQ(h.ring.bwInter, 45.0);
  EXPECT_EQ(h.ring.typeInter, PathType::kPxn);
  EXPECT_EQ(collChannels(h.ring), 16);
  for (int c = 0; c < 8; ++c) {
    const TopoChannel& ch = h.ring.channels[c];
    EXPECT_EQ(ch.netIn, c);
    EXPECT_EQ(ch.netOut, c);
    EXPECT_EQ(ch.gpus.front(), c);
  }
  expectValid(s.graph, h.ring, true);
  EXPECT_EQ(h.tree.nChannels, 8);
  EXPECT_EQ(h.tree.typeInter, PathType::kPix);  // trees only enter: through the GPU next to the NIC
  // NIC affinity: GPU i always uses mlx5_i.
  for (int gdev = 0; gdev < 8; ++gdev) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(netForGpu(s.graph, gdev, c), gdev);
  }
}

TEST(TopoSearch, DgxA100) {
  TopoSystem s = load("dgx_a100.xml");
  HostGraphs h = searchHostGraphs(s.graph, false, 0);
  // 6 x 40 GB/s = 240 GB/s, all of the 12 NVLink3 links; duplicated to 12 x 20; 24 communicator channels.
  EXPECT_EQ(h.ring.nChannels, 12);
  EXPECT_DOUBLE_EQ(h.ring.bwIntra, 20.0);
  EXPECT_EQ(collChannels(h.ring), 24);
  EXPECT_EQ(h.tree.pattern, GraphPattern::kBalancedTree);
  EXPECT_EQ(h.nvls.nChannels, 0);  // no NVLS before sm90
  HostGraphs m = searchHostGraphs(s.graph, true, 0);
  // One ring per 200G NIC at 24 GB/s (x16 Gen4, below the NIC's 25), GPU-NIC PXB.
  EXPECT_EQ(m.ring.nChannels, 8);
  EXPECT_DOUBLE_EQ(m.ring.bwInter, 24.0);
  EXPECT_EQ(m.ring.typeInter, PathType::kPxb);
  expectValid(s.graph, m.ring, true);
  EXPECT_EQ(netForGpu(s.graph, 0, 0), 0);
  EXPECT_EQ(netForGpu(s.graph, 0, 1), 1);  // both NICs of the GPU pair are PXB: channels alternate
}

TEST(TopoSearch, P5With32Efa) {
  TopoSystem s = load("p5_48xlarge.xml");
  HostGraphs h = searchHostGraphs(s.graph, false, 0);
  EXPECT_EQ(collChannels(h.ring), 24);  // same NVLink fabric as DGX-H100
  HostGraphs m = searchHostGraphs(s.graph, true, 0);
  // 100 Gb/s EFA = 12.5 GB/s: 12 GB/s rings, one per EFA until NVLink into a GPU is full (30 x 12 = 360).
  EXPECT_EQ(m.ring.nChannels, 30);
  EXPECT_DOUBLE_EQ(m.ring.bwInter, 12.0);
  expectValid(s.graph, m.ring, true);
  for (int c = 0; c < m.ring.nChannels; ++c) {
    EXPECT_EQ(m.ring.channels[c].netIn, c);
    EXPECT_EQ(m.ring.channels[c].gpus.front(), c / 4) << "ring " << c << " enters at the GPU next to its EFA";
  }
  // A GPU's four EFAs in turn, channel by channel (rail r of GPU g is EFA 4g + r).
  for (int g = 0; g < 8; ++g) {
    for (int c = 0; c < 8; ++c) EXPECT_EQ(netForGpu(s.graph, g, c), 4 * g + c % 4);
  }
}

TEST(TopoSearch, PcieBox) {
  TopoSystem s = load("pcie_4gpu.xml");
  SearchedGraph raw = searchGraph(s.graph, SearchOptions());
  // Crossing the switches goes through the CPU (PHB). Through an Intel root complex PCIe carries 6/5 of the data,
  // so one 20 GB/s ring takes all 24 GB/s of the Gen4 x16 links it crosses; two rings of 10 would not be more.
  EXPECT_EQ(raw.nChannels, 1);
  EXPECT_DOUBLE_EQ(raw.bwIntra, 20.0);
  EXPECT_EQ(raw.typeIntra, PathType::kPhb);
  expectValid(s.graph, raw, true);
  HostGraphs h = searchHostGraphs(s.graph, false, 0);
  EXPECT_EQ(h.ring.nChannels, 1);  // below 25 GB/s: no duplication
  EXPECT_EQ(collChannels(h.ring), 2);
  EXPECT_EQ(h.nvls.nChannels, 0);
  // The only NIC is PIX to GPUs 0-1 and PHB to GPUs 2-3; everyone uses it.
  EXPECT_EQ(netForGpu(s.graph, 3, 5), 0);
}

TEST(TopoSearch, CpuOnlyFallback) {
  TopoSystem s = load("cpu_2socket.xml");
  HostGraphs h = searchHostGraphs(s.graph, false, 0);
  EXPECT_EQ(h.ring.nChannels, 1);
  EXPECT_DOUBLE_EQ(h.ring.bwIntra, 0.1);
  EXPECT_EQ(h.ring.typeIntra, PathType::kSys);
  EXPECT_TRUE(h.ring.channels[0].gpus.empty());
}

TEST(TopoSearch, GraphXmlRoundTrip) {
  TopoSystem s = load("dgx_h100.xml");
  HostGraphs h = searchHostGraphs(s.graph, true, 0);
  auto xml = graphsToXml({&h.ring, &h.tree});
  auto parsed = parseXml(writeXml(*xml), "graph.xml");
  ASSERT_TRUE(parsed.isOk());
  auto back = graphsFromXml(*parsed.value(), "graph.xml", s.graph);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  ASSERT_EQ(back.value().size(), 2u);
  EXPECT_EQ(describeGraph(back.value()[0]), describeGraph(h.ring));
  EXPECT_EQ(describeGraph(back.value()[1]), describeGraph(h.tree));
  EXPECT_EQ(back.value()[0].id, GraphId::kRing);
}

TEST(TopoSearch, GraphXmlErrors) {
  TopoSystem s = load("pcie_4gpu.xml");
  const char* head =
      "<graphs version=\"1\">\n<graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"1\" speedintra=\"12\" "
      "speedinter=\"12\" typeintra=\"PHB\" typeinter=\"PIX\">\n<channel>\n";
  struct Case {
    std::string body;
    const char* expect;
  };
  const Case cases[] = {
      {"<gpu dev=\"0\"/><gpu dev=\"1\"/><gpu dev=\"2\"/><gpu dev=\"7\"/>\n", "g.xml:4: <gpu>: GPU dev 7 is not in"},
      {"<gpu dev=\"0\"/><gpu dev=\"0\"/><gpu dev=\"2\"/><gpu dev=\"3\"/>\n", "g.xml:4: <gpu>: GPU dev 0 appears twice"},
      {"<gpu dev=\"0\"/>\n", "g.xml:3: <channel>: channel has 1 GPUs, the topology 4"},
      {"<net dev=\"3\"/>\n", "g.xml:4: <net>: NET dev 3 is not in the topology"},
  };
  for (const Case& c : cases) {
    auto xml = parseXml(std::string(head) + c.body + "</channel>\n</graph>\n</graphs>\n", "g.xml");
    ASSERT_TRUE(xml.isOk()) << xml.status().message();
    auto r = graphsFromXml(*xml.value(), "g.xml", s.graph);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(TopoChannels, BinaryTreeMatchesNccl) {
  // NCCL's example for 14 nodes: 0->8, 8->{4,12}, 4->{2,6}, 12->{10,13}, 2->{1,3}.
  int p, c0, c1;
  binaryTree(14, 0, &p, &c0, &c1);
  EXPECT_EQ(c0, 8);
  EXPECT_EQ(p, -1);
  binaryTree(14, 8, &p, &c0, &c1);
  EXPECT_EQ(p, 0);
  EXPECT_EQ(c0, 4);
  EXPECT_EQ(c1, 12);
  binaryTree(14, 12, &p, &c0, &c1);
  EXPECT_EQ(p, 8);
  EXPECT_EQ(c0, 10);
  EXPECT_EQ(c1, 13);
  binaryTree(14, 3, &p, &c0, &c1);
  EXPECT_EQ(p, 2);
  EXPECT_EQ(c0, -1);
  // Every node but the root has exactly one parent whose child list contains it, in both trees.
  for (int n = 1; n <= 17; ++n) {
    for (int mirror = 0; mirror < 2; ++mirror) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        auto tree = mirror ? mirrorTree : binaryTree;
        tree(n, r, &p, &c0, &c1);
        if (p < 0) {
          ++roots;
          continue;
        }
        int pp, pc0, pc1;
        tree(n, p, &pp, &pc0, &pc1);
        EXPECT_TRUE(pc0 == r || pc1 == r) << "n=" << n << " r=" << r << " mirror=" << mirror;
      }
      EXPECT_EQ(roots, 1);
    }
  }
}

TEST(TopoChannels, SingleDgxH100LogLines) {
  TopoSystem s = load("dgx_h100.xml");
  std::vector<HostGraphs> nodes{searchHostGraphs(s.graph, false, 0)};
  std::vector<RankPlacement> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({0, r});
  auto ch = buildCommChannels(nodes, ranks);
  ASSERT_TRUE(ch.isOk()) << ch.status().message();
  EXPECT_EQ(ch.value().nChannels, 24);
  auto lines = ringLogLines(ch.value());
  ASSERT_EQ(lines.size(), 24u);
  EXPECT_EQ(lines[0], "Channel 00/24 : 0 1 2 3 4 5 6 7");
  EXPECT_EQ(lines[23], "Channel 23/24 : 0 1 2 3 4 5 6 7");
  EXPECT_EQ(treeLogLine(ch.value(), 0).substr(0, 40), "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0-");
  EXPECT_EQ(treeLogLine(ch.value(), 7).substr(0, 24), "Trees [0] -1/-1/-1->7->6");
}

TEST(TopoChannels, TwoDgxH100Nodes) {
  TopoSystem s = load("dgx_h100.xml");
  HostGraphs h = searchHostGraphs(s.graph, true, 0);
  std::vector<HostGraphs> nodes{h, h};
  std::vector<RankPlacement> ranks;
  for (int r = 0; r < 16; ++r) ranks.push_back({r / 8, r % 8});
  auto ch = buildCommChannels(nodes, ranks);
  ASSERT_TRUE(ch.isOk()) << ch.status().message();
  const CommChannels& c = ch.value();
  EXPECT_EQ(c.nChannels, 16);
  EXPECT_EQ(ringLogLines(c)[0], "Channel 00/16 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15");
  EXPECT_EQ(ringLogLines(c)[1], "Channel 01/16 : 1 2 3 4 5 6 7 0 9 10 11 12 13 14 15 8");
  // Tree 0: node 0 is the root, node 1 its child; tree 1 (mirror) the other way round.
  EXPECT_EQ(c.trees[0][0].parent, -1);
  EXPECT_EQ(c.trees[0][0].children, (std::vector<int>{1, 8}));
  EXPECT_EQ(c.trees[0][8].parent, 0);
  EXPECT_EQ(c.trees[8][8].parent, -1);
  EXPECT_EQ(c.trees[8][0].parent, 8);
  for (const auto& ring : c.rings) EXPECT_EQ(ring.size(), 16u);
  // Ranks of a node with fewer searched channels: the minimum wins everywhere.
  HostGraphs fewer = h;
  fewer.ring.nChannels = fewer.tree.nChannels = 2;
  auto agg = buildCommChannels({h, fewer}, ranks);
  ASSERT_TRUE(agg.isOk());
  EXPECT_EQ(agg.value().nChannels, 4);
}

TEST(TopoChannels, HostRanksWithoutGpus) {
  TopoSystem s = load("cpu_2socket.xml");
  HostGraphs h = searchHostGraphs(s.graph, false, 0);
  std::vector<RankPlacement> ranks{{0, -1}, {1, -1}, {0, -1}, {1, -1}};
  auto ch = buildCommChannels({h, h}, ranks);
  ASSERT_TRUE(ch.isOk()) << ch.status().message();
  EXPECT_EQ(ringLogLines(ch.value())[0], "Channel 00/02 : 0 2 1 3");
  EXPECT_FALSE(buildCommChannels({h, h}, {{0, -1}}).isOk());  // node 1 has no rank
  // Host ranks alternating between the sockets: the ring takes socket 0's ranks, then socket 1's.
  std::vector<RankPlacement> numa{{0, -1, 0}, {0, -1, 1}, {0, -1, 0}, {0, -1, 1}};
  auto one = buildCommChannels({h}, numa);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(ringLogLines(one.value())[0], "Channel 00/02 : 0 2 1 3");
}

}  // namespace
}  // namespace braid
