// The device half of the device API (include/nccl_device/*.h) running: kernels written as users write them
// (tests/devapi/lsa_kernels.cuh) on braid's CTA emulator, over device communicators and windows of CUDA
// communicators on the strict fake driver (ranks as threads, one fake GPU each). What a GPU would see of them:
// ncclDevCommCreate's resource window and barriers, ncclWindow_t descriptors in device memory, LSA pointers into
// peers' ncclMemAlloc buffers, warp and CTA barriers across launches, the timeout overload, the abort word.
#include "tests/devapi/device_shim.h"
// (the shim first: it turns on the headers' device half)
#include "tests/devapi/lsa_kernels.cuh"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/devapi/kernel_test_util.h"

namespace {

using namespace braid_test;

class DeviceKernels : public FakeGpuKernels {};

float inputOf(int rank, int round, size_t i) {
  return static_cast<float>((rank + 1) * 3 + round * 5 + static_cast<int>(i % 97));
}

// Rounds of the two-shot all-reduce kernel on windows of kRanks ranks, every element checked: ncclSuccess or why not.
ncclResult_t twoShotRounds(int r, int kRanks, ncclComm_t comm, cudaStream_t stream, int variant = -1) {
  constexpr int kGrid = 2, kBlock = 32, kRounds = 3;
  constexpr size_t kCount = 1000;  // not a multiple of the ranks' shares
  {
    const Driver& drv = Driver::get();
    const size_t bytes = kCount * sizeof(float);
    void *send = nullptr, *recv = nullptr;
    CHECK_OR(ncclMemAlloc(&send, bytes) == ncclSuccess && ncclMemAlloc(&recv, bytes) == ncclSuccess, 10);
    ncclWindow_t sendWin = nullptr, recvWin = nullptr;
    CHECK_OR(ncclCommWindowRegister(comm, send, bytes, &sendWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 11);
    CHECK_OR(ncclCommWindowRegister(comm, recv, bytes, &recvWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 11);
    CHECK_OR(sendWin != nullptr && recvWin != nullptr, 11);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = kGrid;
    ncclDevComm dc{};
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
      return ncclInternalError;
    }
    CHECK_OR(dc.rank == r && dc.nRanks == kRanks && dc.lsaSize == kRanks && dc.lsaRank == r, 12);
    CHECK_OR(dc.abortFlag != nullptr && dc.lsaBarrier.nBarriers == kGrid, 12);
    std::vector<float> in(kCount), out(kCount);
    for (int round = 0; round < kRounds; ++round) {
      for (size_t i = 0; i < kCount; ++i) in[i] = inputOf(r, round, i);
      drv.copy(send, in.data(), bytes, stream);
      CHECK_OR(drv.streamSync(stream) == 0, 13);
      braid::Status st = braid_emu::launch(cfgOf(kGrid, kBlock, "lsaTwoShotAllReduce"), [&] {
        if (variant < 0) {
          lsaTwoShotAllReduce(sendWin, recvWin, kCount, dc);
        } else {
          lsaBlocksAllReduce(variant, sendWin, recvWin, kCount, dc);
        }
      });
      if (!st.isOk()) {
        fprintf(stderr, "rank %d: %s\n", r, st.message().c_str());
        return ncclInternalError;
      }
      drv.copy(out.data(), recv, bytes, stream);
      CHECK_OR(drv.streamSync(stream) == 0, 13);
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += inputOf(p, round, i);
        if (out[i] != want) {
          fprintf(stderr, "rank %d round %d element %zu: %f, expected %f\n", r, round, i, out[i], want);
          return ncclInternalError;
        }
      }
    }
    if (variant == 4) {  // NCCL's requirements of ncclLsaCopyTma, which braid checks
      braid::Status st = braid_emu::launch(cfgOf(1, kBlock, "lsaTmaMisuse"), [&] { lsaTmaMisuse(recvWin, dc); });
      CHECK_OR(!st.isOk() && st.message().find("count * sizeof(T) must be a multiple of 16") != std::string::npos, 16);
    }
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 14);
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclInvalidArgument, 14);  // once only
    CHECK_OR(ncclCommWindowDeregister(comm, sendWin) == ncclSuccess, 15);
    CHECK_OR(ncclCommWindowDeregister(comm, recvWin) == ncclSuccess, 15);
    CHECK_OR(ncclMemFree(send) == ncclSuccess && ncclMemFree(recv) == ncclSuccess, 15);
    return ncclSuccess;
  }
}

