// The network transport and a v12 net plugin: a communicator's connections go through one context of its own,
// opened at its first network connection with its id and traffic class, and finalized once its last connection
// has closed. Its own ctest entry (net_plugin_context): the process's networks load once, with the v12 dummy.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/net/net_test_util.h"
#include "transports/transport.h"

namespace braid {
namespace net {
namespace testing {
namespace {

struct Ctx {
  uint64_t commId = 0;
  int trafficClass = 0, live = 0, attrCalls = 0, uses = 0;
  ncclNetCommAttr_v11_t sendAttr{};
};

std::vector<Ctx> contexts() {
  void* h = dlopen("libnccl-net-braidtest12.so", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return {};
  using Fn = int (*)(int, uint64_t*, int*, int*, int*, int*, ncclNetCommAttr_v11_t*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "braidDummyContexts"));
  std::vector<Ctx> out;
  Ctx c;
  const int n = fn != nullptr ? fn(-1, &c.commId, &c.trafficClass, &c.live, &c.attrCalls, &c.uses, &c.sendAttr) : 0;
  for (int i = 0; i < n; ++i) {
    fn(i, &c.commId, &c.trafficClass, &c.live, &c.attrCalls, &c.uses, &c.sendAttr);
    out.push_back(c);
  }
  dlclose(h);
  return out;
}

const Ctx* findComm(const std::vector<Ctx>& all, uint64_t commId) {
  for (const Ctx& c : all) {
    if (c.commId == commId) return &c;
  }
  return nullptr;
}

TEST(NetPluginContext, AConnectionPairUsesItsCommunicatorsContextUntilItCloses) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", "braidtest12");
  braid::TransportConfig cfg = TransportConfig::fromParams();
  cfg.timeoutSec = 10;
  cfg.netComm = std::make_shared<braid::NetCommState>();
  cfg.netComm->commId = 0x5eed;
  cfg.netComm->trafficClass = 2;
  cfg.netComm->nranks = 2;
  braid::PeerInfo a, b;
  a.rank = 0;
  b.rank = 1;
  a.hostHash = 1;
  b.hostHash = 2;  // two hosts: the network transport
  a.pid = b.pid = getpid();
  snprintf(a.hostname, sizeof(a.hostname), "host-a");
  snprintf(b.hostname, sizeof(b.hostname), "host-b");
  braid::Transport* net = braid::netTransport();
  ASSERT_TRUE(net->canConnect(cfg, b, a));
  {
    Result<braid::RecvSetup> recv = net->setupRecv(cfg, b, a, 0, 4096, 4096);
    ASSERT_TRUE(recv.isOk()) << recv.status().message();
    Result<std::unique_ptr<braid::Connector>> send = net->connectSend(cfg, a, b, 0, recv.value().blob);
    ASSERT_TRUE(send.isOk()) << send.status().message();
    const std::vector<Ctx> open = contexts();
    const Ctx* mine = findComm(open, 0x5eed);
    ASSERT_NE(mine, nullptr) << open.size() << " contexts";
    EXPECT_EQ(mine->trafficClass, 2);
    EXPECT_EQ(mine->live, 1);
    EXPECT_GE(mine->uses, 1) << "listen through the communicator's context";
    EXPECT_EQ(open.size(), 2u) << "the process's and this communicator's: both ends share one";
    // The communicator lets go of its transport state; its connections still hold the context.
    cfg.netComm.reset();
    EXPECT_EQ(findComm(contexts(), 0x5eed)->live, 1);
  }
  // The connectors are gone: the proxy closes the connections, then the last holder finalizes the context.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (findComm(contexts(), 0x5eed)->live != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(findComm(contexts(), 0x5eed)->live, 0) << "finalize() after the last connection closed";
}

}  // namespace
}  // namespace testing
}  // namespace net
}  // namespace braid
