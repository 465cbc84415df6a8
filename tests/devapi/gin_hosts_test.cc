// GIN toward ranks of other hosts (the proxy of src/api/gin_net.h), what its fences and VA signals add: the kernels
// of tests/devapi/gin_hosts_kernels.cuh on braid's CTA emulator, in GPU processes on two "hosts" (NCCL_HOSTID) over the
// strict fake driver. The hybrid world barrier across hosts, a barrier's Put fence waiting for a stopped peer, and
// VA signals counted exactly with their data there.
#include "tests/devapi/device_shim.h"
// (the shim first: it turns on the headers' device half)
#include "tests/devapi/gin_hosts_kernels.cuh"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "tests/devapi/gin_test_util.h"

namespace {

using namespace braid_test;
using namespace gin_test;

// The hybrid world barrier (barrierCount) across hosts, with NCCL's default fence (Put | Get): rank r's 4 MB put to
// rank n-1-r carries no signal, and the barrier alone must make it visible there. With 4 ranks two per host, that
// peer is on the other host and outside r's rail team, so only the fence (a round trip to the peer before r's rail
// arrival) orders it. Here the race is too narrow to see without the fence (the connection's 512 KB of slots hold the
// sender until most of the put is in), so ABarriersFenceWaitsForThePeerToLandThePut tests the fence itself.
int hybridFenceRounds(int r, int n, ncclComm_t comm, ncclGinFenceLevel fence) {
  constexpr size_t kBytes = size_t{4} << 20;
  constexpr int kRounds = 4, kBlock = 64;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.barrierCount = 1;  // asks for GIN here: the rail team's half crosses the hosts
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
    return 10;
  }
  if (dc.ginContextCount < 1 || dc.ginNet == nullptr) return 11;
  GpuRank g(comm);
  Win send, recv;
  if (!send.make(comm, kBytes, g.s) || !recv.make(comm, kBytes, g.s)) return 12;
  std::vector<uint64_t> out(kBlock, 0);
  const int peer = n - 1 - r;
  for (int round = 0; round < kRounds; ++round) {
    const unsigned char mine = static_cast<unsigned char>(16 * r + round + 1);
    const unsigned char theirs = static_cast<unsigned char>(16 * peer + round + 1);
    if (!g.fill(send.buf, kBytes, mine)) return 13;
    braid::Status st = braid_emu::launch(cfgOf(1, kBlock, "ginHybridFence"), [&] {
      ginHybridFence(send.win, recv.win, kBytes, 0x01010101u * theirs, fence, dc, out.data());
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d round %d: %s\n", r, round, st.message().c_str());
      return 14;
    }
    uint64_t wrong = 0;
    for (uint64_t w : out) wrong += w;
    if (wrong != 0) {
      fprintf(stderr, "rank %d round %d: %llu of %zu words from rank %d had not landed after the barrier\n", r, round,
              static_cast<unsigned long long>(wrong), kBytes / 4, peer);
      return 15;
    }
  }
  if (!g.barrier()) return 16;
  if (ncclDevCommDestroy(comm, &dc) != ncclSuccess || !send.drop(comm) || !recv.drop(comm)) return 17;
  return 0;
}

TEST(GinProcesses, TheHybridWorldBarriersFenceLandsPutsToEveryRankAcrossHosts) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  const ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get;
  for (int n : {2, 4}) {
    expectOnTwoHosts(n, [n, fence](int r, ncclComm_t comm) { return hybridFenceRounds(r, n, comm, fence); });
  }
}

// A barrier's Put fence waits until the peer answers that this rank's put has landed, though the peer is no member
// of the barrier: rank 0's put to rank 1 (the other host), then a barrier over rank 0's LSA team (itself alone), as a
// GIN barrier and as a hybrid ncclBarrierSession whose outer team is that one rank. While rank 1 is stopped (SIGSTOP)
// its messenger answers nothing, so each fence ends at BRAID_TIMEOUT=2 with a WARN and the barrier goes on; without
// the fence each returned at once. After SIGCONT the same put and fence complete and the data is there.
TEST(GinProcesses, ABarriersFenceWaitsForThePeerToLandThePut) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  expectOnTwoHosts(
      2,
      [](int r, ncclComm_t comm) {
        constexpr size_t kBytes = 64;
        ncclGinBarrierHandle bar{};
        ncclDevResourceRequirements barReq{};
        if (ncclGinBarrierCreateRequirement(comm, ncclTeamLsa(comm), 1, &bar, &barReq) != ncclSuccess) return 10;
        ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
        reqs.resourceRequirementsList = &barReq;
        reqs.lsaBarrierCount = 1;  // the hybrid session's inner barrier
        ncclDevComm dc{};
        if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return 11;
        GpuRank g(comm);
        Win send, recv;
        if (!send.make(comm, 4096, g.s) || !recv.make(comm, 4096, g.s)) return 12;
        const int stopped = stopRankOne(r, g);  // rank 0 continues rank 1 after its first two fences ended
        if (stopped < 0) return 13;
        if (r == 1) {
          if (!g.barrier()) return 14;
          if (!g.allBytes(recv.buf, 0, kBytes, 0x5a)) return 15;  // the last put landed
        } else {
          const ContinueOnExit cont{stopped};
          std::vector<uint64_t> out(1, 99);
          const ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get;
          auto putThenFence = [&](unsigned char v, bool hybrid) {
            if (!g.fill(send.buf, kBytes, v)) return -1.0;
            const auto t0 = std::chrono::steady_clock::now();
            braid::Status st = braid_emu::launch(cfgOf(1, 32, "ginPutThenFence"), [&] {
              ginPutThenFence(send.win, recv.win, kBytes, 1, bar, fence, hybrid, dc, out.data());
            });
            const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return st.isOk() && out[0] == ncclSuccess ? sec : -1.0;
          };
          // A GIN barrier, then a hybrid one whose outer team has only this rank: both fence.
          for (bool hybrid : {false, true}) {
            const double sec = putThenFence(hybrid ? 0x22 : 0x11, hybrid);
            if (sec < 1.5 || sec > 30) {
              fprintf(stderr, "the %s barrier's fence toward a stopped peer returned after %.1f s (BRAID_TIMEOUT=2)\n",
                      hybrid ? "hybrid" : "GIN", sec);
              return 17;
            }
          }
          cont.now();
          if (putThenFence(0x5a, true) < 0) return 18;
          if (!g.barrier()) return 19;
        }
        if (!g.barrier()) return 20;
        if (ncclDevCommDestroy(comm, &dc) != ncclSuccess || !send.drop(comm) || !recv.drop(comm)) return 21;
        return 0;
      },
      "BRAID_TIMEOUT", "2");
}

