// The built-in Socket network through the plugin ABI (NetModule over its ncclNet_v8_t table), on loopback.
#include <dirent.h>

#include <atomic>
#include <thread>

#include "tests/net/net_test_util.h"

namespace braid {
namespace net {
namespace testing {
namespace {

class SocketNet : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = NetModule::wrapV8(socketNetTable(), nullptr);
    Status s = net_->init();
    ASSERT_TRUE(s.isOk()) << s.message();
    Result<int> n = net_->devices();
    ASSERT_TRUE(n.isOk());
    ASSERT_EQ(n.value(), 1) << "NCCL_SOCKET_IFNAME=lo gives one device";
  }
  ScopedEnv ifname_{"NCCL_SOCKET_IFNAME", "lo"};
  std::unique_ptr<NetModule> net_;
};

int countOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (d != nullptr && readdir(d) != nullptr) ++n;
  if (d != nullptr) closedir(d);
  return n;
}

TEST_F(SocketNet, PropertiesDescribeTheLoopbackDevice) {
  Result<NetProperties> p = net_->getProperties(0);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(p.value().name, "lo");
  EXPECT_EQ(p.value().ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.value().maxRecvs, 8);
  EXPECT_GT(p.value().speedMbps, 0);
  EXPECT_EQ(net_->name(), "Socket");
  EXPECT_EQ(net_->abiVersion(), 8);
}

TEST_F(SocketNet, SizesZeroToSixtyFourMegabytes) {
  runSizes(*net_, 0);
}
TEST_F(SocketNet, ManyRequestsInFlight) {
  runManyInFlight(*net_, 0);
}
TEST_F(SocketNet, GroupedReceiveMatchesByTag) {
  runGrouped(*net_, 0);
}
TEST_F(SocketNet, TagsSelectTheReceive) {
  runTags(*net_, 0);
}
TEST_F(SocketNet, BetweenTwoProcesses) {
  runTwoProcesses(*net_, 0);
}
TEST_F(SocketNet, CloseAfterCompletedSendStillDelivers) {
  runCloseAfterCompletedSend(*net_, 0);
}

TEST_F(SocketNet, ConnectAndAcceptFromTwoThreads) {
  NetHandle handle;
  void* listen = nullptr;
  ASSERT_TRUE(net_->listen(0, &handle, &listen).isOk());
  void* send = nullptr;
  void* recv = nullptr;
  NetHandle copy = handle;  // what the peer would receive out of band
  std::thread connector([&] {
    auto t0 = std::chrono::steady_clock::now();
    while (send == nullptr && secondsSince(t0) < 10) ASSERT_TRUE(net_->connect(0, &copy, &send).isOk());
  });
  auto t0 = std::chrono::steady_clock::now();
  while (recv == nullptr && secondsSince(t0) < 10) ASSERT_TRUE(net_->accept(listen, &recv).isOk());
  connector.join();
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  // A 1 MB message, sender and receiver each driven by its own thread.
  std::vector<char> src(1 << 20), dst(1 << 20, 0);
  fillPattern(&src, 9);
  std::thread sender([&] {
    void* req = nullptr;
    ASSERT_TRUE(net_->isend(send, src.data(), src.size(), 0, nullptr, &req).isOk());
    ASSERT_NE(req, nullptr);
    ASSERT_TRUE(waitAll(*net_, {req}, nullptr).isOk());
  });
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  void* req = nullptr;
  ASSERT_TRUE(net_->irecv(recv, 1, &buf, &cap, &tag, nullptr, &req).isOk());
  Status s = waitAll(*net_, {req}, nullptr);
  sender.join();
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(firstMismatch(dst.data(), dst.size(), 9), -1);
  EXPECT_TRUE(net_->closeSend(send).isOk());
  EXPECT_TRUE(net_->closeRecv(recv).isOk());
  EXPECT_TRUE(net_->closeListen(listen).isOk());
}

TEST_F(SocketNet, ThreadsTimesSocketsSplitLargeMessages) {
  ScopedEnv t("NCCL_SOCKET_NTHREADS", "4");
  ScopedEnv k("NCCL_NSOCKS_PERTHREAD", "2");
  int before = countOpenFds();
  Pair p;
  Status s = connectPair(*net_, 0, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  // listen socket + (1 control + 8 data) sockets on each side.
  EXPECT_EQ(countOpenFds() - before, 1 + 2 * 9);
  for (size_t size : {size_t{1}, size_t{65536 * 3 + 17}, size_t{1} << 20, (size_t{64} << 20) + 3}) {
    checkRoundTrip(*net_, p, size, size, 4);
  }
  closePair(&p);
  EXPECT_EQ(countOpenFds(), before);
}

TEST_F(SocketNet, ThreadsTimesSocketsAbove64IsRefused) {
  ScopedEnv t("NCCL_SOCKET_NTHREADS", "16");
  ScopedEnv k("NCCL_NSOCKS_PERTHREAD", "8");
  NetHandle handle;
  void* listen = nullptr;
  Status s = net_->listen(0, &handle, &listen);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("NCCL_SOCKET_NTHREADS=16 x NCCL_NSOCKS_PERTHREAD=8 = 128"), std::string::npos)
      << s.message();
  EXPECT_EQ(listen, nullptr);
}

TEST_F(SocketNet, ZeroThreadsIsRefused) {
  ScopedEnv t("NCCL_SOCKET_NTHREADS", "0");
  NetHandle handle;
  void* listen = nullptr;
  Status s = net_->listen(0, &handle, &listen);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("NCCL_SOCKET_NTHREADS=0"), std::string::npos) << s.message();
}