TEST_F(DeviceKernels, TwoShotAllReduceOverLsaPointersIsExactAcrossLaunches) {
  constexpr int kRanks = 4;
  auto res = runCudaRanks(
      kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) { return twoShotRounds(r, kRanks, comm, stream); });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// The same all-reduce from NCCL 2.29's building blocks, every form of them.
TEST_F(DeviceKernels, ReduceCopyBuildingBlocksAllReduceExactly) {
  for (int variant = 0; variant < 5; ++variant) {
    auto res = runCudaRanks(
        3, [&](int r, ncclComm_t comm, cudaStream_t stream) { return twoShotRounds(r, 3, comm, stream, variant); });
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "variant " << variant << " rank " << r;
  }
}

TEST(DeviceBlocks, LocalReduceAndCopyForms) {
  constexpr int kSrc = 3, kDst = 2, kCount = 300;
  constexpr size_t kStride = 320;
  std::vector<float> src(kSrc * kStride), sum(kCount, -1), out1(kDst * kStride, -1), out2(kDst * kStride, -1),
      out3(kDst * kStride, -1);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 101);
  braid::Status st = braid_emu::launch(cfgOf(1, 64, "localBlocks"), [&] {
    localBlocks(kSrc, src.data(), kStride, sum.data(), kDst, out1.data(), out2.data(), out3.data(), kCount);
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int i = 0; i < kCount; ++i) {
    float want = 0;
    for (int k = 0; k < kSrc; ++k) want += src[static_cast<size_t>(k) * kStride + static_cast<size_t>(i)];
    ASSERT_EQ(sum[static_cast<size_t>(i)], want) << i;
    for (int k = 0; k < kDst; ++k) {
      const size_t at = static_cast<size_t>(k) * kStride + static_cast<size_t>(i);
      ASSERT_EQ(out1[at], want) << k << " " << i;
      ASSERT_EQ(out2[at], want) << k << " " << i;
      ASSERT_EQ(out3[at], want) << k << " " << i;
    }
  }
  EXPECT_EQ(out1[kCount], -1) << "written past count";
}

// Every coop type (CTA, warp, 8-lane tile, thread, lanes, a span of two warps) through barriers and symmetric
// pointers into a resource buffer, several rounds each.
TEST_F(DeviceKernels, EveryCoopTypeBarriersAndSymmetricPointersIntoAResourceBuffer) {
  constexpr int kRanks = 3, kGrid = 2, kBlock = 128, kRounds = 3;
  constexpr int kMaxGroups = kGrid * kBlock;  // one per thread
  auto res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const Driver& drv = Driver::get();
    ncclDevResourceHandle scratch = 77;
    ncclDevResourceRequirements buf{};
    buf.bufferSize = kMaxGroups * kRanks * sizeof(int);
    buf.bufferAlign = 256;
    buf.outBufferHandle = &scratch;
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = kMaxGroups;
    reqs.resourceRequirementsList = &buf;
    ncclDevComm dc{};
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
      return ncclInternalError;
    }
    // The buffer comes after the barriers, at its alignment.
    CHECK_OR(scratch != 77 && ncclGetResourceBufferOffset(scratch) % 256 == 0, 12);
    CHECK_OR(ncclGetResourceBufferOffset(scratch) >= ncclBraidLsaBarrierBytes_(kMaxGroups, kRanks), 12);
    int* out = static_cast<int*>(drv.alloc(kMaxGroups * kRanks * sizeof(int)));
    std::vector<int> got(kMaxGroups * kRanks);
    for (int kindAny = 0; kindAny < 2 * kStampGroupKinds; ++kindAny) {
      const int kind = kindAny % kStampGroupKinds;
      const bool any = kindAny >= kStampGroupKinds;  // the same groups as ncclCoopAny
      const int groups = kGrid * stampGroupsPerCta(kind, kBlock);
      for (int round = 0; round < kRounds; ++round) {
        braid::Status st = braid_emu::launch(cfgOf(kGrid, kBlock, "lsaStamps"),
                                             [&] { lsaStamps(kind, any, dc, scratch, round, out); });
        if (!st.isOk()) {
          fprintf(stderr, "rank %d kind %d any %d: %s\n", r, kind, any ? 1 : 0, st.message().c_str());
          return ncclInternalError;
        }
        drv.copy(got.data(), out, got.size() * sizeof(int), stream);
        CHECK_OR(drv.streamSync(stream) == 0, 13);
        for (int g = 0; g < groups; ++g) {
          for (int p = 0; p < kRanks; ++p) {
            const int want = round * 1000 + p * 10 + g;
            if (got[static_cast<size_t>(g * kRanks + p)] != want) {
              fprintf(stderr, "rank %d kind %d any %d round %d group %d peer %d: %d, expected %d\n", r, kind,
                      any ? 1 : 0, round, g, p, got[static_cast<size_t>(g * kRanks + p)], want);
              return ncclInternalError;
            }
          }
        }
      }
    }
    drv.memFree(reinterpret_cast<unsigned long long>(out));
    return ncclDevCommDestroy(comm, &dc);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// LL all-to-all sessions: multi-slot values, doubles and recvReduce across epochs and launches (the session resumes
