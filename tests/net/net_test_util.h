// Helpers shared by the network tests: environment guards, connection setup between the two ends of a network
// in one process, and a generic suite (sizes, many requests, grouped receives, tags, peer close) that runs on any
// NetModule.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/scoped_env.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace net {
namespace testing {

using ::braid_test::ScopedEnv;

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Pair {
  NetModule* net = nullptr;
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// Listens on dev and connects to itself, driving connect() and accept() alternately from this thread.
// `ctx`: a communicator's context (null: the process's).
inline Status connectPair(NetModule& net, int dev, Pair* p, double timeoutSec = 10, const NetContext* ctx = nullptr) {
  p->net = &net;
  NetHandle handle;
  BRAID_RETURN_IF_ERROR(net.listen(ctx, dev, &handle, &p->listen));
  auto t0 = std::chrono::steady_clock::now();
  while (p->send == nullptr || p->recv == nullptr) {
    if (p->send == nullptr) BRAID_RETURN_IF_ERROR(net.connect(ctx, dev, &handle, &p->send));
    if (p->recv == nullptr) BRAID_RETURN_IF_ERROR(net.accept(p->listen, &p->recv));
    if (secondsSince(t0) > timeoutSec) return remoteError("test: connection not established in %.0f s", timeoutSec);
  }
  return Status::ok();
}

inline void closePair(Pair* p) {
  if (p->send != nullptr) {
    EXPECT_TRUE(p->net->closeSend(p->send).isOk());
  }
  if (p->recv != nullptr) {
    EXPECT_TRUE(p->net->closeRecv(p->recv).isOk());
  }
  if (p->listen != nullptr) {
    EXPECT_TRUE(p->net->closeListen(p->listen).isOk());
  }
  *p = Pair();
}

// Tests the requests until all are done (or one fails, or the deadline passes).
inline Status waitAll(NetModule& net, std::vector<void*> reqs, std::vector<std::vector<int>>* sizes,
                      double timeoutSec = 30) {
  if (sizes != nullptr) sizes->assign(reqs.size(), std::vector<int>(8, -1));
  auto t0 = std::chrono::steady_clock::now();
  size_t left = reqs.size();
  while (left > 0) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i] == nullptr) continue;
      bool done = false;
      int sz[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
      Status s = net.test(reqs[i], &done, sz);
      if (!s.isOk()) return s;
      if (done) {
        if (sizes != nullptr) (*sizes)[i].assign(sz, sz + 8);
        reqs[i] = nullptr;
        --left;
      }
    }
    if (secondsSince(t0) > timeoutSec) return remoteError("test: %zu requests not done after %.0f s", left, timeoutSec);
  }
  return Status::ok();
}

inline void fillPattern(std::vector<char>* buf, int seed) {
  for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed)) & 0xff);
}

// Index of the first byte that differs from the pattern, or -1.
inline long firstMismatch(const char* data, size_t size, int seed) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != static_cast<char>((i * 131 + static_cast<size_t>(seed)) & 0xff)) return static_cast<long>(i);
  }
  return -1;
}

// Posts a send, retrying while the network reports too many requests in flight.
inline void* postSend(Pair& p, void* data, size_t size, int tag, void* mh) {
  void* req = nullptr;
  for (int i = 0; i < 1000000 && req == nullptr; ++i) {
    Status s = p.net->isend(p.send, data, size, tag, mh, &req);
    EXPECT_TRUE(s.isOk()) << s.message();
    if (!s.isOk()) return nullptr;
  }
  return req;
}

inline void* postRecv(Pair& p, int n, void** data, const size_t* sizes, const int* tags, void** mhs) {
  void* req = nullptr;
  for (int i = 0; i < 1000000 && req == nullptr; ++i) {
    Status s = p.net->irecv(p.recv, n, data, sizes, tags, mhs, &req);
    EXPECT_TRUE(s.isOk()) << s.message();
    if (!s.isOk()) return nullptr;
  }
  return req;
}

// ---- the generic suite ------------------------------------------------------------------------------------------