TEST_F(SocketNet, PeerCloseMidTransferIsAnErrorNamingThePeer) {
  Status s = runPeerCloseMidTransfer(*net_, 0);
  ASSERT_FALSE(s.isOk()) << "the receive completed although the sender closed mid-message";
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_EQ(s.message().find("test:"), std::string::npos) << "hung instead of failing: " << s.message();
  EXPECT_NE(s.message().find("127.0.0.1"), std::string::npos) << s.message();
}

TEST_F(SocketNet, PeerCloseWithReceivePendingIsAnError) {
  Pair p;
  ASSERT_TRUE(connectPair(*net_, 0, &p).isOk());
  std::vector<char> dst(100);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  void* req = postRecv(p, 1, &buf, &cap, &tag, nullptr);
  bool done = false;
  ASSERT_TRUE(net_->test(req, &done, nullptr).isOk());
  EXPECT_FALSE(done);
  ASSERT_TRUE(net_->closeSend(p.send).isOk());
  p.send = nullptr;
  Status s = waitAll(*net_, {req}, nullptr, 10);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("closed by peer"), std::string::npos) << s.message();
  // The connection stays failed: a new receive is refused at once.
  void* req2 = nullptr;
  EXPECT_FALSE(net_->irecv(p.recv, 1, &buf, &cap, &tag, nullptr, &req2).isOk());
  closePair(&p);
}

// A message that arrived before the peer closed is delivered even when one progress pass reads it and then the
// close: the receive posted for it completes with its data, the next one fails naming the close (regression: the
// close failed both, and the last message before a peer's end was lost now and then).
TEST_F(SocketNet, AMessageFollowedByThePeersCloseIsStillDelivered) {
  Pair p;
  ASSERT_TRUE(connectPair(*net_, 0, &p).isOk());
  std::vector<char> first(64, 0), second(64, 0);
  void* b1 = first.data();
  void* b2 = second.data();
  size_t cap = 64;
  int tag = 3;
  // Both receives posted (and untested) before anything is sent, so the first test meets header and close at once.
  void* r1 = postRecv(p, 1, &b1, &cap, &tag, nullptr);
  void* r2 = postRecv(p, 1, &b2, &cap, &tag, nullptr);
  std::vector<char> msg(40);
  fillPattern(&msg, 9);
  void* sreq = postSend(p, msg.data(), msg.size(), tag, nullptr);
  ASSERT_TRUE(waitAll(*net_, {sreq}, nullptr, 10).isOk());
  ASSERT_TRUE(net_->closeSend(p.send).isOk());
  p.send = nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the header, its payload and the close are all in
  std::vector<std::vector<int>> sizes;
  Status s = waitAll(*net_, {r1}, &sizes, 10);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(sizes[0][0], 40);
  EXPECT_EQ(firstMismatch(first.data(), 40, 9), -1);
  s = waitAll(*net_, {r2}, nullptr, 10);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("closed by peer"), std::string::npos) << s.message();
  closePair(&p);
}

// The same for a message carried by the data sockets (over 64 KB): its header and the close are read in one pass
// while its pieces are still on the data sockets; they are still moved, and the receive completes with every byte.
TEST_F(SocketNet, ALargeMessageFollowedByThePeersCloseIsStillDelivered) {
  Pair p;
  ASSERT_TRUE(connectPair(*net_, 0, &p).isOk());
  constexpr size_t kBytes = 200000;
  std::vector<char> dst(kBytes, 0);
  void* buf = dst.data();
  size_t cap = kBytes;
  int tag = 4;
  void* r1 = postRecv(p, 1, &buf, &cap, &tag, nullptr);
  std::vector<char> spare(16);
  void* b2 = spare.data();
  size_t cap2 = spare.size();
  void* r2 = postRecv(p, 1, &b2, &cap2, &tag, nullptr);  // so the pass goes on to read the close
  std::vector<char> msg(kBytes);
  fillPattern(&msg, 11);
  void* sreq = postSend(p, msg.data(), msg.size(), tag, nullptr);
  ASSERT_TRUE(waitAll(*net_, {sreq}, nullptr, 10).isOk());  // the kernel's socket buffers hold it
  ASSERT_TRUE(net_->closeSend(p.send).isOk());
  p.send = nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<std::vector<int>> sizes;
  Status s = waitAll(*net_, {r1}, &sizes, 10);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(sizes[0][0], static_cast<int>(kBytes));
  EXPECT_EQ(firstMismatch(dst.data(), kBytes, 11), -1);
  EXPECT_FALSE(waitAll(*net_, {r2}, nullptr, 10).isOk());
  closePair(&p);
}

