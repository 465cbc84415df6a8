// Windows and one-sided operations on host communicators through the C API (src/core/windows.h): registration,
// puts with signals around a ring of ranks (threads, and processes on ncclMemAlloc memory), waits inside a group
// with one thread driving two ranks, what a wait does when the signal never comes or its peer dies, and every bad
// argument by name. Every result is checked element by element.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

using Clock = std::chrono::steady_clock;

std::string lastError(ncclComm_t comm) {
  return ncclGetLastError(comm);
}

// fn(rank, comm) on n threads of one communicator (destroyed after): "" or what went wrong, per rank.
std::vector<std::string> onThreads(int n, const std::function<std::string(int, ncclComm_t)>& fn) {
  return runThreadsChecked(n, fn);
}

// Rounds of a ring exchange on window buffers `buf` (count ints per rank slot, n slots): in round k rank r puts
// its block into rank (r + 1) % n's window at slot r, then waits for the signal of rank (r - 1 + n) % n and checks
// that rank's block in its own slot. "" or the first wrong element.
std::string ringRounds(int r, int n, ncclComm_t comm, int* buf, size_t count, int rounds) {
  ncclWindow_t win = nullptr;
  if (ncclCommWindowRegister(comm, buf, count * n * sizeof(int), &win, NCCL_WIN_DEFAULT) != ncclSuccess) {
    return "register: " + lastError(comm);
  }
  if (win == nullptr) return "registration returned a NULL window";
  void* user = nullptr;
  if (ncclWinGetUserPtr(comm, win, &user) != ncclSuccess || user != buf) return "ncclWinGetUserPtr: " + lastError(comm);
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  std::vector<int> mine(count);
  for (int k = 0; k < rounds; ++k) {
    for (size_t i = 0; i < count; ++i) mine[i] = r * 1000003 + k * 7919 + static_cast<int>(i);
    if (ncclPutSignal(mine.data(), count, ncclInt32, next, win, static_cast<size_t>(r) * count * sizeof(int), 0, 0, 0,
                      comm, nullptr) != ncclSuccess) {
      return "ncclPutSignal: " + lastError(comm);
    }
    ncclWaitSignalDesc_t d{1, prev, 0, 0};
    if (ncclWaitSignal(1, &d, comm, nullptr) != ncclSuccess) return "ncclWaitSignal: " + lastError(comm);
    const int* got = buf + static_cast<size_t>(prev) * count;
    for (size_t i = 0; i < count; ++i) {
      const int want = prev * 1000003 + k * 7919 + static_cast<int>(i);
      if (got[i] != want) {
        return "round " + std::to_string(k) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) +
               " not " + std::to_string(want);
      }
    }
    // The peer must not overwrite the slot before this rank read it: a signal back says it is read.
    if (ncclSignal(prev, 0, 0, 0, comm, nullptr) != ncclSuccess) return "ncclSignal: " + lastError(comm);
    ncclWaitSignalDesc_t back{1, next, 0, 0};
    if (ncclWaitSignal(1, &back, comm, nullptr) != ncclSuccess) return "ncclWaitSignal: " + lastError(comm);
  }
  if (ncclCommWindowDeregister(comm, win) != ncclSuccess) return "deregister: " + lastError(comm);
  return "";
}

