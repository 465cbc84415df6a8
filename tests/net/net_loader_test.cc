// The loader: NCCL_NET_PLUGIN (external plugins by path or name, 'none', broken ones), NCCL_NET (by name,
// case-insensitive; unknown names), NCCL_IB_DISABLE and the fallback when IB has no device.
#include <dlfcn.h>

#include "tests/net/net_test_util.h"

#ifndef BRAID_DUMMY_PLUGIN_DIR
#error "BRAID_DUMMY_PLUGIN_DIR must name the folder holding libnccl-net-braidtest.so"
#endif

namespace braid {
namespace net {
namespace testing {
namespace {

const std::string kPluginDir = BRAID_DUMMY_PLUGIN_DIR;

class Loader : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"NCCL_SOCKET_IFNAME", "lo"};
  ScopedEnv net_{"NCCL_NET", nullptr};
  ScopedEnv plugin_{"NCCL_NET_PLUGIN", nullptr};
  ScopedEnv ibDisable_{"NCCL_IB_DISABLE", nullptr};
};

NetModule* find(NetSelection& sel, const std::string& name) {
  for (auto& m : sel.modules) {
    if (m->name() == name) return m.get();
  }
  return nullptr;
}

// A 4 KB message and a grouped receive through whatever network was chosen.
void exchange(NetModule& net) {
  Pair p;
  Status s = connectPair(net, 0, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  checkRoundTrip(net, p, 4096, 4096, 11);
  closePair(&p);
  runGrouped(net, 0);
}

TEST_F(Loader, DefaultWithoutPluginChoosesSocket) {
  // libnccl-net.so does not exist here: the built-ins are used.
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  ASSERT_NE(sel.value().chosen, nullptr);
  EXPECT_EQ(sel.value().chosen->name(), "Socket");
  EXPECT_FALSE(sel.value().chosen->external());
}

TEST_F(Loader, PluginByPathIsLoadedAndPreferred) {
  ScopedEnv p("NCCL_NET_PLUGIN", (kPluginDir + "/libnccl-net-braidtest.so").c_str());
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  NetModule* chosen = sel.value().chosen;
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->name(), "DummyLoop");
  EXPECT_TRUE(chosen->external());
  EXPECT_EQ(chosen->abiVersion(), 8);
  EXPECT_NE(find(sel.value(), "Socket"), nullptr) << "the built-ins stay available";
  exchange(*chosen);
}

TEST_F(Loader, PluginByShortNameAndSelectedByNcclNetCaseInsensitive) {
  // "braidtest" -> libnccl-net-braidtest.so, found through the test binary's run path.
  ScopedEnv p("NCCL_NET_PLUGIN", "braidtest");
  ScopedEnv n("NCCL_NET", "dummyLOOP");
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  EXPECT_EQ(sel.value().chosen->name(), "DummyLoop");
  EXPECT_EQ(sel.value().reason, "NCCL_NET=dummyLOOP");
}

TEST_F(Loader, V10PluginLoadsThroughItsAdapter) {
  ScopedEnv p("NCCL_NET_PLUGIN", "braidtest10");
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  NetModule* chosen = sel.value().chosen;
  EXPECT_EQ(chosen->name(), "DummyLoop10");
  EXPECT_EQ(chosen->abiVersion(), 10);
  Result<NetProperties> props = chosen->getProperties(0);
  ASSERT_TRUE(props.isOk());
  EXPECT_EQ(props.value().maxP2pBytes, size_t{1} << 40);
  exchange(*chosen);
  // A plugin's WARN text becomes the Status message.
  Result<NetProperties> bad = chosen->getProperties(3);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("DummyLoop: no device 3"), std::string::npos) << bad.status().message();
}

// The v11/v12 dummy's record of its contexts (tests/net/dummy_net_plugin.cc), read through the loaded library.
struct DummyContext {
  uint64_t commId = 0;
  int trafficClass = 0, live = 0, attrCalls = 0, uses = 0;
  ncclNetCommAttr_v11_t sendAttr{};
};
std::vector<DummyContext> dummyContexts(const std::string& lib) {
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return {};
  using Fn = int (*)(int, uint64_t*, int*, int*, int*, int*, ncclNetCommAttr_v11_t*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "braidDummyContexts"));
  std::vector<DummyContext> out;
  if (fn != nullptr) {
    DummyContext c;
    const int n = fn(-1, &c.commId, &c.trafficClass, &c.live, &c.attrCalls, &c.uses, &c.sendAttr);
    for (int i = 0; i < n; ++i) {
      fn(i, &c.commId, &c.trafficClass, &c.live, &c.attrCalls, &c.uses, &c.sendAttr);
      out.push_back(c);
    }
  }
  dlclose(h);
  return out;
}