TEST_F(SocketNet, ReceiverCloseFailsTheSender) {
  Pair p;
  ASSERT_TRUE(connectPair(*net_, 0, &p).isOk());
  ASSERT_TRUE(net_->closeRecv(p.recv).isOk());
  p.recv = nullptr;
  std::vector<char> src(size_t{32} << 20, 1);
  void* req = postSend(p, src.data(), src.size(), 0, nullptr);
  Status s = waitAll(*net_, {req}, nullptr, 10);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_EQ(s.message().find("test:"), std::string::npos) << s.message();
  closePair(&p);
}

TEST_F(SocketNet, MessageLargerThanTheBufferIsAnError) {
  Pair p;
  ASSERT_TRUE(connectPair(*net_, 0, &p).isOk());
  std::vector<char> src(2000, 1), dst(1000);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  void* rreq = postRecv(p, 1, &buf, &cap, &tag, nullptr);
  void* sreq = postSend(p, src.data(), src.size(), 0, nullptr);
  (void)sreq;
  Status s = waitAll(*net_, {rreq}, nullptr, 10);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("2000 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1000-byte"), std::string::npos) << s.message();
  closePair(&p);
}

TEST_F(SocketNet, BadArgumentsAreErrors) {
  EXPECT_EQ(net_->getProperties(5).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(net_->getProperties(-1).status().code(), Code::kInvalidArgument);
  NetHandle handle;
  void* listen = nullptr;
  EXPECT_EQ(net_->listen(3, &handle, &listen).code(), Code::kInvalidArgument);
  NetHandle garbage;
  garbage.fill(0x5a);
  void* send = nullptr;
  Status s = net_->connect(0, &garbage, &send);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not a Socket-network listen handle"), std::string::npos) << s.message();
  Pair p;
  ASSERT_TRUE(connectPair(*net_, 0, &p).isOk());
  void* mh = nullptr;
  s = net_->regMr(p.send, &handle, 8, NCCL_PTR_CUDA, &mh);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("memory type 2"), std::string::npos) << s.message();
  void* req = nullptr;
  void* bufs[9] = {};
  size_t sizes[9] = {};
  int tags[9] = {};
  EXPECT_EQ(net_->irecv(p.recv, 0, bufs, sizes, tags, nullptr, &req).code(), Code::kInvalidArgument);
  EXPECT_EQ(net_->irecv(p.recv, 9, bufs, sizes, tags, nullptr, &req).code(), Code::kInvalidArgument);
  EXPECT_EQ(net_->isend(p.send, nullptr, 10, 0, nullptr, &req).code(), Code::kInvalidArgument);
  bool done = false;
  EXPECT_EQ(net_->test(nullptr, &done, nullptr).code(), Code::kInvalidArgument);
  closePair(&p);
}

// Run only as the child of runTwoProcesses (BRAID_NET_CHILD="<network>:<dev>:<fd>"); skipped otherwise.
TEST(NetChild, SendToParent) {
  const char* spec = getenv("BRAID_NET_CHILD");
  if (spec == nullptr) GTEST_SKIP() << "only run by runTwoProcesses";
  std::string text = spec;
  size_t a = text.find(':');
  size_t b = text.rfind(':');
  ASSERT_TRUE(a != std::string::npos && b > a) << text;
  std::string name = text.substr(0, a);
  int dev = atoi(text.substr(a + 1, b - a - 1).c_str());
  int fd = atoi(text.substr(b + 1).c_str());
  const ncclNet_v8_t* table = name == "Socket" ? socketNetTable() : name == "OFI" ? ofiNetTable() : nullptr;
  ASSERT_NE(table, nullptr) << name;
  auto net = NetModule::wrapV8(table, nullptr);
  ASSERT_TRUE(net->init().isOk());
  twoProcessChild(*net, dev, fd);
}

}  // namespace
}  // namespace testing
}  // namespace net
}  // namespace braid