// its epoch), from a fresh buffer and across the 32-bit epoch wrap (headers set just below it).
int llRounds(int r, ncclComm_t comm, cudaStream_t stream, uint32_t startEpoch) {
  constexpr int kRanks = 3, kGrid = 2, kBlock = 64;
  const Driver& drv = Driver::get();
  const int slots = ncclLLA2ACalcSlots(3 * kRanks, static_cast<int>(sizeof(LlTriple)));
  if (slots != 6 * kRanks) return 10;
  ncclLLA2AHandle h{};
  ncclDevResourceRequirements req{};
  if (ncclLLA2ACreateRequirement(kGrid, slots, &h, &req) != ncclSuccess) return 11;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.resourceRequirementsList = &req;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
    return 12;
  }
  if (startEpoch != 0) {
    void* base = nullptr;
    if (ncclWinGetUserPtr(comm, dc.resourceWindow, &base) != ncclSuccess) return 13;
    for (int b = 0; b < kGrid; ++b) {
      char* header = static_cast<char*>(base) + ncclGetResourceBufferOffset(h.bufHandle) +
                     static_cast<size_t>(b) * (1 + 2 * static_cast<size_t>(slots)) * 16;
      drv.copy(header, &startEpoch, sizeof(startEpoch), stream);
    }
    if (drv.streamSync(stream) != 0) return 13;
    if (ncclAllReduce(base, base, 1, ncclInt8, ncclMax, comm, stream) != ncclSuccess ||  // every header is set
        drv.streamSync(stream) != 0) {
      return 13;
    }
  }
  constexpr int kRoundsPerLaunch = 7, kLaunches = 3;
  const size_t perRound = static_cast<size_t>(kGrid) * 5 * kRanks;
  long long* out = static_cast<long long*>(drv.alloc(kRoundsPerLaunch * perRound * sizeof(long long)));
  std::vector<long long> got(kRoundsPerLaunch * perRound);
  for (int l = 0; l < kLaunches; ++l) {
    const int first = l * kRoundsPerLaunch;
    braid::Status st =
        braid_emu::launch(cfgOf(kGrid, kBlock, "llExchange"), [&] { llExchange(dc, h, first, kRoundsPerLaunch, out); });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d: %s\n", r, st.message().c_str());
      return 14;
    }
    drv.copy(got.data(), out, got.size() * sizeof(long long), stream);
    if (drv.streamSync(stream) != 0) return 15;
    for (int k = 0; k < kRoundsPerLaunch; ++k) {
      const int round = first + k;
      for (int b = 0; b < kGrid; ++b) {
        int sum = 0;
        for (int q = 0; q < kRanks; ++q) sum += round * 100 + 7 * q + b;
        for (int q = 0; q < kRanks; ++q) {
          const long long* v = &got[(static_cast<size_t>(k) * kGrid + b) * 5 * kRanks + 5 * static_cast<size_t>(q)];
          const long long s = llStamp(round, q, r, b);
          if (v[0] != s || v[1] != -s || v[2] != 3 * s || v[3] != 2 * s || v[4] != sum) {
            fprintf(stderr, "rank %d round %d block %d from %d: {%lld %lld %lld %lld %lld}, expected {%lld .. %d}\n", r,
                    round, b, q, v[0], v[1], v[2], v[3], v[4], s, sum);
            return 16;
          }
        }
      }
    }
  }
  drv.memFree(reinterpret_cast<unsigned long long>(out));
  return ncclDevCommDestroy(comm, &dc) == ncclSuccess ? 0 : 17;
}