// v11 and v12: init() opens the process's context (commId 0) at load; each communicator gets its own context,
// with its id and traffic class, which listen and connect receive (the dummy refuses any other), setNetAttr hears
// the communicator's shape (v11; v12's dummy has none), and finalize() runs when the last holder lets go.
TEST_F(Loader, V11AndV12PluginsGetAContextPerCommunicator) {
  for (int v : {11, 12}) {
    SCOPED_TRACE("v" + std::to_string(v));
    const std::string name = "braidtest" + std::to_string(v);
    ScopedEnv p("NCCL_NET_PLUGIN", name.c_str());
    Result<NetSelection> sel = loadNetworks();
    ASSERT_TRUE(sel.isOk()) << sel.status().message();
    NetModule* chosen = sel.value().chosen;
    EXPECT_EQ(chosen->name(), "DummyLoop" + std::to_string(v));
    EXPECT_EQ(chosen->abiVersion(), v);
    EXPECT_TRUE(chosen->perCommContext());
    Result<NetProperties> props = chosen->getProperties(0);
    ASSERT_TRUE(props.isOk()) << props.status().message();
    EXPECT_EQ(props.value().maxP2pBytes, size_t{1} << (v == 11 ? 34 : 35));
    EXPECT_EQ(props.value().railId, v == 12 ? 3 : -1);
    EXPECT_EQ(props.value().planeId, v == 12 ? 1 : -1);
    const std::string lib = "libnccl-net-" + name + ".so";
    std::vector<DummyContext> before = dummyContexts(lib);
    ASSERT_EQ(before.size(), 1u) << "the process's context";
    EXPECT_EQ(before[0].commId, 0u);
    EXPECT_EQ(before[0].trafficClass, NCCL_NET_TRAFFIC_CLASS_UNDEF);
    exchange(*chosen);  // through the process's context
    EXPECT_GE(dummyContexts(lib)[0].uses, 2);
    before = dummyContexts(lib);
    {
      Result<std::shared_ptr<NetContext>> ctx = chosen->openContext(0xabc123, 5, NetCommHints{8, 3});
      ASSERT_TRUE(ctx.isOk()) << ctx.status().message();
      EXPECT_NE(ctx.value()->ctx(), nullptr);
      Pair pair;
      Status s = connectPair(*chosen, 0, &pair, 10, ctx.value().get());
      ASSERT_TRUE(s.isOk()) << s.message();
      checkRoundTrip(*chosen, pair, 4096, 4096, 7);
      closePair(&pair);
      std::vector<DummyContext> open = dummyContexts(lib);
      ASSERT_EQ(open.size(), 2u);
      EXPECT_EQ(open[1].commId, 0xabc123u);
      EXPECT_EQ(open[1].trafficClass, 5);
      EXPECT_EQ(open[1].live, 1);
      // listen and connect (at least once: connect may be retried), and setNetAttr on v11.
      EXPECT_GE(open[1].uses, 2 + (v == 11 ? 1 : 0));
      EXPECT_EQ(open[0].uses, before[0].uses) << "nothing through the process's context";
      if (v == 11) {
        EXPECT_EQ(open[1].attrCalls, 1);
        EXPECT_EQ(open[1].sendAttr.maxConcurrentPeers, 4);  // min(nranks - 1, 4)
        EXPECT_EQ(open[1].sendAttr.minConcurrentPeers, 1);
        EXPECT_EQ(open[1].sendAttr.maxFlowsPerPeer, 3);  // one per channel
      } else {
        EXPECT_EQ(open[1].attrCalls, 0);
      }
    }
    std::vector<DummyContext> after = dummyContexts(lib);
    ASSERT_EQ(after.size(), 2u);
    EXPECT_EQ(after[1].live, 0) << "finalize() when the context is released";
    EXPECT_EQ(after[0].live, 1) << "the process's context stays";
  }
}

TEST_F(Loader, V9PluginLoadsThroughItsAdapter) {
  ScopedEnv p("NCCL_NET_PLUGIN", "braidtest9");
  ScopedEnv n("NCCL_NET", "DummyLoop9");
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  NetModule* chosen = sel.value().chosen;
  EXPECT_EQ(chosen->abiVersion(), 9);
  Result<NetProperties> props = chosen->getProperties(0);
  ASSERT_TRUE(props.isOk());
  EXPECT_EQ(props.value().maxP2pBytes, size_t{1} << 33);
  exchange(*chosen);
}

TEST_F(Loader, NcclNetSocketWhilePluginLoaded) {
  ScopedEnv p("NCCL_NET_PLUGIN", "braidtest");
  ScopedEnv n("NCCL_NET", "socket");
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  EXPECT_EQ(sel.value().chosen->name(), "Socket");
  exchange(*sel.value().chosen);
}