// One message of `size` bytes into a buffer of `cap` bytes; checks contents and the reported size.
inline void checkRoundTrip(NetModule& net, Pair& p, size_t size, size_t cap, int tag) {
  SCOPED_TRACE("size " + std::to_string(size) + " cap " + std::to_string(cap));
  std::vector<char> src(size + 1), dst(cap + 1, static_cast<char>(0xEE));
  fillPattern(&src, static_cast<int>(size % 251));
  void* smh = nullptr;
  void* rmh = nullptr;
  ASSERT_TRUE(net.regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smh).isOk());
  ASSERT_TRUE(net.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmh).isOk());
  void* rbuf = dst.data();
  int tags[1] = {tag};
  void* rreq = postRecv(p, 1, &rbuf, &cap, tags, &rmh);
  void* sreq = postSend(p, src.data(), size, tag, smh);
  ASSERT_NE(rreq, nullptr);
  ASSERT_NE(sreq, nullptr);
  std::vector<std::vector<int>> sizes;
  Status s = waitAll(net, {sreq, rreq}, &sizes);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(sizes[0][0], static_cast<int>(size));
  EXPECT_EQ(sizes[1][0], static_cast<int>(size));
  EXPECT_EQ(firstMismatch(dst.data(), size, static_cast<int>(size % 251)), -1);
  EXPECT_EQ(dst[size], static_cast<char>(0xEE)) << "wrote past the message";
  EXPECT_TRUE(net.deregMr(p.send, smh).isOk());
  EXPECT_TRUE(net.deregMr(p.recv, rmh).isOk());
}

inline void runSizes(NetModule& net, int dev) {
  Pair p;
  Status s = connectPair(net, dev, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{1} << 20, size_t{64} << 20}) {
    checkRoundTrip(net, p, size, size, 1);
  }
  checkRoundTrip(net, p, 1000, 4096, 2);  // a message smaller than its buffer
  closePair(&p);
}

// NCCL_NET_MAX_REQUESTS sends and receives in flight at once, each with its own contents; one more is refused
// with a null request (not an error), and everything arrives in order.
inline void runManyInFlight(NetModule& net, int dev) {
  Pair p;
  Status s = connectPair(net, dev, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  const int n = NCCL_NET_MAX_REQUESTS;
  const size_t size = 10000;
  std::vector<std::vector<char>> src(n, std::vector<char>(size)), dst(n, std::vector<char>(size, 0));
  std::vector<void*> reqs;
  void* smh = nullptr;
  void* rmh = nullptr;
  for (int i = 0; i < n; ++i) {
    fillPattern(&src[i], i);
    void* rbuf = dst[i].data();
    int tag = 5;
    void* req = nullptr;
    ASSERT_TRUE(net.irecv(p.recv, 1, &rbuf, &size, &tag, &rmh, &req).isOk());
    ASSERT_NE(req, nullptr) << "receive " << i;
    reqs.push_back(req);
  }
  void* extra = nullptr;
  void* rbuf = dst[0].data();
  int tag = 5;
  ASSERT_TRUE(net.irecv(p.recv, 1, &rbuf, &size, &tag, &rmh, &extra).isOk());
  EXPECT_EQ(extra, nullptr) << "receive beyond NCCL_NET_MAX_REQUESTS was accepted";
  for (int i = 0; i < n; ++i) {
    void* req = nullptr;
    ASSERT_TRUE(net.isend(p.send, src[i].data(), size, 5, smh, &req).isOk());
    ASSERT_NE(req, nullptr) << "send " << i;
    reqs.push_back(req);
  }
  ASSERT_TRUE(net.isend(p.send, src[0].data(), size, 5, smh, &extra).isOk());
  EXPECT_EQ(extra, nullptr) << "send beyond NCCL_NET_MAX_REQUESTS was accepted";
  s = waitAll(net, reqs, nullptr);
  ASSERT_TRUE(s.isOk()) << s.message();
  for (int i = 0; i < n; ++i) EXPECT_EQ(firstMismatch(dst[i].data(), size, i), -1) << "message " << i;
  closePair(&p);
}

// One grouped receive of three buffers; the sends arrive in another order than the buffers and match by tag.
inline void runGrouped(NetModule& net, int dev) {
  Pair p;
  Status s = connectPair(net, dev, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  Result<NetProperties> props = net.getProperties(dev);
  ASSERT_TRUE(props.isOk());
  ASSERT_GE(props.value().maxRecvs, 3);
  const size_t sizes[3] = {100, 300000, 0};
  const int tags[3] = {7, 8, 9};
  std::vector<std::vector<char>> src(3), dst(3);
  void* bufs[3];
  void* mhs[3] = {};
  size_t caps[3];
  for (int i = 0; i < 3; ++i) {
    src[i].resize(sizes[i] + 1);
    fillPattern(&src[i], 40 + i);
    dst[i].assign(sizes[i] + 64, 0);
    bufs[i] = dst[i].data();
    caps[i] = dst[i].size();
  }
  void* rreq = postRecv(p, 3, bufs, caps, tags, mhs);
  std::vector<void*> reqs = {rreq};
  for (int i : {2, 0, 1}) reqs.push_back(postSend(p, src[i].data(), sizes[i], tags[i], nullptr));
  std::vector<std::vector<int>> got;
  s = waitAll(net, reqs, &got);
  ASSERT_TRUE(s.isOk()) << s.message();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[0][i], static_cast<int>(sizes[i])) << "buffer " << i;
    EXPECT_EQ(firstMismatch(dst[i].data(), sizes[i], 40 + i), -1) << "buffer " << i;
  }
  closePair(&p);
}