TEST(Windows, PutsAndSignalsAroundARingOfThreads) {
  const std::vector<std::string> errs = onThreads(4, [](int r, ncclComm_t comm) {
    const size_t count = 3001;
    std::vector<int> buf(count * 4, -1);
    return ringRounds(r, 4, comm, buf.data(), count, 20);
  });
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// Processes map each other's ncclMemAlloc windows; the collectives on a window buffer still give exact results.
TEST(WindowsProcesses, PutsAndSignalsOnNcclMemAllocWindows) {
  std::vector<int> codes = runProcesses(3, [](int r, ncclComm_t comm) {
    const size_t count = 1 << 16;
    void* p = nullptr;
    if (ncclMemAlloc(&p, count * 3 * sizeof(int)) != ncclSuccess) return 10;
    std::string e = ringRounds(r, 3, comm, static_cast<int*>(p), count, 8);
    if (e.empty()) {
      ncclWindow_t win = nullptr;
      float* f = static_cast<float*>(p);
      if (ncclCommWindowRegister(comm, p, count * 3 * sizeof(int), &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) {
        e = "register for the all-reduce: " + lastError(comm);
      } else {
        for (size_t i = 0; i < count; ++i) f[i] = static_cast<float>(r + 1 + static_cast<int>(i % 7));
        if (ncclAllReduce(f, f + count, count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
          e = "all-reduce: " + lastError(comm);
        }
        for (size_t i = 0; i < count && e.empty(); ++i) {
          if (f[count + i] != static_cast<float>(6 + 3 * static_cast<int>(i % 7)))
            e = "all-reduce element " + std::to_string(i);
        }
        ncclCommWindowDeregister(comm, win);
      }
    }
    ncclMemFree(p);
    if (!e.empty()) fprintf(stderr, "rank %d: %s\n", r, e.c_str());
    return e.empty() ? 0 : 11;
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// A window of malloc memory is a window of the process's own ranks only: a put across processes is refused by name,
// not a crash.
TEST(WindowsProcesses, PrivateMemoryIsOutOfReachOfOtherProcesses) {
  std::vector<int> codes = runProcesses(2, [](int r, ncclComm_t comm) {
    std::vector<int> buf(1024, 0);
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, buf.data(), buf.size() * sizeof(int), &win, 0) != ncclSuccess) return 10;
    const ncclResult_t st = ncclPutSignal(buf.data(), 16, ncclInt32, 1 - r, win, 0, 0, 0, 0, comm, nullptr);
    const std::string e = lastError(comm);
    const bool named = e.find("out of rank " + std::to_string(r) + "'s load/store reach") != std::string::npos &&
                       e.find("private memory") != std::string::npos &&
                       e.find("register ncclMemAlloc memory, which peers map") != std::string::npos;
    if (st != ncclInvalidUsage || !named) {
      fprintf(stderr, "rank %d: %d %s\n", r, st, e.c_str());
      return 11;
    }
    // The host queries say the same: the LSA one by name, the peer one with NULL (as device code gets).
    void* at = reinterpret_cast<void*>(1);
    if (ncclGetLsaDevicePointer(win, 0, 1 - r, &at) != ncclInvalidUsage ||
        lastError(comm).find("out of rank " + std::to_string(r) + "'s load/store reach") == std::string::npos) {
      fprintf(stderr, "rank %d: %s\n", r, lastError(comm).c_str());
      return 15;
    }
    if (ncclGetPeerDevicePointer(win, 0, 1 - r, &at) != ncclSuccess || at != nullptr) return 16;
    if (ncclGetPeerDevicePointer(win, 4, r, &at) != ncclSuccess || at != buf.data() + 1) return 17;
    // A put to itself works: its own window is always in reach.
    std::vector<int> src(16, 7 + r);
    if (ncclPutSignal(src.data(), 16, ncclInt32, r, win, 64, 0, 0, 0, comm, nullptr) != ncclSuccess) return 12;
    ncclWaitSignalDesc_t d{1, r, 0, 0};
    if (ncclWaitSignal(1, &d, comm, nullptr) != ncclSuccess || buf[16] != 7 + r || buf[31] != 7 + r) return 13;
    return ncclCommWindowDeregister(comm, win) == ncclSuccess ? 0 : 14;
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// NCCL 2.29's host queries of a window's device pointers, on a host communicator (where they are host addresses):
// every member's buffer as the kernels would reach it, a store through one landing in the peer's buffer, and each
// bad argument by name.
TEST(Windows, HostQueriesGiveEveryMembersBuffer) {
  constexpr int kRanks = 3;
  std::vector<std::vector<int>> bufs(kRanks);
  for (int r = 0; r < kRanks; ++r) bufs[static_cast<size_t>(r)].assign(256 + 64 * static_cast<size_t>(r), 0);
  const std::vector<std::string> errs = onThreads(kRanks, [&](int r, ncclComm_t comm) -> std::string {
    std::vector<int>& mine = bufs[static_cast<size_t>(r)];
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, mine.data(), mine.size() * sizeof(int), &win, 0) != ncclSuccess) {
      return "register: " + lastError(comm);
    }
    const ncclTeam lsa = ncclTeamLsa(comm);
    if (lsa.nRanks != kRanks) return "the threads of one process are one LSA team";
    for (int p = 0; p < kRanks; ++p) {
      void *viaLsa = nullptr, *viaPeer = nullptr;
      const size_t off = 4 * static_cast<size_t>(p + 1);
      if (ncclGetLsaDevicePointer(win, off, p, &viaLsa) != ncclSuccess) return "lsa: " + lastError(comm);
      if (ncclGetPeerDevicePointer(win, off, p, &viaPeer) != ncclSuccess) return "peer: " + lastError(comm);
      char* want = reinterpret_cast<char*>(bufs[static_cast<size_t>(p)].data()) + off;
      if (viaLsa != want || viaPeer != want) return "member " + std::to_string(p) + "'s pointer is wrong";
    }
    // A store through the next rank's pointer lands in its buffer (checked after an all-reduce orders them).
    void* next = nullptr;
    if (ncclGetPeerDevicePointer(win, 0, (r + 1) % kRanks, &next) != ncclSuccess) return "next: " + lastError(comm);
    static_cast<int*>(next)[1] = 1000 + r;
    int token = 1, sum = 0;
    if (ncclAllReduce(&token, &sum, 1, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess || sum != kRanks) {
      return "all-reduce: " + lastError(comm);
    }
    if (mine[1] != 1000 + (r + kRanks - 1) % kRanks) return "the previous rank's store is missing";
    // No multicast on a host communicator: null, not an error; a handle without a base is refused.
    void* mc = reinterpret_cast<void*>(1);
    if (ncclGetLsaMultimemDevicePointer(win, 0, &mc) != ncclSuccess || mc != nullptr) return "multimem not null";
    ncclMultimemHandle none{};
    if (ncclGetMultimemDevicePointer(win, 0, none, &mc) != ncclInvalidArgument ||
        lastError(comm).find("multimem.mcBasePtr is NULL") == std::string::npos) {
      return "a NULL multimem handle: " + lastError(comm);
    }
    // Each call is checked at once: the last error holds the latest call's text only.
    auto refused = [&](ncclResult_t rc, const char* text) {
      return rc == ncclInvalidArgument && lastError(comm).find(text) != std::string::npos;
    };
    void* out = nullptr;
    const size_t lastBytes = bufs[kRanks - 1].size() * sizeof(int);
    if (!refused(ncclGetLsaDevicePointer(win, 0, kRanks, &out), "lsaRank=3 is not a member") ||
        !refused(ncclGetLsaDevicePointer(win, lastBytes, kRanks - 1, &out),
                 "is not inside LSA member 2's window buffer") ||
        !refused(ncclGetPeerDevicePointer(win, 0, -1, &out), "peer=-1 is not a rank") ||
        !refused(ncclGetPeerDevicePointer(win, 0, 0, nullptr), "outPtr is NULL") ||
        !refused(ncclGetLsaDevicePointer(nullptr, 0, 0, &out), "window is NULL")) {
      return "a bad argument: " + lastError(comm);
    }
    // NCCL 2.31's Compute Fabric Transport is declared and refused by name.
    ncclCftLeId le = 0;
    size_t leOff = 0;
    if (ncclGetPeerDeviceLeInfo(win, 0, r, &le, &leOff) != ncclInvalidUsage ||
        lastError(comm).find("braid has no Compute Fabric Transport") == std::string::npos) {
      return "CFT: " + lastError(comm);
    }
    const ncclTeam cft = ncclTeamCft(comm);
    if (cft.nRanks != 0 || ncclTeamCftMultimem(comm).nRanks != 0) return "a CFT team that braid does not have";
    if (ncclCommWindowDeregister(comm, win) != ncclSuccess) return "deregister: " + lastError(comm);
    if (!refused(ncclGetLsaDevicePointer(win, 0, 0, &out), "is not a registered window")) {
      return "a deregistered window: " + lastError(comm);
    }
    return "";
  });
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// Windows left registered go with their communicator, and so do their entries for the host queries.
TEST(Windows, HostQueriesForgetTheWindowsOfADestroyedCommunicator) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<int> buf[2] = {std::vector<int>(64, 0), std::vector<int>(64, 0)};
  ncclWindow_t win[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommWindowRegister(c[r], buf[r].data(), 256, &win[r], 0), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError(nullptr);
  void* p = nullptr;
  ASSERT_EQ(ncclGetPeerDevicePointer(win[0], 4, 1, &p), ncclSuccess) << lastError(nullptr);
  EXPECT_EQ(p, buf[1].data() + 1);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommDestroy(c[r]), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclGetLsaDevicePointer(win[r], 0, 0, &p), ncclInvalidArgument);
    EXPECT_NE(lastError(nullptr).find("is not a registered window"), std::string::npos) << lastError(nullptr);
  }
}

// One thread drives two ranks: registrations and waits inside a group run at ncclGroupEnd, so neither rank blocks
// the thread the other needs.
TEST(Windows, OneThreadDrivesTwoRanksInGroups) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<double> buf[2] = {std::vector<double>(512, 0), std::vector<double>(512, 0)};
  std::vector<char> spare[2] = {std::vector<char>(64), std::vector<char>(64)};
  ncclWindow_t win[2] = {nullptr, nullptr}, second[2] = {nullptr, nullptr};
  // Two registrations per communicator in one group: each communicator's run in order (their exchanges share its
  // bootstrap), the two communicators' side by side.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclCommWindowRegister(c[r], buf[r].data(), 512 * sizeof(double), &win[r], 0), ncclSuccess);
    ASSERT_EQ(ncclCommWindowRegister(c[r], spare[r].data(), 64, &second[r], 0), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(win[r], nullptr);
    ASSERT_NE(second[r], nullptr);
    EXPECT_EQ(ncclCommWindowDeregister(c[r], second[r]), ncclSuccess);
  }
  for (int round = 0; round < 5; ++round) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      ncclWaitSignalDesc_t d{1, 1 - r, 0, 0};
      ASSERT_EQ(ncclWaitSignal(1, &d, c[r], nullptr), ncclSuccess);  // before the peer's put is even issued
      std::vector<double> v(256, r * 10.0 + round);
      ASSERT_EQ(
          ncclPutSignal(v.data(), 256, ncclFloat64, 1 - r, win[r], 256 * sizeof(double) * r, 0, 0, 0, c[r], nullptr),
          ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError(c[0]) << " / " << lastError(c[1]);
    for (int r = 0; r < 2; ++r) {
      const int from = 1 - r;
      for (size_t i = 0; i < 256; ++i) ASSERT_EQ(buf[r][256 * from + i], from * 10.0 + round) << r << " " << i;
    }
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclCommWindowDeregister(c[r], win[r]), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(c[r]), ncclSuccess);
  }
}

TEST(Windows, BadArgumentsAreNamed) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<int> a(1024), b(1024);
  ncclWindow_t win = nullptr;
  // Before any window: one-sided operations have no signal area.
  EXPECT_EQ(ncclSignal(1, 0, 0, 0, c[0], nullptr), ncclInvalidUsage);
  EXPECT_NE(lastError(c[0]).find("first ncclCommWindowRegister"), std::string::npos) << lastError(c[0]);
  EXPECT_EQ(ncclCommWindowRegister(c[0], nullptr, 64, &win, 0), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("buff is NULL"), std::string::npos);
  EXPECT_EQ(ncclCommWindowRegister(c[0], a.data(), 0, &win, 0), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("size=0"), std::string::npos);
  EXPECT_EQ(ncclCommWindowRegister(c[0], a.data(), 64, nullptr, 0), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("win is NULL"), std::string::npos);
  // Checked inside the exchange: the rank with the bad flags names them, its peer names the rank.
  ncclWindow_t w[2] = {nullptr, nullptr};
  ncclResult_t st[2];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclCommWindowRegister(c[0], a.data(), 4096, &w[0], 0x40);
  ncclCommWindowRegister(c[1], b.data(), 4096, &w[1], 0);
  st[0] = ncclGroupEnd();
  EXPECT_EQ(st[0], ncclInvalidArgument);
  const std::string groupErr = lastError(nullptr);
  EXPECT_TRUE(groupErr.find("winFlags=0x40") != std::string::npos ||
              groupErr.find("rank 0 could not register") != std::string::npos)
      << groupErr;
  // NCCL 2.32's CFT flag, on both ranks: CFT is not built, and the refusal says so.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclCommWindowRegister(c[0], a.data(), 4096, &w[0], NCCL_WIN_CFT_COUNTED);
  ncclCommWindowRegister(c[1], b.data(), 4096, &w[1], NCCL_WIN_CFT_COUNTED);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_NE(lastError(nullptr).find("NCCL_WIN_CFT_COUNTED (0x8): the Compute Fabric Transport is not built"),
            std::string::npos)
      << lastError(nullptr);
  EXPECT_EQ(w[0], nullptr);
  // Misaligned symmetric buffer, on both ranks: each names its own.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclCommWindowRegister(c[0], reinterpret_cast<char*>(a.data()) + 4, 1024, &w[0], NCCL_WIN_COLL_SYMMETRIC);
  ncclCommWindowRegister(c[1], reinterpret_cast<char*>(b.data()) + 4, 1024, &w[1], NCCL_WIN_COLL_SYMMETRIC);
  st[1] = ncclGroupEnd();
  EXPECT_NE(st[1], ncclSuccess);
  EXPECT_NE(lastError(nullptr).find("NCCL_WIN_REQUIRED_ALIGNMENT"), std::string::npos) << lastError(nullptr);
  // A good pair of windows.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclCommWindowRegister(c[0], a.data(), a.size() * sizeof(int), &w[0], 0);
  ncclCommWindowRegister(c[1], b.data(), 100 * sizeof(int), &w[1], 0);  // sizes may differ
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  int v[8] = {};
  // Puts: every argument.
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 2, w[0], 0, 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("peer=2"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, -1, w[0], 0, 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 97 * sizeof(int), 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("passes the end of rank 1's window buffer (400 bytes)"), std::string::npos)
      << lastError(c[0]);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 0, 1, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("sigIdx=1"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 0, 0, 3, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("ctx=3"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 0, 0, 0, 1, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("flags=0x1"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, static_cast<ncclDataType_t>(99), 1, w[0], 0, 0, 0, 0, c[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclPutSignal(nullptr, 8, ncclInt32, 1, w[0], 0, 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("localbuff is NULL"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, nullptr, 0, 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("peerWin is NULL"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[1], 0, 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("not a window of this communicator"), std::string::npos);
  int fakeStream = 0;
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 0, 0, 0, 0, c[0], reinterpret_cast<cudaStream_t>(&fakeStream)),
            ncclInvalidUsage);
  EXPECT_NE(lastError(c[0]).find("host memory"), std::string::npos);
  // Waits and signals.
  EXPECT_EQ(ncclSignal(1, 0, 7, 0, c[0], nullptr), ncclInvalidArgument);
  ncclWaitSignalDesc_t d[2] = {{1, 1, 0, 0}, {-1, 1, 0, 0}};
  EXPECT_EQ(ncclWaitSignal(2, d, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("signalDescs[1].opCnt=-1"), std::string::npos) << lastError(c[0]);
  d[1] = {1, 5, 0, 0};
  EXPECT_EQ(ncclWaitSignal(2, d, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("signalDescs[1].peer=5"), std::string::npos);
  d[1] = {1, 1, 2, 0};
  EXPECT_EQ(ncclWaitSignal(2, d, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("signalDescs[1].sigIdx=2"), std::string::npos);
  EXPECT_EQ(ncclWaitSignal(-1, d, c[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclWaitSignal(1, nullptr, c[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclWaitSignal(0, nullptr, c[0], nullptr), ncclSuccess);  // nothing to wait for
  // The rejected calls counted nothing: a put and its wait still pair up.
  for (int i = 0; i < 8; ++i) v[i] = 40 + i;
  ASSERT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 8, 0, 0, 0, c[0], nullptr), ncclSuccess);
  ncclWaitSignalDesc_t one{1, 0, 0, 0};
  ASSERT_EQ(ncclWaitSignal(1, &one, c[1], nullptr), ncclSuccess);
  EXPECT_EQ(b[2], 40);
  EXPECT_EQ(b[9], 47);
  // User pointers, deregistration.
  void* user = nullptr;
  EXPECT_EQ(ncclWinGetUserPtr(c[0], w[1], &user), ncclInvalidArgument);
  EXPECT_EQ(ncclWinGetUserPtr(c[1], w[1], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclWinGetUserPtr(c[1], w[1], &user), ncclSuccess);
  EXPECT_EQ(user, b.data());
  EXPECT_EQ(ncclCommWindowDeregister(c[0], w[1]), ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowDeregister(c[0], w[0]), ncclSuccess);
  EXPECT_EQ(ncclCommWindowDeregister(c[0], w[0]), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("already deregistered"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(v, 8, ncclInt32, 1, w[0], 0, 0, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowDeregister(c[0], nullptr), ncclSuccess);
  // w[1] stays registered: destruction releases it.
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(Windows, DisabledWindowsAreNullOnEveryRank) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<int> a(1024), b(1024);
  ncclWindow_t w[2] = {reinterpret_cast<ncclWindow_t>(1), reinterpret_cast<ncclWindow_t>(1)};
  setenv("NCCL_WIN_ENABLE", "0", 1);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclCommWindowRegister(c[0], a.data(), 4096, &w[0], 0);
  ncclCommWindowRegister(c[1], b.data(), 4096, &w[1], 0);
  const ncclResult_t st = ncclGroupEnd();
  unsetenv("NCCL_WIN_ENABLE");
  EXPECT_EQ(st, ncclSuccess) << lastError(nullptr);
  EXPECT_EQ(w[0], nullptr);
  EXPECT_EQ(w[1], nullptr);
  EXPECT_EQ(ncclCommWindowDeregister(c[0], w[0]), ncclSuccess);
  EXPECT_EQ(ncclSignal(1, 0, 0, 0, c[0], nullptr), ncclInvalidUsage);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A signal that never comes: the wait ends at BRAID_TIMEOUT with an error that says what it waited for.
TEST(Windows, AWaitForASignalThatNeverComesTimesOut) {
  setenv("BRAID_TIMEOUT", "2", 1);
  std::atomic<bool> over{false};
  const std::vector<std::string> errs = onThreads(2, [&](int r, ncclComm_t comm) -> std::string {
    std::vector<int> buf(256);
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, buf.data(), 1024, &win, 0) != ncclSuccess) return "register: " + lastError(comm);
    std::string e;
    if (r == 0) {
      ncclWaitSignalDesc_t d{3, 1, 0, 0};
      const auto t0 = Clock::now();
      const ncclResult_t st = ncclWaitSignal(1, &d, comm, nullptr);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (st != ncclRemoteError) e = "the wait returned " + std::to_string(st);
      if (lastError(comm).find("rank 1 sent 1 signals, not the 3 awaited") == std::string::npos) e += lastError(comm);
      if (s > 20) e += " after " + std::to_string(s) + " s";
      over = true;
    } else {
      if (ncclSignal(0, 0, 0, 0, comm, nullptr) != ncclSuccess) e = "signal: " + lastError(comm);
      while (!over.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // its buffer stays till then
    }
    ncclCommWindowDeregister(comm, win);
    return e;
  });
  unsetenv("BRAID_TIMEOUT");
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// A waiting rank whose peer process died learns it at once (not at BRAID_TIMEOUT); revocation also ends a wait.
TEST(WindowsProcesses, AWaitOnADeadPeerFailsByName) {
  setenv("BRAID_TIMEOUT", "60", 1);
  std::vector<int> codes = runProcesses(2, [](int r, ncclComm_t comm) {
    void* p = nullptr;
    if (ncclMemAlloc(&p, 4096) != ncclSuccess) return 10;
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, p, 4096, &win, 0) != ncclSuccess) return 11;
    if (r == 1) raise(SIGKILL);
    ncclWaitSignalDesc_t d{1, 1, 0, 0};
    const auto t0 = Clock::now();
    const ncclResult_t st = ncclWaitSignal(1, &d, comm, nullptr);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string e = lastError(comm);
    if (st != ncclRemoteError || e.find("has exited") == std::string::npos || s > 30) {
      fprintf(stderr, "rank 0: %d after %.1f s: %s\n", st, s, e.c_str());
      return 12;
    }
    return 0;
  });
  unsetenv("BRAID_TIMEOUT");
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}

TEST(Windows, RevokeEndsAWaitOnAnotherThread) {
  setenv("BRAID_TIMEOUT", "0", 1);  // no deadline: only the revocation ends the wait
  std::atomic<bool> waiting{false};
  const std::vector<std::string> errs = onThreads(2, [&](int r, ncclComm_t comm) -> std::string {
    std::vector<int> buf(256);
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, buf.data(), 1024, &win, 0) != ncclSuccess) return "register: " + lastError(comm);
    if (r == 1) return "";  // never signals; its window stays until its communicator goes
    std::thread watchdog([&] {
      while (!waiting.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
    });
    waiting = true;
    ncclWaitSignalDesc_t d{1, 1, 0, 0};
    const ncclResult_t st = ncclWaitSignal(1, &d, comm, nullptr);
    watchdog.join();
    if (st == ncclSuccess) return "the wait succeeded";
    if (ncclSignal(1, 0, 0, 0, comm, nullptr) != ncclInvalidUsage) return "a signal on a revoked communicator";
    return "";
  });
  unsetenv("BRAID_TIMEOUT");
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

}  // namespace
}  // namespace braid_test
