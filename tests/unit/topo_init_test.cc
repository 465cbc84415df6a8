// The init hooks driven by the parameter registry: NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE(_RANK), NCCL_GRAPH_FILE,
// NCCL_GRAPH_DUMP_FILE, NCCL_P2P_LEVEL, NCCL_CROSS_NIC; the NUMA helpers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "topology/topo_init.h"

namespace braid {
namespace {

std::string fixture(const std::string& name) {
  return std::string(BRAID_FIXTURES_DIR) + "/topo/" + name;
}

// Sets environment variables for one test and restores them after.
class EnvGuard {
 public:
  void set(const char* name, const std::string& value) {
    const char* old = getenv(name);
    saved_.emplace_back(name, old ? std::make_pair(true, std::string(old)) : std::make_pair(false, std::string()));
    setenv(name, value.c_str(), 1);
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second.first) {
        setenv(it->first.c_str(), it->second.second.c_str(), 1);
      } else {
        unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

std::string temp(const char* tag) {
  return strPrintf("/tmp/braid_topo_init_%s_%d.xml", tag, static_cast<int>(getpid()));
}

bool exists(const std::string& p) {
  return access(p.c_str(), F_OK) == 0;
}

TEST(TopoInit, TopoFileAndDumpRank) {
  std::string dump = temp("dump");
  unlink(dump.c_str());
  EnvGuard env;
  env.set("NCCL_TOPO_FILE", fixture("dgx_a100.xml"));
  env.set("NCCL_TOPO_DUMP_FILE", dump);
  env.set("NCCL_TOPO_DUMP_FILE_RANK", "1");
  env.set("NCCL_HOSTID", "node-a");
  auto r0 = initHostTopology(0);
  ASSERT_TRUE(r0.isOk()) << r0.status().message();
  EXPECT_EQ(r0.value().graph.nodesOf(NodeType::kGpu).size(), 8u);
  EXPECT_EQ(r0.value().hostId, "node-a");
  EXPECT_FALSE(exists(dump));  // rank 0 is not NCCL_TOPO_DUMP_FILE_RANK
  auto r1 = initHostTopology(1);
  ASSERT_TRUE(r1.isOk());
  ASSERT_TRUE(exists(dump));
  auto back = loadTopoFile(dump, PathOptions());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value().graph.describe(), r1.value().graph.describe());
  unlink(dump.c_str());
}

TEST(TopoInit, BadKnobsNameThemselves) {
  EnvGuard env;
  env.set("NCCL_P2P_LEVEL", "FAR");
  auto r = initHostTopology(0);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("NCCL_P2P_LEVEL: unknown path type 'FAR'"), std::string::npos)
      << r.status().message();
  env.set("NCCL_P2P_LEVEL", "SYS");
  env.set("NCCL_TOPO_FILE", "/nonexistent.xml");
  auto f = initHostTopology(0);
  ASSERT_FALSE(f.isOk());
  EXPECT_NE(f.status().message().find("/nonexistent.xml"), std::string::npos);
}

TEST(TopoInit, P2pLevelFromEnvironment) {
  EnvGuard env;
  env.set("NCCL_TOPO_FILE", fixture("pcie_4gpu.xml"));
  env.set("NCCL_P2P_LEVEL", "4");  // NCCL's numeric form: PHB
  auto r = initHostTopology(0);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const TopoGraph& g = r.value().graph;
  EXPECT_EQ(g.pathOptions().p2pLevel, PathType::kPhb);
  const auto& gpus = g.nodesOf(NodeType::kGpu);
  EXPECT_TRUE(g.p2pOk(gpus[0], gpus[3]));
}

TEST(TopoInit, GraphDumpThenGraphFile) {
  std::string dump = temp("graph");
  EnvGuard env;
  env.set("NCCL_TOPO_FILE", fixture("dgx_h100.xml"));
  env.set("NCCL_GRAPH_DUMP_FILE", dump);
  auto sys = initHostTopology(0);
  ASSERT_TRUE(sys.isOk());
  auto searched = computeHostGraphs(sys.value(), false, 0);
  ASSERT_TRUE(searched.isOk()) << searched.status().message();
  ASSERT_TRUE(exists(dump));
  {
    EnvGuard env2;
    env2.set("NCCL_GRAPH_DUMP_FILE", "");
    env2.set("NCCL_GRAPH_FILE", dump);
    auto loaded = computeHostGraphs(sys.value(), false, 0);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
    EXPECT_EQ(describeGraph(loaded.value().ring), describeGraph(searched.value().ring));
    EXPECT_EQ(describeGraph(loaded.value().tree), describeGraph(searched.value().tree));
    EXPECT_EQ(loaded.value().nvls.nChannels, 8);
  }
  {
    // A graph file for another machine is refused with the file, line and element.
    EnvGuard env3;
    env3.set("NCCL_GRAPH_DUMP_FILE", "");
    env3.set("NCCL_GRAPH_FILE", dump);
    env3.set("NCCL_TOPO_FILE", fixture("pcie_4gpu.xml"));
    auto small = initHostTopology(0);
    ASSERT_TRUE(small.isOk());
    auto bad = computeHostGraphs(small.value(), false, 0);
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find(dump + ":8: <gpu>: GPU dev 4 is not in the topology"), std::string::npos)
        << bad.status().message();
  }
  unlink(dump.c_str());
}

TEST(TopoInit, CrossNicFromEnvironment) {
  EnvGuard env;
  env.set("NCCL_TOPO_FILE", fixture("dgx_h100.xml"));
  env.set("NCCL_CROSS_NIC", "1");
  auto sys = initHostTopology(0);
  ASSERT_TRUE(sys.isOk());
  auto g = computeHostGraphs(sys.value(), true, 0);
  ASSERT_TRUE(g.isOk());
  EXPECT_EQ(g.value().ring.crossNic, 1);
}

TEST(TopoInit, NumaHelpers) {
  EXPECT_EQ(cpusOfAffinity("0000000c"), (std::vector<int>{2, 3}));
  EXPECT_EQ(cpusOfAffinity("00000001,80000000"), (std::vector<int>{31, 32}));
  EXPECT_EQ(cpusOfAffinity("0x00000003"), (std::vector<int>{0, 1}));
  EXPECT_TRUE(cpusOfAffinity("zz").empty());
  auto sys = loadTopoFile(fixture("dgx_h100.xml"), PathOptions());
  ASSERT_TRUE(sys.isOk());
  const TopoGraph& g = sys.value().graph;
  const auto& gpus = g.nodesOf(NodeType::kGpu);
  EXPECT_EQ(numaOf(g, gpus[0]), 0);
  EXPECT_EQ(numaOf(g, gpus[7]), 1);
  EXPECT_EQ(numaOf(g, g.findNode(NodeType::kNet, 5)), 1);
  // DGX-H100 socket 1 owns CPUs 56-111 and 168-223.
  std::vector<int> cpus = cpusOfAffinity(g.node(g.findNode(NodeType::kCpu, 1)).affinity);
  ASSERT_EQ(cpus.size(), 112u);
  EXPECT_EQ(cpus.front(), 56);
  EXPECT_EQ(cpus.back(), 223);
}

}  // namespace
}  // namespace braid
