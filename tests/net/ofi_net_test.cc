// The built-in OFI (libfabric) network through the plugin ABI. ctest runs this group once per provider
// (FI_PROVIDER=tcp and FI_PROVIDER=shm, see CMakeLists.txt): libfabric reads FI_PROVIDER once per process.
#include <cstdlib>

#include "tests/net/net_test_util.h"
#if BRAID_HAVE_LIBFABRIC
#include "transports/net/libfabric/ofi_lib.h"
#endif

namespace braid {
namespace net {
namespace testing {
namespace {

class OfiNet : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ofiNetTable() == nullptr) GTEST_SKIP() << "built without libfabric";
    net_ = NetModule::wrapV8(ofiNetTable(), nullptr);
    Status s = net_->init();
    ASSERT_TRUE(s.isOk()) << s.message();
    Result<int> n = net_->devices();
    ASSERT_TRUE(n.isOk());
    ASSERT_GT(n.value(), 0) << "no libfabric provider with FI_EP_RDM + FI_TAGGED (FI_PROVIDER="
                            << (getenv("FI_PROVIDER") ? getenv("FI_PROVIDER") : "") << ")";
    // Prefer the loopback domain when the provider has one (tcp), so the test needs no routable interface.
    for (int d = 0; d < n.value(); ++d) {
      Result<NetProperties> p = net_->getProperties(d);
      ASSERT_TRUE(p.isOk());
      if (p.value().name.size() >= 3 && p.value().name.compare(p.value().name.size() - 3, 3, "/lo") == 0) dev_ = d;
    }
  }
  std::unique_ptr<NetModule> net_;
  int dev_ = 0;
};

TEST_F(OfiNet, PropertiesNameTheProvider) {
  Result<NetProperties> p = net_->getProperties(dev_);
  ASSERT_TRUE(p.isOk());
  const char* want = getenv("FI_PROVIDER");
  if (want != nullptr) {
    EXPECT_EQ(p.value().name.rfind(want, 0), 0u) << p.value().name << " is not from provider " << want;
  }
  EXPECT_EQ(p.value().ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.value().maxRecvs, 8);
  EXPECT_EQ(net_->name(), "OFI");
}

#if BRAID_HAVE_LIBFABRIC
// libfabric is dlopen()ed, and each function resolved at the symbol version this build's headers link against,
// which on the build host is the library's default (what dlsym gives).
TEST_F(OfiNet, LibraryIsLoadedAtTheHeadersSymbolVersions) {
  Result<const ofi::OfiLib*> lib = ofi::loadOfiLib();
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value()->name, "libfabric.so.1");
  std::string notDefault;
  for (const std::string& s : lib.value()->notDefault) notDefault += " " + s;
  EXPECT_TRUE(lib.value()->notDefault.empty()) << "pinned versions that are not the default:" << notDefault;
  EXPECT_EQ(ofi::ofiLib(), lib.value()) << "loaded once per process";
}
#endif

TEST_F(OfiNet, SizesZeroToSixtyFourMegabytes) {
  runSizes(*net_, dev_);
}
TEST_F(OfiNet, ManyRequestsInFlight) {
  runManyInFlight(*net_, dev_);
}
TEST_F(OfiNet, GroupedReceiveMatchesByTag) {
  runGrouped(*net_, dev_);
}
TEST_F(OfiNet, TagsSelectTheReceive) {
  runTags(*net_, dev_);
}
TEST_F(OfiNet, BetweenTwoProcesses) {
  runTwoProcesses(*net_, dev_);
}
TEST_F(OfiNet, CloseAfterCompletedSendStillDelivers) {
  runCloseAfterCompletedSend(*net_, dev_);
}