// Two single receives posted with tags 2 then 1; the sends come with tags 1 then 2 and each lands in its buffer.
inline void runTags(NetModule& net, int dev) {
  Pair p;
  Status s = connectPair(net, dev, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  std::vector<char> a(5000), b(7000), ra(8000, 0), rb(8000, 0);
  fillPattern(&a, 1);
  fillPattern(&b, 2);
  size_t cap = 8000;
  void* bufA = ra.data();
  void* bufB = rb.data();
  int tag2 = 2;
  int tag1 = 1;
  void* mh = nullptr;
  void* rB = postRecv(p, 1, &bufB, &cap, &tag2, &mh);
  void* rA = postRecv(p, 1, &bufA, &cap, &tag1, &mh);
  void* sA = postSend(p, a.data(), a.size(), 1, nullptr);
  void* sB = postSend(p, b.data(), b.size(), 2, nullptr);
  std::vector<std::vector<int>> got;
  s = waitAll(net, {rB, rA, sA, sB}, &got);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(got[0][0], 7000);
  EXPECT_EQ(got[1][0], 5000);
  EXPECT_EQ(firstMismatch(ra.data(), a.size(), 1), -1);
  EXPECT_EQ(firstMismatch(rb.data(), b.size(), 2), -1);
  closePair(&p);
}

// The sender closes its comm in the middle of a 64 MB message: the receiver's test() fails (an error, within a
// few seconds) instead of hanging. *intact (when given) tells whether the whole message arrived anyway, which a
// network whose receiver pulls the data from the sender's memory (libfabric shm) may legitimately do.
inline Status runPeerCloseMidTransfer(NetModule& net, int dev, bool* intact = nullptr) {
  Pair p;
  BRAID_RETURN_IF_ERROR(connectPair(net, dev, &p));
  const size_t size = size_t{64} << 20;
  std::vector<char> src(size, 1), dst(size, 0);
  void* sreq = postSend(p, src.data(), size, 3, nullptr);
  bool done = false;
  for (int i = 0; i < 3; ++i) (void)net.test(sreq, &done, nullptr);
  EXPECT_FALSE(done) << "64 MB went out before the receiver posted anything";
  EXPECT_TRUE(net.closeSend(p.send).isOk());
  p.send = nullptr;
  void* buf = dst.data();
  int tag = 3;
  void* rreq = postRecv(p, 1, &buf, &size, &tag, nullptr);
  Status s = waitAll(net, {rreq}, nullptr, 20);
  if (intact != nullptr) {
    *intact = true;
    for (size_t i = 0; i < size && *intact; i += 4096) *intact = dst[i] == 1 && dst[size - 1] == 1;
  }
  closePair(&p);
  return s;
}

// A send that completed is delivered even when the sender closes before the receiver posts its receive.
inline void runCloseAfterCompletedSend(NetModule& net, int dev) {
  Pair p;
  Status s = connectPair(net, dev, &p);
  ASSERT_TRUE(s.isOk()) << s.message();
  std::vector<char> src(100000), dst(100000, 0);
  fillPattern(&src, 5);
  void* sreq = postSend(p, src.data(), src.size(), 0, nullptr);
  // Drive the send until it completes. A network may need the receiver to post and progress first (libfabric
  // rendezvous): after 100 ms without completion the receive is posted and tested too.
  bool done = false;
  bool rdone = false;
  int rsize = -1;
  auto t0 = std::chrono::steady_clock::now();
  void* rreq = nullptr;
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  while (!done && secondsSince(t0) < 10) {
    ASSERT_TRUE(net.test(sreq, &done, nullptr).isOk());
    if (!done && rreq == nullptr && secondsSince(t0) > 0.1) rreq = postRecv(p, 1, &buf, &cap, &tag, nullptr);
    if (rreq != nullptr && !rdone) {
      ASSERT_TRUE(net.test(rreq, &rdone, &rsize).isOk());
    }
  }
  ASSERT_TRUE(done);
  ASSERT_TRUE(net.closeSend(p.send).isOk());
  p.send = nullptr;
  if (rreq == nullptr) rreq = postRecv(p, 1, &buf, &cap, &tag, nullptr);
  if (!rdone) {
    std::vector<std::vector<int>> got;
    s = waitAll(net, {rreq}, &got, 10);
    ASSERT_TRUE(s.isOk()) << s.message();
    rsize = got[0][0];
  }
  EXPECT_EQ(rsize, 100000);
  EXPECT_EQ(firstMismatch(dst.data(), dst.size(), 5), -1);
  closePair(&p);
}

// The two ends in two processes: a fresh copy of this test binary (exec'd, so it initialises the network from
// scratch, as a real peer does) runs NetChild.SendToParent, which reads the listen handle from a pipe, connects,
// and sends 1 MiB + 7 bytes (tag 1) and 0 bytes (tag 2); the parent receives both in one grouped receive and
// checks them. Shows the handle carries everything a peer needs.
constexpr size_t kTwoProcessBytes = (size_t{1} << 20) + 7;

inline void runTwoProcesses(NetModule& net, int dev) {
  int toChild[2];
  int fromChild[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(fromChild), 0);
  NetHandle handle;
  void* listen = nullptr;
  Status s = net.listen(dev, &handle, &listen);
  ASSERT_TRUE(s.isOk()) << s.message();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string spec = net.name() + ":" + std::to_string(dev) + ":" + std::to_string(toChild[0]);
    setenv("BRAID_NET_CHILD", spec.c_str(), 1);
    dup2(fromChild[1], 1);  // the child's gtest output goes to the parent, which prints it on failure
    execl("/proc/self/exe", "braid_net_tests", "--gtest_filter=NetChild.SendToParent", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(toChild[0]);
  ::close(fromChild[1]);
  ASSERT_EQ(::write(toChild[1], handle.data(), handle.size()), static_cast<ssize_t>(handle.size()));
  void* recv = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  while (recv == nullptr && secondsSince(t0) < 20) ASSERT_TRUE(net.accept(listen, &recv).isOk());
  std::vector<std::vector<int>> got;
  std::vector<char> dst(kTwoProcessBytes + 100, 0), empty(16, 0);
  if (recv != nullptr) {
    void* bufs[2] = {dst.data(), empty.data()};
    size_t caps[2] = {dst.size(), empty.size()};
    int tags[2] = {1, 2};
    Pair p{&net, listen, nullptr, recv};
    void* req = postRecv(p, 2, bufs, caps, tags, nullptr);
    s = waitAll(net, {req}, &got, 20);
  }
  char ack = 1;
  EXPECT_EQ(::write(toChild[1], &ack, 1), 1);
  ::close(toChild[1]);
  std::string childOut;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fromChild[0], buf, sizeof(buf))) > 0) childOut.append(buf, static_cast<size_t>(n));
  ::close(fromChild[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status << ":\n" << childOut;
  EXPECT_NE(childOut.find("[       OK ] NetChild.SendToParent"), std::string::npos) << childOut;
  ASSERT_NE(recv, nullptr) << childOut;
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(got[0][0], static_cast<int>(kTwoProcessBytes));
  EXPECT_EQ(got[0][1], 0);
  EXPECT_EQ(firstMismatch(dst.data(), kTwoProcessBytes, 77), -1);
  EXPECT_TRUE(net.closeRecv(recv).isOk());
  EXPECT_TRUE(net.closeListen(listen).isOk());
}

// The child's side (NetChild.SendToParent, in socket_net_test.cc).
inline void twoProcessChild(NetModule& net, int dev, int fd) {
  NetHandle h;
  size_t got = 0;
  while (got < h.size()) {
    ssize_t n = ::read(fd, h.data() + got, h.size() - got);
    ASSERT_GT(n, 0) << "handle pipe closed";
    got += static_cast<size_t>(n);
  }
  void* send = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  while (send == nullptr && secondsSince(t0) < 20) ASSERT_TRUE(net.connect(dev, &h, &send).isOk());
  ASSERT_NE(send, nullptr);
  std::vector<char> src(kTwoProcessBytes);
  fillPattern(&src, 77);
  Pair p{&net, nullptr, send, nullptr};
  void* r1 = postSend(p, src.data(), src.size(), 1, nullptr);
  void* r2 = postSend(p, src.data(), 0, 2, nullptr);
  Status s = waitAll(net, {r1, r2}, nullptr, 20);
  ASSERT_TRUE(s.isOk()) << s.message();
  char ack = 0;
  ASSERT_EQ(::read(fd, &ack, 1), 1) << "no acknowledgement from the parent";
  EXPECT_TRUE(net.closeSend(send).isOk());
}

}  // namespace testing
}  // namespace net
}  // namespace braid