// VA signals toward ranks of other hosts (the proxy sends them after the data; the peer's messenger adds them to the
// window word with a one-thread kernel): on 2 processes (one per host) and 4 (two per host, the LSA partner adding by
// atomics to the same words), three rounds of puts, signals and values with VA increments and adds. Each word counts
// exactly what every other rank sent, and the data each put carried is there once its signal is.
int vaSignalRounds(int r, int n, ncclComm_t comm) {
  constexpr size_t kBytes = (size_t{1} << 20) + 24;  // two of the proxy's pieces
  constexpr int kRounds = 3;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 1;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return 10;
  GpuRank g(comm);
  Win send, recv, sig;
  const size_t recvBytes = kBytes * static_cast<size_t>(n) + 8 * static_cast<size_t>(n);
  if (!send.make(comm, kBytes, g.s) || !recv.make(comm, recvBytes, g.s) || !sig.make(comm, 64, g.s)) return 11;
  constexpr int kBlock = 64;
  std::vector<uint64_t> out(3 + kBlock, 0);
  std::vector<unsigned char> got(recvBytes);
  for (int round = 0; round < kRounds; ++round) {
    const auto mark = [round](int q) { return static_cast<unsigned char>(16 * q + round + 1); };
    if (!g.fill(send.buf, kBytes, mark(r)) || !g.barrier()) return 12;
    const uint64_t stamp = 1000u * static_cast<uint64_t>(round) + static_cast<uint64_t>(r);
    braid::Status st = braid_emu::launch(cfgOf(1, kBlock, "ginVaSignalsEveryPeer"), [&] {
      ginVaSignalsEveryPeer(send.win, recv.win, sig.win, kBytes, stamp, round, dc, out.data());
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d round %d: %s\n", r, round, st.message().c_str());
      return 13;
    }
    const uint64_t rounds = static_cast<uint64_t>(n - 1) * static_cast<uint64_t>(round + 1);
    if (out[0] != rounds || out[1] != 5 * rounds || out[2] != 3 * rounds) {
      fprintf(stderr, "rank %d round %d: VA words %llu %llu %llu, expected %llu %llu %llu\n", r, round,
              static_cast<unsigned long long>(out[0]), static_cast<unsigned long long>(out[1]),
              static_cast<unsigned long long>(out[2]), static_cast<unsigned long long>(rounds),
              static_cast<unsigned long long>(5 * rounds), static_cast<unsigned long long>(3 * rounds));
      return 14;
    }
    uint64_t early = 0;  // read in the kernel right after its signal waits
    for (int t = 0; t < kBlock; ++t) early += out[3 + static_cast<size_t>(t)];
    if (early != 0) {
      fprintf(stderr, "rank %d round %d: %llu bytes or values were not there when their VA signals were\n", r, round,
              static_cast<unsigned long long>(early));
      return 20;
    }
    if (!g.put(got.data(), recv.buf, recvBytes)) return 15;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      for (size_t i = 0; i < kBytes; ++i) {
        if (got[static_cast<size_t>(q) * kBytes + i] != mark(q)) {
          fprintf(stderr, "rank %d round %d: byte %zu from rank %d is %d, not %d\n", r, round, i, q,
                  got[static_cast<size_t>(q) * kBytes + i], mark(q));
          return 16;
        }
      }
      uint64_t value = 0;
      std::memcpy(&value, got.data() + kBytes * static_cast<size_t>(n) + 8 * static_cast<size_t>(q), sizeof(value));
      if (value != 1000u * static_cast<uint64_t>(round) + static_cast<uint64_t>(q)) return 17;
    }
    if (!g.barrier()) return 18;  // nobody's next round lands here before this check
  }
  if (ncclDevCommDestroy(comm, &dc) != ncclSuccess || !send.drop(comm) || !recv.drop(comm) || !sig.drop(comm))
    return 19;
  return 0;
}

TEST(GinProcesses, VaSignalsReachRanksOfOtherHostsAndImplyTheirData) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  for (int n : {2, 4}) expectOnTwoHosts(n, [n](int r, ncclComm_t comm) { return vaSignalRounds(r, n, comm); });
}

}  // namespace