TEST_F(Loader, NonePluginLoadsNothing) {
  ScopedEnv p("NCCL_NET_PLUGIN", "none");
  {
    Result<NetSelection> sel = loadNetworks();
    ASSERT_TRUE(sel.isOk()) << sel.status().message();
    EXPECT_EQ(sel.value().chosen->name(), "Socket");
    for (auto& m : sel.value().modules) EXPECT_FALSE(m->external()) << m->name();
  }
  ScopedEnv n("NCCL_NET", "DummyLoop");
  Result<NetSelection> sel = loadNetworks();
  ASSERT_FALSE(sel.isOk());
  EXPECT_EQ(sel.status().code(), Code::kInvalidArgument);
  EXPECT_NE(sel.status().message().find("NCCL_NET=DummyLoop names no available network"), std::string::npos)
      << sel.status().message();
}

TEST_F(Loader, UnknownNetworkNameIsAnErrorListingTheAvailableOnes) {
  ScopedEnv n("NCCL_NET", "bogus");
  Result<NetSelection> sel = loadNetworks();
  ASSERT_FALSE(sel.isOk());
  EXPECT_EQ(sel.status().code(), Code::kInvalidArgument);
  const std::string& m = sel.status().message();
  EXPECT_NE(m.find("NCCL_NET=bogus"), std::string::npos) << m;
  EXPECT_NE(m.find("Socket (1 devices)"), std::string::npos) << m;
}

TEST_F(Loader, MissingOrBrokenPluginFallsBackToBuiltins) {
  {
    ScopedEnv p("NCCL_NET_PLUGIN", "/nonexistent/libnccl-net-x.so");
    Result<NetSelection> sel = loadNetworks();
    ASSERT_TRUE(sel.isOk()) << sel.status().message();
    EXPECT_EQ(sel.value().chosen->name(), "Socket");
  }
  {
    // Loads, but exports no ncclNetPlugin_vN symbol.
    ScopedEnv p("NCCL_NET_PLUGIN", "libm.so.6");
    Result<NetSelection> sel = loadNetworks();
    ASSERT_TRUE(sel.isOk()) << sel.status().message();
    EXPECT_EQ(sel.value().chosen->name(), "Socket");
    for (auto& m : sel.value().modules) EXPECT_FALSE(m->external());
  }
}

TEST_F(Loader, LoadNetPluginReportsWhatItLoaded) {
  Result<std::unique_ptr<NetModule>> none = loadNetPlugin("none");
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(none.value(), nullptr);
  Result<std::unique_ptr<NetModule>> m = loadNetPlugin("braidtest");
  ASSERT_TRUE(m.isOk());
  ASSERT_NE(m.value(), nullptr);
  EXPECT_EQ(m.value()->origin(), "libnccl-net-braidtest.so");
}

TEST_F(Loader, ProcessNetworksLoadsOnce) {
  Result<NetSelection*> first = processNetworks();
  ASSERT_TRUE(first.isOk()) << first.status().message();
  ASSERT_NE(first.value()->chosen, nullptr);
  ScopedEnv n("NCCL_NET", "bogus");  // not seen any more: the selection is made once
  Result<NetSelection*> second = processNetworks();
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ(first.value(), second.value());
}

TEST_F(Loader, IbWithoutDevicesFallsBackAndHonoursDisable) {
  if (ibNetTable() == nullptr) GTEST_SKIP() << "built without libibverbs";
  {
    Result<NetSelection> sel = loadNetworks();
    ASSERT_TRUE(sel.isOk()) << sel.status().message();
    NetModule* ib = find(sel.value(), "IB");
    ASSERT_NE(ib, nullptr) << "IB initialises even without a device";
    Result<int> n = ib->devices();
    ASSERT_TRUE(n.isOk());
    if (n.value() > 0) GTEST_SKIP() << "this host has an RDMA device";
    EXPECT_EQ(sel.value().chosen->name(), "Socket");
  }
  {
    ScopedEnv n("NCCL_NET", "ib");
    Result<NetSelection> sel = loadNetworks();
    ASSERT_FALSE(sel.isOk());
    EXPECT_NE(sel.status().message().find("no devices"), std::string::npos) << sel.status().message();
  }
  {
    ScopedEnv d("NCCL_IB_DISABLE", "1");
    Result<NetSelection> sel = loadNetworks();
    ASSERT_TRUE(sel.isOk());
    EXPECT_EQ(find(sel.value(), "IB"), nullptr) << "NCCL_IB_DISABLE=1 must keep IB out";
  }
}

}  // namespace
}  // namespace testing
}  // namespace net
}  // namespace braid