TEST_F(OfiNet, TwoConnectionsOnOneListenerStayApart) {
  NetHandle handle;
  void* listen = nullptr;
  ASSERT_TRUE(net_->listen(dev_, &handle, &listen).isOk());
  void* send[2] = {};
  void* recv[2] = {};
  NetHandle h[2] = {handle, handle};  // each connector has its own copy, as on two peers
  auto t0 = std::chrono::steady_clock::now();
  while ((send[0] == nullptr || send[1] == nullptr || recv[0] == nullptr || recv[1] == nullptr) &&
         secondsSince(t0) < 10) {
    for (int i = 0; i < 2; ++i) {
      if (send[i] == nullptr) {
        ASSERT_TRUE(net_->connect(dev_, &h[i], &send[i]).isOk());
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (recv[i] == nullptr) {
        ASSERT_TRUE(net_->accept(listen, &recv[i]).isOk());
      }
    }
  }
  ASSERT_TRUE(send[0] != nullptr && send[1] != nullptr && recv[0] != nullptr && recv[1] != nullptr);
  // The same tag on both connections: each receive gets its own connection's message.
  std::vector<char> a(3000), b(3000), ra(3000), rb(3000);
  fillPattern(&a, 1);
  fillPattern(&b, 2);
  Pair p0{net_.get(), nullptr, send[0], recv[0]};
  Pair p1{net_.get(), nullptr, send[1], recv[1]};
  size_t cap = 3000;
  int tag = 4;
  void* bufA = ra.data();
  void* bufB = rb.data();
  void* r0 = postRecv(p0, 1, &bufA, &cap, &tag, nullptr);
  void* r1 = postRecv(p1, 1, &bufB, &cap, &tag, nullptr);
  void* s1 = postSend(p1, b.data(), b.size(), 4, nullptr);
  void* s0 = postSend(p0, a.data(), a.size(), 4, nullptr);
  Status s = waitAll(*net_, {r0, r1, s0, s1}, nullptr);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(firstMismatch(ra.data(), ra.size(), 1), -1);
  EXPECT_EQ(firstMismatch(rb.data(), rb.size(), 2), -1);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(net_->closeSend(send[i]).isOk());
    EXPECT_TRUE(net_->closeRecv(recv[i]).isOk());
  }
  EXPECT_TRUE(net_->closeListen(listen).isOk());
}

TEST_F(OfiNet, PeerCloseMidTransferIsAnError) {
  bool intact = false;
  Status s = runPeerCloseMidTransfer(*net_, dev_, &intact);
  const char* prov = getenv("FI_PROVIDER");
  if (s.isOk() && prov != nullptr && std::string(prov) == "shm") {
    // shm's receiver copies straight from the sender's memory (which is still alive), so the message can
    // complete after the sender's close: acceptable only when every byte is right.
    EXPECT_TRUE(intact) << "shm reported success with wrong contents";
    return;
  }
  ASSERT_FALSE(s.isOk()) << "the receive completed although the sender closed mid-message";
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_EQ(s.message().find("test:"), std::string::npos) << "hung instead of failing: " << s.message();
}

TEST_F(OfiNet, PeerCloseWithReceivePendingIsAnError) {
  Pair p;
  ASSERT_TRUE(connectPair(*net_, dev_, &p).isOk());
  // One message goes through first: it must still be delivered after the close.
  std::vector<char> src(100), dst(100), dst2(100);
  fillPattern(&src, 3);
  void* sreq = postSend(p, src.data(), src.size(), 0, nullptr);
  size_t cap = 100;
  int tag = 0;
  void* buf = dst.data();
  void* rreq = postRecv(p, 1, &buf, &cap, &tag, nullptr);
  ASSERT_TRUE(waitAll(*net_, {sreq, rreq}, nullptr).isOk());
  EXPECT_EQ(firstMismatch(dst.data(), dst.size(), 3), -1);
  void* buf2 = dst2.data();
  void* pending = postRecv(p, 1, &buf2, &cap, &tag, nullptr);
  ASSERT_TRUE(net_->closeSend(p.send).isOk());
  p.send = nullptr;
  Status s = waitAll(*net_, {pending}, nullptr, 10);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("closed the connection"), std::string::npos) << s.message();
  closePair(&p);
}

TEST_F(OfiNet, BadArgumentsAreErrors) {
  EXPECT_EQ(net_->getProperties(999).status().code(), Code::kInvalidArgument);
  NetHandle handle;
  void* listen = nullptr;
  EXPECT_EQ(net_->listen(999, &handle, &listen).code(), Code::kInvalidArgument);
  NetHandle garbage;
  garbage.fill(0x5a);
  void* send = nullptr;
  Status s = net_->connect(dev_, &garbage, &send);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not an OFI-network listen handle"), std::string::npos) << s.message();
  Pair p;
  ASSERT_TRUE(connectPair(*net_, dev_, &p).isOk());
  void* mh = nullptr;
  EXPECT_EQ(net_->regMr(p.send, &handle, 8, NCCL_PTR_CUDA, &mh).code(), Code::kInvalidArgument);
  void* req = nullptr;
  char byte = 0;
  EXPECT_EQ(net_->isend(p.recv, &byte, 1, 0, nullptr, &req).code(), Code::kInvalidUsage);
  EXPECT_EQ(net_->isend(p.send, nullptr, 10, 0, nullptr, &req).code(), Code::kInvalidArgument);
  bool done = false;
  EXPECT_EQ(net_->test(nullptr, &done, nullptr).code(), Code::kInvalidArgument);
  closePair(&p);
}

}  // namespace
}  // namespace testing
}  // namespace net
}  // namespace braid
