// Communicator semantics through the C API: creation paths, split, groups, abort, queries, bad input, and the
// functions that are declared but not supported yet.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/common/free_port.h"
#include "tests/common/coll_check.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit: the only way to reopen the log

namespace braid_test {
namespace {

std::string lastError() {
  return ncclGetLastError(nullptr);
}

TEST(Api, VersionMatchesHeader) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(NCCL_VERSION_CODE, NCCL_VERSION(2, 32, 3));
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
}

// A thread's failed call is its last error until its next call succeeds; after that ncclGetLastError gives the
// process's latest WARN, here another thread's (regression: the success path that skips the string work must still
// forget the thread's error).
TEST(Api, ASuccessfulCallForgetsTheThreadsError) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("ncclGetVersion"), std::string::npos) << lastError();
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  std::thread other([] { EXPECT_EQ(ncclCommCount(nullptr, nullptr), ncclInvalidArgument); });
  other.join();
  EXPECT_NE(lastError().find("ncclCommCount"), std::string::npos) << lastError();
  ASSERT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);  // and a new failure is this thread's again
  EXPECT_NE(lastError().find("ncclGetVersion"), std::string::npos) << lastError();
}

TEST(Api, ErrorStrings) {
  for (int r = 0; r < ncclNumResults; ++r) {
    EXPECT_NE(std::string(ncclGetErrorString(static_cast<ncclResult_t>(r))), "unknown result code") << r;
  }
  EXPECT_EQ(std::string(ncclGetErrorString(ncclSuccess)), "no error");
}

TEST(Api, InitAllAndQueries) {
  const int n = 3;
  ncclComm_t comms[n];
  const int devs[n] = {5, 6, 7};
  ASSERT_EQ(ncclCommInitAll(comms, n, devs), ncclSuccess);
  for (int i = 0; i < n; ++i) {
    int count = 0, rank = -1, dev = -2;
    EXPECT_EQ(ncclCommCount(comms[i], &count), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(comms[i], &rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(comms[i], &dev), ncclSuccess);
    EXPECT_EQ(count, n);
    EXPECT_EQ(rank, i);
    EXPECT_EQ(dev, devs[i]);
  }
  // One thread drives all three ranks in one group.
  std::vector<std::vector<float>> bufs(n, std::vector<float>(1000));
  for (int i = 0; i < n; ++i) {
    for (size_t j = 0; j < 1000; ++j) bufs[i][j] = static_cast<float>(i + j % 3);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // nested
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(ncclAllReduce(bufs[i].data(), bufs[i].data(), 1000, ncclFloat, ncclSum, comms[i], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; ++i) {
    for (size_t j = 0; j < 1000; ++j) ASSERT_EQ(bufs[i][j], static_cast<float>(0 + 1 + 2 + 3 * (j % 3)));
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
}

TEST(Api, GroupedSendRecvAllPairsNeverDeadlocks) {
  // Every rank sends 3 MB (more than a FIFO) to every rank, all in one group, from one thread per rank.
  const int n = 4;
  const size_t count = 3 << 18;
  auto res = runThreads(n, [&](int rank, ncclComm_t comm) {
    std::vector<std::vector<int32_t>> send(n, std::vector<int32_t>(count)), recv(n, std::vector<int32_t>(count));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < count; ++i) send[p][i] = static_cast<int32_t>(rank * 1000000 + p * 1000 + i % 1000);
    }
    ncclGroupStart();
    for (int p = n - 1; p >= 0; --p) ncclSend(send[p].data(), count, ncclInt32, p, comm, nullptr);
    for (int p = 0; p < n; ++p) ncclRecv(recv[p].data(), count, ncclInt32, p, comm, nullptr);
    ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess) return r;
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < count; ++i) {
        if (recv[p][i] != static_cast<int32_t>(p * 1000000 + rank * 1000 + i % 1000)) return ncclInternalError;
      }
    }
    return ncclSuccess;
  });
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
}

TEST(Api, NonBlockingInit) {
  const int n = 2;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(n);
  std::vector<std::thread> threads;
  std::atomic<int> inProgressSeen{0};
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclResult_t res = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
      if (res == ncclInProgress) ++inProgressSeen;
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) {
        ASSERT_EQ(ncclCommGetAsyncError(comms[r], &state), ncclSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_EQ(state, ncclSuccess);
      std::vector<double> x(10, r + 1.0);
      EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 10, ncclDouble, ncclMax, comms[r], nullptr), ncclSuccess);
      EXPECT_EQ(x[9], 2.0);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(inProgressSeen.load(), n);
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Api, SplitWithNoColor) {
  const int n = 5;
  auto res = runThreads(n, [&](int rank, ncclComm_t comm) {
    // Even ranks form one comm ordered by descending rank; rank 3 opts out; 1 is alone.
    int color = rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t sub = nullptr;
    ncclResult_t r = ncclCommSplit(comm, color, -rank, &sub, nullptr);
    if (r != ncclSuccess) return r;
    if (rank == 3) return sub == nullptr ? ncclSuccess : ncclInternalError;
    int count = 0, subRank = 0;
    ncclCommCount(sub, &count);
    ncclCommUserRank(sub, &subRank);
    int wantCount = rank % 2 == 0 ? 3 : 1;
    int wantRank = rank % 2 == 0 ? (4 - rank) / 2 : 0;
    if (count != wantCount || subRank != wantRank) return ncclInternalError;
    int v = rank, out = -1;
    r = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, sub, nullptr);
    if (r != ncclSuccess) return r;
    if (out != (rank % 2 == 0 ? 0 + 2 + 4 : 1)) return ncclInternalError;
    return ncclCommDestroy(sub);
  });
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
}