TEST_F(DeviceKernels, LlAllToAllCarriesEveryValueAcrossEpochsAndLaunches) {
  auto res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const int code = llRounds(r, comm, stream, 0);
    return code == 0 ? ncclSuccess : static_cast<ncclResult_t>(100 + code);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

TEST_F(DeviceKernels, LlAllToAllCarriesEveryValueAcrossTheEpochWrap) {
  auto res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const int code = llRounds(r, comm, stream, 0xfffffff3u);  // 21 rounds: across 0xffffffff
    return code == 0 ? ncclSuccess : static_cast<ncclResult_t>(100 + code);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// Rank 1 never syncs: rank 0's timed sync returns ncclTimeout, and an untimed wait ends when the abort word is set.
TEST_F(DeviceKernels, ABarrierNobodyJoinsTimesOutOrEndsOnAbort) {
  std::atomic<bool> done{false};  // rank 1 keeps its resource window (which rank 0's arrivals write) until then
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    const Driver& drv = Driver::get();
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 10);
    if (r == 0) {
      int* result = static_cast<int*>(drv.alloc(sizeof(int)));
      *result = -1;
      const auto t0 = std::chrono::steady_clock::now();
      braid::Status st = braid_emu::launch(cfgOf(1, 64, "lsaTimedSync"), [&] {
        lsaTimedSync(dc, 50ull * 1000 * 1000, result);  // 50 ms of the emulator's nanosecond cycles
      });
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      done.store(!st.isOk() || *result != ncclTimeout);  // a failure below must not leave rank 1 waiting
      CHECK_OR(st.isOk(), 11);
      CHECK_OR(*result == ncclTimeout, 12);
      CHECK_OR(sec >= 0.05 && sec < 30, 13);
      // An untimed wait on a communicator whose abort word is set ends (the word here is the test's own).
      uint32_t abortWord = 0;
      ncclDevComm aborting = dc;
      aborting.abortFlag = &abortWord;
      std::thread setter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        __atomic_store_n(&abortWord, 1u, __ATOMIC_RELEASE);
      });
      *result = -1;
      st = braid_emu::launch(cfgOf(1, 32, "lsaTimedSync"), [&] { lsaTimedSync(aborting, ~0ull, result); });
      setter.join();
      CHECK_OR(st.isOk(), 14);
      CHECK_OR(*result == ncclInProgress, 15);
      drv.memFree(reinterpret_cast<unsigned long long>(result));
      done.store(true);
    } else {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return ncclDevCommDestroy(comm, &dc);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// ncclFindWindow over more windows than one table chunk holds (the chain), before and after some are deregistered.
TEST_F(DeviceKernels, FindWindowFindsEveryRegisteredWindowAndNoOther) {
  constexpr int kWindows = 40;  // > one chunk of 32
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    std::vector<void*> bufs(kWindows);
    std::vector<ncclWindow_t> wins(kWindows);
    for (int i = 0; i < kWindows; ++i) {
      CHECK_OR(ncclMemAlloc(&bufs[static_cast<size_t>(i)], 4096) == ncclSuccess, 10);
      CHECK_OR(ncclCommWindowRegister(comm, bufs[static_cast<size_t>(i)], 4096, &wins[static_cast<size_t>(i)], 0) ==
                   ncclSuccess,
               11);
    }
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess && dc.windowTable != nullptr, 12);
    int local = 0;
    std::vector<const void*> ptrs;
    for (int i = 0; i < kWindows; ++i) ptrs.push_back(static_cast<char*>(bufs[static_cast<size_t>(i)]) + i * 97);
    ptrs.push_back(static_cast<char*>(bufs[0]) + 4096);  // one past the end
    ptrs.push_back(&local);                              // not a window
    std::vector<ncclWindow_t> found(ptrs.size());
    auto lookUp = [&] {
      return braid_emu::launch(cfgOf(1, 32, "lsaFindWindows"),
                               [&] { lsaFindWindows(dc, ptrs.data(), static_cast<int>(ptrs.size()), found.data()); });
    };
    CHECK_OR(lookUp().isOk(), 13);
    for (int i = 0; i < kWindows; ++i) CHECK_OR(found[static_cast<size_t>(i)] == wins[static_cast<size_t>(i)], 14);
    CHECK_OR(found[kWindows] != wins[0] && found[kWindows + 1] == nullptr, 15);
    for (int i = 0; i < kWindows; i += 3) {
      CHECK_OR(ncclCommWindowDeregister(comm, wins[static_cast<size_t>(i)]) == ncclSuccess, 16);
    }
    CHECK_OR(lookUp().isOk(), 13);
    for (int i = 0; i < kWindows; ++i) {
      CHECK_OR(found[static_cast<size_t>(i)] == (i % 3 == 0 ? nullptr : wins[static_cast<size_t>(i)]), 17);
    }
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 18);
    for (int i = 0; i < kWindows; ++i) {
      if (i % 3 != 0) CHECK_OR(ncclCommWindowDeregister(comm, wins[static_cast<size_t>(i)]) == ncclSuccess, 19);
      CHECK_OR(ncclMemFree(bufs[static_cast<size_t>(i)]) == ncclSuccess, 19);
    }
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// ncclCoopBcast from every kind of group, twice in a row (the second waits for the first's readers), 12-byte values.
TEST(DeviceCoops, BroadcastReachesEveryThreadOfItsGroup) {
  constexpr int kBlock = 128;
  for (bool any : {false, true}) {  // each kind of group, then the same groups as ncclCoopAny
    SCOPED_TRACE(any ? "as ncclCoopAny" : "as themselves");
    std::vector<LlTriple> out(2 * kStampGroupKinds * kBlock, LlTriple{7, 7, 7});
    braid::Status st = braid_emu::launch(cfgOf(1, kBlock, "coopBroadcasts"), [&] { coopBroadcasts(any, out.data()); });
    ASSERT_TRUE(st.isOk()) << st.message();
    for (int repeat = 0; repeat < 2; ++repeat) {
      for (int kind = 0; kind < kStampGroupKinds; ++kind) {
        for (int t = 0; t < kBlock; ++t) {
          const LlTriple& got = out[static_cast<size_t>((repeat * kStampGroupKinds + kind) * kBlock + t)];
          int group = 0, size = 1;
          switch (kind) {
            case kStampCta:
              size = kBlock;
              break;
            case kStampWarp:
              group = t / 32, size = 32;
              break;
            case kStampTile8:
              group = t / 8, size = 8;
              break;
            case kStampThread:
              group = t;
              break;
            case kStampLanes:
              group = t / 32, size = __builtin_popcount(kBcastLanes);
              break;
            default:
              group = t / 64, size = 64;
              break;
          }
          if (kind == kStampLanes && ((kBcastLanes >> (t % 32)) & 1u) == 0) {
            EXPECT_EQ(got.a, 7) << "a lane outside the mask was written";
            continue;
          }
          const int root = (group + 3 * repeat + 1) % size;
          const LlTriple want = bcastValue(kind, repeat, group, root);
          EXPECT_TRUE(got.a == want.a && got.b == want.b && got.c == want.c)
              << "kind " << kind << " repeat " << repeat << " thread " << t << ": {" << got.a << " " << got.b << " "
              << got.c << "}, expected {" << want.a << " " << want.b << " " << want.c << "}";
        }
      }
    }
  }
}

// Ranks in two processes: each maps the other's windows (send, receive, resource) from exported cuMem handles, so
// the descriptors hold imported addresses.
TEST(DeviceKernelsProcesses, TwoShotAllReduceAcrossProcesses) {
  // The children load the driver: CUDA initialised here would not survive their fork.
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  const std::vector<int> codes = runGpuProcesses(2, [](int r, ncclComm_t comm) {
    return onOwnStream(
        r, comm, [](int q, int n, ncclComm_t c, cudaStream_t s) { return twoShotRounds(q, n, c, s); }, 2);
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