TEST(Api, CommIdFromEnvironment) {
  // NCCL_COMM_ID: no unique id travels between ranks; rank 0 starts the root at that address. The port comes from
  // below the ephemeral range: one bound to 0 and released could be taken by any connect() before the root binds it.
  const int port = braid::pickRendezvousPort("127.0.0.1");
  ASSERT_GT(port, 0);
  std::string commId = "127.0.0.1:" + std::to_string(port);
  setenv("NCCL_COMM_ID", commId.c_str(), 1);
  const int n = 3;
  std::vector<ncclResult_t> res(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclUniqueId id;
      ncclComm_t comm = nullptr;
      res[r] = ncclGetUniqueId(&id);
      if (res[r] == ncclSuccess) res[r] = ncclCommInitRank(&comm, n, id, r);
      int v = 1, out = 0;
      if (res[r] == ncclSuccess) res[r] = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, nullptr);
      if (res[r] == ncclSuccess && out != n) res[r] = ncclInternalError;
      if (comm) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  unsetenv("NCCL_COMM_ID");
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
}

// The root's IPv4 address inside an ncclUniqueId: family, port and IP after a 16-byte header (see bootstrap.cc).
sockaddr_in rootAddressOf(const ncclUniqueId& id) {
  uint16_t family = 0, port = 0;
  memcpy(&family, id.internal + 16, 2);
  memcpy(&port, id.internal + 18, 2);
  sockaddr_in root{};
  root.sin_family = family;
  root.sin_port = htons(port);
  memcpy(&root.sin_addr, id.internal + 20, 4);
  return root;
}

// Ranks 0..n-1 of `id` as threads: init, then destroy; each rank's init result.
std::vector<ncclResult_t> initAndDestroy(const ncclUniqueId& id, int n) {
  std::vector<ncclResult_t> res(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      res[static_cast<size_t>(r)] = ncclCommInitRank(&comm, n, id, r);
      if (comm) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

TEST(Api, BootstrapRefusesWrongMagic) {
  // A stranger connects to the root port and sends garbage; the ranks still rendezvous.
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  sockaddr_in root = rootAddressOf(id);
  ASSERT_EQ(root.sin_family, AF_INET);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&root), sizeof(root)), 0);
  char junk[256];  // longer than a hello: read whole, and refused because it proves no key
  memset(junk, 0x5a, sizeof(junk));
  ASSERT_EQ(write(fd, junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  const std::vector<ncclResult_t> res = initAndDestroy(id, 2);
  close(fd);
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
  EXPECT_NE(lastError().find("refused connection"), std::string::npos) << lastError();
}

// Regression: the root served one connection at a time with a 5 s wait each, so 13 silent connections made every
// rank fail at the 60 s timeout. Handshakes now run concurrently, each with its own deadline.
TEST(Api, SilentStrangersDoNotStallTheRendezvous) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  sockaddr_in root = rootAddressOf(id);
  ASSERT_EQ(root.sin_family, AF_INET);
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&root), sizeof(root)), 0);
    silent.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<ncclResult_t> res = initAndDestroy(id, 2);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int fd : silent) close(fd);
  for (auto r : res) EXPECT_EQ(r, ncclSuccess) << lastError();
  EXPECT_LT(secs, 4.0) << "20 silent connections delayed the rendezvous";
}

// The root's refusals travel with its MAC and reach the rank as a named error: a second process claiming a rank that
// has joined is refused alone (not fatal for the others); ranks that disagree on nranks all fail.
TEST(Api, BootstrapRootRefusalsAreNamed) {
  {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    std::vector<ncclResult_t> res(3);
    std::vector<std::string> text(3);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        ncclComm_t comm = nullptr;
        // Rank 0 first, then the duplicate while the root still waits, then rank 1, which completes the rendezvous.
        std::this_thread::sleep_for(std::chrono::milliseconds(t == 2 ? 100 : t == 1 ? 400 : 0));
        res[static_cast<size_t>(t)] = ncclCommInitRank(&comm, 2, id, t == 2 ? 0 : t);
        text[static_cast<size_t>(t)] = ncclGetLastError(nullptr);
        if (comm) ncclCommDestroy(comm);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(res[0], ncclSuccess);
    EXPECT_EQ(res[1], ncclSuccess);
    EXPECT_EQ(res[2], ncclInvalidUsage);
    EXPECT_NE(text[2].find("rank 0 has already joined"), std::string::npos) << text[2];
  }
  // Ranks that disagree on nranks, the smaller count first and the larger first. Either way every rank is told at
  // once. Regression: with the larger count first, the root waited for a rank that could never come until
  // BRAID_TIMEOUT (60 s).
  for (bool largerFirst : {false, true}) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    std::vector<ncclResult_t> res(2);
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        ncclComm_t comm = nullptr;
        if (r == (largerFirst ? 0 : 1)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        res[static_cast<size_t>(r)] = ncclCommInitRank(&comm, r == 0 ? 2 : 3, id, r);
        if (comm) ncclCommDestroy(comm);
      });
    }
    for (auto& th : threads) th.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(res[0], ncclInvalidUsage) << "larger first: " << largerFirst;
    EXPECT_EQ(res[1], ncclInvalidUsage) << "larger first: " << largerFirst;
    EXPECT_NE(lastError().find("but another rank used nranks="), std::string::npos) << lastError();
    EXPECT_LT(secs, 10.0) << "larger first: " << largerFirst;
  }
}

// A rank with another BRAID_BOOTSTRAP_SECRET cannot join, and is told why at once (the root refuses its hello,
// whose MAC is under a different key). It runs in a child process, where the environment can differ.
TEST(Api, ARankWithAnotherSecretIsRefusedAndToldWhy) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  fflush(stdout);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("BRAID_BOOTSTRAP_SECRET", "not-the-job-secret", 1);
    setenv("BRAID_TIMEOUT", "10", 1);
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRank(&comm, 2, id, 1);
    const std::string text = ncclGetLastError(nullptr);
    fprintf(stderr, "child: %s\n", text.c_str());
    _exit(r == ncclInvalidUsage && text.find("BRAID_BOOTSTRAP_SECRET") != std::string::npos ? 42 : 43);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
}

TEST(Api, AbortFromAnotherThreadUnblocksACollective) {
  // Rank 1 never joins the all-reduce; rank 0 is stuck until another thread aborts its communicator.
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {nullptr, nullptr};
  std::thread t1([&] { ASSERT_EQ(ncclCommInitRank(&comms[1], 2, id, 1), ncclSuccess); });
  ASSERT_EQ(ncclCommInitRank(&comms[0], 2, id, 0), ncclSuccess);
  t1.join();
  // Connect first (one successful all-reduce), so the abort below interrupts data movement, not connection setup.
  {
    std::vector<float> w(1 << 20, 1.0f), v(1 << 20, 1.0f);
    std::thread other([&] {
      EXPECT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, comms[1], nullptr), ncclSuccess);
    });
    EXPECT_EQ(ncclAllReduce(w.data(), w.data(), w.size(), ncclFloat, ncclSum, comms[0], nullptr), ncclSuccess);
    other.join();
  }
  std::atomic<bool> returned{false};
  ncclResult_t stuck = ncclSuccess;
  std::thread worker([&] {
    std::vector<float> x(1 << 20, 1.0f);
    stuck = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, comms[0], nullptr);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  worker.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(stuck, ncclSuccess);
  EXPECT_LT(secs, 5.0);
  // The peer now sees rank 0's abort instead of hanging.
  std::vector<float> y(1 << 20, 1.0f);
  ncclResult_t peer = ncclAllReduce(y.data(), y.data(), y.size(), ncclFloat, ncclSum, comms[1], nullptr);
  EXPECT_EQ(peer, ncclRemoteError);
  EXPECT_NE(lastError().find("rank 0"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  // The aborted handle is dead.
  int count = 0;
  EXPECT_EQ(ncclCommCount(comms[0], &count), ncclInvalidArgument);
}

TEST(Api, FinalizeThenDestroy) {
  auto res = runThreads(2, [](int rank, ncclComm_t comm) {
    ncclResult_t r = ncclCommFinalize(comm);
    if (r != ncclSuccess) return r;
    int x = 0;
    // After finalize, new operations are refused.
    if (ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr) != ncclInvalidUsage) return ncclInternalError;
    return ncclSuccess;
  });
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
}

// ---- bad input -------------------------------------------------------------------------------------------------

struct BadInputCase {
  const char* what;
  std::function<ncclResult_t(ncclComm_t comm, float* buf)> call;
  ncclResult_t expected;
  const char* mentions;
};

TEST(Api, KnobsThatDoNotParseFailInitByName) {
  // Every integer knob parses strictly: a unit suffix or junk is an error naming the knob and the text, never the
  // default in disguise.
  for (const char* knob : {"BRAID_TIMEOUT", "NCCL_BUFFSIZE", "BRAID_SPIN_COUNT"}) {
    for (const char* text : {"1m", "4M", "12abc"}) {
      setenv(knob, text, 1);
      ncclComm_t c[1] = {nullptr};
      const ncclResult_t r = ncclCommInitAll(c, 1, nullptr);
      unsetenv(knob);
      EXPECT_EQ(r, ncclInvalidArgument) << knob << "=" << text;
      const std::string err = ncclGetLastError(nullptr);
      EXPECT_NE(err.find(knob), std::string::npos) << err;
      EXPECT_NE(err.find(std::string("\"") + text + "\""), std::string::npos) << err;
      if (r == ncclSuccess) ncclCommDestroy(c[0]);
    }
  }
  ncclComm_t c[1];
  ASSERT_EQ(ncclCommInitAll(c, 1, nullptr), ncclSuccess);  // and a clean environment works again
  EXPECT_EQ(ncclCommDestroy(c[0]), ncclSuccess);
}

TEST(Api, BadInputGetsANamedError) {
  float dummy = 0;
  ncclComm_t dead = nullptr;
  {
    ncclComm_t c[1];
    ASSERT_EQ(ncclCommInitAll(c, 1, nullptr), ncclSuccess);
    dead = c[0];
    ASSERT_EQ(ncclCommDestroy(dead), ncclSuccess);
  }
  const std::vector<BadInputCase> cases = {
      {"null comm", [](ncclComm_t, float* b) { return ncclAllReduce(b, b, 4, ncclFloat, ncclSum, nullptr, nullptr); },
       ncclInvalidArgument, "comm is NULL"},
      {"null sendbuff",
       [](ncclComm_t c, float* b) { return ncclAllReduce(nullptr, b, 4, ncclFloat, ncclSum, c, nullptr); },
       ncclInvalidArgument, "sendbuff is NULL"},
      {"null recvbuff", [](ncclComm_t c, float* b) { return ncclAllGather(b, nullptr, 1, ncclFloat, c, nullptr); },
       ncclInvalidArgument, "recvbuff is NULL"},
      {"negative count",
       [](ncclComm_t c, float* b) {
         return ncclAllReduce(b, b, static_cast<size_t>(-5), ncclFloat, ncclSum, c, nullptr);
       },
       ncclInvalidArgument, "count=18446744073709551611 (-5 as a signed value)"},
      {"overflowing count",
       [](ncclComm_t c, float* b) { return ncclAllGather(b, b, SIZE_MAX / 4, ncclFloat, c, nullptr); },
       ncclInvalidArgument, "too large"},
      {"bad datatype",
       [](ncclComm_t c, float* b) {
         return ncclAllReduce(b, b, 1, static_cast<ncclDataType_t>(12), ncclSum, c, nullptr);
       },
       ncclInvalidArgument, "datatype=12"},
      {"bad op",
       [](ncclComm_t c, float* b) {
         return ncclAllReduce(b, b, 1, ncclFloat, static_cast<ncclRedOp_t>(9), c, nullptr);
       },
       ncclInvalidArgument, "op=9"},
      {"bad root", [](ncclComm_t c, float* b) { return ncclBroadcast(b, b, 1, ncclFloat, 2, c, nullptr); },
       ncclInvalidArgument, "root=2"},
      {"negative root", [](ncclComm_t c, float* b) { return ncclReduce(b, b, 1, ncclFloat, ncclSum, -1, c, nullptr); },
       ncclInvalidArgument, "root=-1"},
      {"bad peer", [](ncclComm_t c, float* b) { return ncclSend(b, 1, ncclFloat, 7, c, nullptr); }, ncclInvalidArgument,
       "peer=7"},
      {"wrong in-place offset (all-gather)",
       [](ncclComm_t c, float* b) { return ncclAllGather(b + 1, b, 2, ncclFloat, c, nullptr); }, ncclInvalidArgument,
       "sendbuff == recvbuff + rank * sendcount"},
      {"wrong in-place offset (reduce-scatter)",
       [](ncclComm_t c, float* b) { return ncclReduceScatter(b, b + 1, 2, ncclFloat, ncclSum, c, nullptr); },
       ncclInvalidArgument, "recvbuff == sendbuff + rank * recvcount"},
      {"partial overlap (all-reduce)",
       [](ncclComm_t c, float* b) { return ncclAllReduce(b, b + 1, 4, ncclFloat, ncclSum, c, nullptr); },
       ncclInvalidArgument, "overlaps"},
      {"non-null stream",
       [](ncclComm_t c, float* b) {
         return ncclAllReduce(b, b, 1, ncclFloat, ncclSum, c, reinterpret_cast<cudaStream_t>(0x1234));
       },
       ncclInvalidUsage, "stream=0x1234"},
      {"use after destroy",
       [dead](ncclComm_t, float* b) { return ncclAllReduce(b, b, 1, ncclFloat, ncclSum, dead, nullptr); },
       ncclInvalidArgument, "was destroyed"},
      {"bad config magic",
       [](ncclComm_t, float*) {
         ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
         cfg.magic = 0;
         ncclUniqueId id;
         ncclGetUniqueId(&id);
         ncclComm_t out;
         return ncclCommInitRankConfig(&out, 1, id, 0, &cfg);
       },
       ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER"},
      {"bad rank",
       [](ncclComm_t, float*) {
         ncclUniqueId id;
         ncclGetUniqueId(&id);
         ncclComm_t out;
         return ncclCommInitRank(&out, 2, id, 2);
       },
       ncclInvalidArgument, "rank=2"},
      {"destroy unknown op", [](ncclComm_t c, float*) { return ncclRedOpDestroy(static_cast<ncclRedOp_t>(42), c); },
       ncclInvalidArgument, "op=42"},
      // Regressions: a negative op ran as a sum (-1 was the "no reduction" sentinel).
      {"negative op",
       [](ncclComm_t c, float* b) {
         return ncclAllReduce(b, b, 1, ncclFloat, static_cast<ncclRedOp_t>(-1), c, nullptr);
       },
       ncclInvalidArgument, "op=-1"},
      {"INT_MIN op",
       [](ncclComm_t c, float* b) {
         return ncclReduceScatter(b, b, 1, ncclFloat, static_cast<ncclRedOp_t>(INT_MIN), c, nullptr);
       },
       ncclInvalidArgument, "op=-2147483648"},
      // A junk handle was dereferenced (SIGSEGV/SIGABRT); handles are now checked against the registry first.
      {"junk comm",
       [](ncclComm_t, float* b) {
         return ncclAllReduce(b, b, 1, ncclFloat, ncclSum, reinterpret_cast<ncclComm_t>(b), nullptr);
       },
       ncclInvalidArgument, "is not a communicator"},
      {"destroy junk comm", [](ncclComm_t, float* b) { return ncclCommDestroy(reinterpret_cast<ncclComm_t>(b)); },
       ncclInvalidArgument, "is not a communicator"},
      {"abort junk comm", [](ncclComm_t, float* b) { return ncclCommAbort(reinterpret_cast<ncclComm_t>(b + 1)); },
       ncclInvalidArgument, "is not a communicator"},
      // ncclMemFree of memory braid never allocated crashed or claimed success.
      {"ncclMemFree of a stack buffer", [](ncclComm_t, float* b) { return ncclMemFree(b); }, ncclInvalidArgument,
       "was not returned by ncclMemAlloc"},
      {"ncclMemFree of malloc memory",
       [](ncclComm_t, float*) {
         void* m = malloc(64);
         ncclResult_t r = ncclMemFree(m);
         free(m);
         return r;
       },
       ncclInvalidArgument, "was not returned by ncclMemAlloc"},
      {"ncclMemFree twice",
       [](ncclComm_t, float*) {
         void* m = nullptr;
         if (ncclMemAlloc(&m, 100) != ncclSuccess || ncclMemFree(m) != ncclSuccess) return ncclInternalError;
         return ncclMemFree(m);
       },
       ncclInvalidArgument, "or was already freed"},
      {"ncclMemFree inside a buffer",
       [](ncclComm_t, float*) {
         void* m = nullptr;
         if (ncclMemAlloc(&m, 8192) != ncclSuccess) return ncclInternalError;
         ncclResult_t r = ncclMemFree(static_cast<char*>(m) + 100);
         ncclMemFree(m);
         return r;
       },
       ncclInvalidArgument, "not its start"},
      // ncclMemAlloc(SIZE_MAX) returned a 0-byte buffer (the page rounding wrapped around).
      {"ncclMemAlloc(SIZE_MAX)",
       [](ncclComm_t, float*) {
         void* m = nullptr;
         return ncclMemAlloc(&m, SIZE_MAX);
       },
       ncclInvalidArgument, "size=18446744073709551615"},
  };
  auto res = runThreads(2, [&](int rank, ncclComm_t comm) {
    if (rank != 0) return ncclSuccess;  // single-rank checks; rank 1 only keeps the clique alive
    float buf[64] = {};
    for (const auto& c : cases) {
      ncclResult_t r = c.call(comm, buf);
      std::string text = lastError();
      EXPECT_EQ(r, c.expected) << c.what << ": " << text;
      EXPECT_NE(text.find(c.mentions), std::string::npos) << c.what << ": last error \"" << text << "\"";
    }
    return ncclSuccess;
  });
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
  (void)dummy;
}

// ncclCommRegister / ncclCommDeregister on a host communicator: a handle per registration, collectives on the
// buffer as before, and each bad argument named.
TEST(Api, RegisterAndDeregister) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<float> buf(1000, 1.0f);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(c[0], buf.data(), buf.size() * 4, &handle), ncclSuccess) << lastError();
  EXPECT_NE(handle, nullptr);
  void* again = nullptr;  // the same buffer twice: two registrations, as in NCCL
  ASSERT_EQ(ncclCommRegister(c[0], buf.data(), 400, &again), ncclSuccess);
  EXPECT_NE(again, handle);
  EXPECT_EQ(ncclCommDeregister(c[1], handle), ncclInvalidArgument);  // another communicator's handle
  EXPECT_NE(lastError().find("is not a registration of this communicator"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommDeregister(c[0], handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(c[0], handle), ncclInvalidArgument);  // twice
  EXPECT_EQ(ncclCommDeregister(c[0], again), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(c[0], nullptr), ncclSuccess);  // what a registration that did nothing returns
  EXPECT_EQ(ncclCommRegister(c[0], nullptr, 4, &handle), ncclInvalidArgument);
  EXPECT_NE(lastError().find("buff"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommRegister(c[0], buf.data(), 4, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("handle"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommRegister(c[0], buf.data(), 0, &handle), ncclInvalidArgument);
  EXPECT_NE(lastError().find("size=0"), std::string::npos) << lastError();
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Regression: with ranks as threads, another thread's failure logged after this thread's failed call replaced its
// error (ncclGetLastError was the process's last WARN only). A thread whose latest call succeeded still sees the
// process's latest WARN (an internal thread's, say).
TEST(Api, LastErrorIsTheCallingThreadsOwn) {
  std::string mine;
  std::atomic<int> phase{0};
  std::thread a([&] {
    EXPECT_EQ(ncclCommRegister(nullptr, nullptr, 4, nullptr), ncclInvalidArgument);
    phase.store(1);
    while (phase.load() != 2) std::this_thread::yield();
    mine = ncclGetLastError(nullptr);
  });
  std::thread b([&] {
    while (phase.load() != 1) std::this_thread::yield();
    int v = 0;
    EXPECT_EQ(ncclRedOpCreatePreMulSum(nullptr, &v, ncclInt32, ncclScalarHostImmediate, nullptr), ncclInvalidArgument);
    phase.store(2);
  });
  a.join();
  b.join();
  EXPECT_NE(mine.find("ncclCommRegister"), std::string::npos) << mine;
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);  // this thread's latest call succeeded: the process's WARN
  EXPECT_NE(lastError().find("ncclRedOpCreatePreMulSum"), std::string::npos) << lastError();
}

// Several root ids (NCCL spreads the bootstrap over them): every rank meets at the first id's root, and the root
// this process started for the other id stops instead of waiting for ranks that never come.
TEST(Api, InitRankScalableWithSeveralIds) {
  LogCapture log("INIT,BOOTSTRAP");
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  const int n = 4;
  std::vector<ncclResult_t> res(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      res[r] = ncclCommInitRankScalable(&comm, n, r, 2, ids, nullptr);
      int v = r + 1, out = 0;
      if (res[r] == ncclSuccess) res[r] = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, nullptr);
      if (res[r] == ncclSuccess && out != 10) res[r] = ncclInternalError;
      if (comm != nullptr) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (auto r : res) EXPECT_EQ(r, ncclSuccess);
  EXPECT_GE(occurrences(log.textOf(getpid()), "stopped the root of commIds[1]"), 1u) << log.textOf(getpid());
  // The second root is really gone: its address refuses connections (it notices its stop within 100 ms).
  sockaddr_in second = rootAddressOf(ids[1]);
  bool refused = false;
  for (int attempt = 0; attempt < 50 && !refused; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    refused = connect(fd, reinterpret_cast<sockaddr*>(&second), sizeof(second)) != 0;
    close(fd);
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(refused) << "the root of commIds[1] still accepts connections";
  // nId must name at least one id and at most one per rank.
  ncclComm_t out = nullptr;
  EXPECT_EQ(ncclCommInitRankScalable(&out, 1, 0, 0, ids, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("nId=0 must be at least 1"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommInitRankScalable(&out, 1, 0, 2, ids, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("nId=2 exceeds nranks=1"), std::string::npos) << lastError();
}

TEST(Api, MemAllocIsHostMemory) {
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1 << 20), ncclSuccess);
  memset(p, 1, 1 << 20);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

}  // namespace
}  // namespace braid_test

namespace braid_test {
namespace {

TEST(Api, DebugFileGetsNcclFormatLines) {
  char path[] = "/tmp/braid-log-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string pattern = std::string(path) + ".%p";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,ALLOC", 1);
  setenv("NCCL_DEBUG_FILE", pattern.c_str(), 1);
  ncclResetDebugInit();
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  for (auto comm : c) ncclCommDestroy(comm);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  ncclResetDebugInit();
  std::string file = std::string(path) + "." + std::to_string(getpid());
  FILE* f = fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr) << file;
  std::string text;
  char line[4096];
  while (fgets(line, sizeof(line), f)) text += line;
  fclose(f);
  unlink(file.c_str());
  unlink(path);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string prefix = std::string(host) + ":" + std::to_string(getpid()) + ":";
  EXPECT_NE(text.find(prefix), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL INFO comm "), std::string::npos) << text;
  EXPECT_NE(text.find("Init COMPLETE"), std::string::npos) << text;
  EXPECT_NE(text.find("FIFO memory bound"), std::string::npos) << text;
}

}  // namespace
}  // namespace braid_test

namespace braid_test {
namespace {

// Communicator init reads NCCL_TOPO_FILE and writes NCCL_TOPO_DUMP_FILE (rank NCCL_TOPO_DUMP_FILE_RANK only); a
// missing or malformed file fails init with its name (and line), and collectives still work on a loaded topology.
TEST(Api, TopologyFilesAtInit) {
  const std::string fixture = std::string(BRAID_FIXTURES_DIR) + "/topo/cpu_2socket.xml";
  char dump[] = "/tmp/braid-topodump-XXXXXX";
  int fd = mkstemp(dump);
  ASSERT_GE(fd, 0);
  close(fd);
  unlink(dump);
  setenv("NCCL_TOPO_FILE", fixture.c_str(), 1);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  setenv("NCCL_TOPO_DUMP_FILE_RANK", "1", 1);
  {
    ncclComm_t c[2];
    ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    float v[2][3] = {{1, 2, 3}, {10, 20, 30}};
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclAllReduce(v[r], v[r], 3, ncclFloat, ncclSum, c[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(v[r][2], 33.0f);
    for (ncclComm_t comm : c) ncclCommDestroy(comm);
  }
  const std::string written = readFileText(dump);
  unlink(dump);
  EXPECT_NE(written.find("<system version=\"1\">"), std::string::npos) << written;
  EXPECT_NE(written.find("numaid=\"1\""), std::string::npos) << "the fixture's second socket: " << written;
  unsetenv("NCCL_TOPO_DUMP_FILE");
  unsetenv("NCCL_TOPO_DUMP_FILE_RANK");

  setenv("NCCL_TOPO_FILE", "/nonexistent/topo.xml", 1);
  ncclComm_t c[2];
  EXPECT_NE(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("/nonexistent/topo.xml"), std::string::npos)
      << ncclGetLastError(nullptr);

  char bad[] = "/tmp/braid-badtopo-XXXXXX";
  fd = mkstemp(bad);
  ASSERT_GE(fd, 0);
  const char text[] = "<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n";
  ASSERT_EQ(write(fd, text, sizeof(text) - 1), static_cast<ssize_t>(sizeof(text) - 1));
  close(fd);
  setenv("NCCL_TOPO_FILE", bad, 1);
  EXPECT_NE(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  const std::string err = ncclGetLastError(nullptr);
  EXPECT_NE(err.find(std::string(bad) + ":3: <cpu>"), std::string::npos) << "file, line and element: " << err;
  unlink(bad);
  unsetenv("NCCL_TOPO_FILE");
}

// NCCL_ALGO / NCCL_PROTO: an unknown name fails init; a setting that leaves nothing braid implements fails the
// collective with a message naming it; forcing Ring or NVLS gives exact results either way.
TEST(Api, AlgoAndProtoSettings) {
  float b[4] = {1, 2, 3, 4};
  {
    setenv("NCCL_ALGO", "ring,bogus", 1);
    ncclComm_t c[1];
    EXPECT_EQ(ncclCommInitAll(c, 1, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("unknown name 'bogus'"), std::string::npos)
        << ncclGetLastError(nullptr);
  }
  struct Refused {
    const char* env;
    const char* value;
    const char* mentions;
  };
  const Refused refused[] = {{"NCCL_ALGO", "pat", "leaves no algorithm for allreduce"},
                             {"NCCL_ALGO", "allreduce:nvls", "NVLS needs every rank on one host"},
                             {"NCCL_PROTO", "LL128", "LL128 runs on CUDA communicators of one host only"}};
  for (const Refused& r : refused) {
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
    setenv(r.env, r.value, 1);
    setenv("BRAID_DIRECT", "0", 1);  // no NVLS on these communicators
    ncclComm_t c[2];
    ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess) << r.value;
    float b1[4] = {1, 2, 3, 4};
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(b, b, 4, ncclFloat, ncclSum, c[0], nullptr), ncclInvalidUsage) << r.value;
    EXPECT_EQ(ncclAllReduce(b1, b1, 4, ncclFloat, ncclSum, c[1], nullptr), ncclInvalidUsage) << r.value;
    (void)ncclGroupEnd();
    EXPECT_NE(std::string(ncclGetLastError(c[0])).find(r.mentions), std::string::npos) << ncclGetLastError(c[0]);
    // Other collectives are unaffected by a per-collective setting.
    if (std::string(r.value) == "allreduce:nvls") {
      EXPECT_EQ(ncclGroupStart(), ncclSuccess);
      EXPECT_EQ(ncclBroadcast(b, b, 4, ncclFloat, 0, c[0], nullptr), ncclSuccess);
      EXPECT_EQ(ncclBroadcast(b1, b1, 4, ncclFloat, 0, c[1], nullptr), ncclSuccess);
      EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
      EXPECT_EQ(b1[3], 4.0f);
    }
    for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    // A single rank copies whatever the setting says, as NCCL does.
    ncclComm_t one[1];
    ASSERT_EQ(ncclCommInitAll(one, 1, nullptr), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(b, b, 4, ncclFloat, ncclSum, one[0], nullptr), ncclSuccess) << r.value;
    EXPECT_EQ(ncclCommDestroy(one[0]), ncclSuccess);
    unsetenv("BRAID_DIRECT");
  }
  unsetenv("NCCL_PROTO");
  {
    // NVLS runs Simple only (as in NCCL): NVLS with LL leaves nothing, even where NVLS itself is available.
    setenv("NCCL_ALGO", "nvls", 1);
    setenv("NCCL_PROTO", "LL", 1);
    ncclComm_t c[2];
    ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
    float b1[4] = {1, 2, 3, 4};
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(b, b, 4, ncclFloat, ncclSum, c[0], nullptr), ncclInvalidUsage);
    EXPECT_EQ(ncclAllReduce(b1, b1, 4, ncclFloat, ncclSum, c[1], nullptr), ncclInvalidUsage);
    (void)ncclGroupEnd();
    EXPECT_NE(std::string(ncclGetLastError(c[0])).find("NVLS with Simple"), std::string::npos)
        << ncclGetLastError(c[0]);
    for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
  }
  for (const char* algo :
       {"ring", "nvls,ring", "allreduce:nvls;allgather:nvls;reducescatter:nvls;broadcast:ring", "^nvls"}) {
    setenv("NCCL_ALGO", algo, 1);
    const int n = 3;
    std::mutex mu;
    std::vector<std::string> failures;
    auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
      for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather}) {
        for (size_t count : {size_t{7}, size_t{300001}}) {
          for (bool inPlace : {false, true}) {
            std::string err = runCase(CollCase{coll, ncclFloat32, ncclSum, count, inPlace, 0}, rank, n, comm);
            if (!err.empty()) {
              std::lock_guard<std::mutex> lock(mu);
              failures.push_back(std::string(algo) + ": " + err);
            }
          }
        }
      }
      return ncclSuccess;
    });
    for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess) << algo;
    EXPECT_TRUE(failures.empty()) << failures.front();
  }
  unsetenv("NCCL_ALGO");
}

}  // namespace
}  // namespace braid_test

namespace braid_test {
namespace {

// One thread issues collectives on two communicators in one group; the peer thread issues them one by one in the
// opposite order. The group must not wait on the first communicator while its peer is busy with the second
// (regression: the direct path executed a group's communicators in a fixed order).
TEST(Api, GroupAcrossCommunicatorsInAnyOrder) {
  setenv("BRAID_TIMEOUT", "20", 1);
  ncclComm_t x[2], y[2];
  ASSERT_EQ(ncclCommInitAll(x, 2, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommInitAll(y, 2, nullptr), ncclSuccess);
  const size_t count = 1 << 20;  // above the staging size: the direct path on the buffers
  std::vector<std::vector<float>> bx(2, std::vector<float>(count)), by(2, std::vector<float>(count));
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < count; ++i) {
      bx[r][i] = static_cast<float>(r + 1);
      by[r][i] = static_cast<float>(10 * (r + 1));
    }
  }
  ncclResult_t a = ncclInternalError, b1 = ncclInternalError, b2 = ncclInternalError;
  std::thread ta([&] {
    ncclGroupStart();
    ncclAllReduce(bx[0].data(), bx[0].data(), count, ncclFloat, ncclSum, x[0], nullptr);
    ncclAllReduce(by[0].data(), by[0].data(), count, ncclFloat, ncclSum, y[0], nullptr);
    a = ncclGroupEnd();
  });
  std::thread tb([&] {
    b1 = ncclAllReduce(by[1].data(), by[1].data(), count, ncclFloat, ncclSum, y[1], nullptr);
    b2 = ncclAllReduce(bx[1].data(), bx[1].data(), count, ncclFloat, ncclSum, x[1], nullptr);
  });
  ta.join();
  tb.join();
  EXPECT_EQ(a, ncclSuccess);
  EXPECT_EQ(b1, ncclSuccess);
  EXPECT_EQ(b2, ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(bx[r][count - 1], 3.0f);
    EXPECT_EQ(by[r][0], 30.0f);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclCommDestroy(x[r]), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(y[r]), ncclSuccess);
  }
  unsetenv("BRAID_TIMEOUT");
}

}  // namespace
}  // namespace braid_test

namespace braid_test {
namespace {

// One thread groups a direct (NVLS-style) all-reduce on one communicator with a send on another; the peer thread
// first receives, then joins the all-reduce. NCCL progresses a group's operations together, so this completes;
// braid used to finish the group's direct work before starting its FIFO work and waited until BRAID_TIMEOUT.
TEST(Api, GroupMixingDirectAndFifoWorkAcrossCommunicators) {
  setenv("BRAID_TIMEOUT", "10", 1);
  setenv("NCCL_ALGO", "allreduce:nvls", 1);
  ncclComm_t x[2], y[2];
  ASSERT_EQ(ncclCommInitAll(x, 2, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommInitAll(y, 2, nullptr), ncclSuccess);
  for (const size_t count : {size_t{16}, size_t{1} << 20}) {  // the staged path and the path on the buffers
    std::vector<std::vector<float>> bx(2, std::vector<float>(count));
    std::vector<int> sent(4096), received(4096, -1);
    for (int r = 0; r < 2; ++r) std::fill(bx[r].begin(), bx[r].end(), static_cast<float>(r + 1));
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<int>(i * 7);
    ncclResult_t a = ncclInternalError, b1 = ncclInternalError, b2 = ncclInternalError;
    std::thread ta([&] {
      ncclGroupStart();
      ncclAllReduce(bx[0].data(), bx[0].data(), count, ncclFloat, ncclSum, x[0], nullptr);
      ncclSend(sent.data(), sent.size(), ncclInt32, 1, y[0], nullptr);
      a = ncclGroupEnd();
    });
    std::thread tb([&] {
      b1 = ncclRecv(received.data(), received.size(), ncclInt32, 0, y[1], nullptr);
      b2 = ncclAllReduce(bx[1].data(), bx[1].data(), count, ncclFloat, ncclSum, x[1], nullptr);
    });
    ta.join();
    tb.join();
    EXPECT_EQ(a, ncclSuccess) << count;
    EXPECT_EQ(b1, ncclSuccess) << count;
    EXPECT_EQ(b2, ncclSuccess) << count;
    EXPECT_EQ(received, sent) << count;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(bx[r][0], 3.0f) << count;
      EXPECT_EQ(bx[r][count - 1], 3.0f) << count;
    }
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclCommDestroy(x[r]), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(y[r]), ncclSuccess);
  }
  unsetenv("NCCL_ALGO");
  unsetenv("BRAID_TIMEOUT");
}

}  // namespace
}  // namespace braid_test
