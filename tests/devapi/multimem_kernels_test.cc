// NVLS multicast through the device API: windows of a CUDA communicator get a multicast mapping of their own
// (src/core/windows.cc, cuda_windows.h), ncclDevCommCreate honours lsaMultimem, and kernels written as users write
// them (tests/devapi/multimem_kernels.cuh) sum through the switch with NCCL's multimem building blocks. On the strict
// fake driver, whose switch combines the bound buffers in a seeded order, and braid's CTA emulator: ranks as threads,
// one fake GPU each. Exact sums (integer-valued floats, 64-bit integers) make every order give the same bits.
#include "tests/devapi/device_shim.h"
// (the shim first: it turns on the headers' device half)
#include "tests/devapi/multimem_kernels.cuh"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/common/fake_cuda_ranks.h"
#include "tests/devapi/kernel_test_util.h"

namespace {

using namespace braid_test;

class MultimemKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    BRAID_REQUIRE_FAKE("kernels run on the CTA emulator, whose multimem accesses ask the fake driver");
    resolve_ = reinterpret_cast<braid::EmuMulticastFn>(dlsym(Driver::get().lib, "braidFakeCudaResolveMulticast"));
    ASSERT_NE(resolve_, nullptr);
  }
  void TearDown() override {
    for (const char* v : {"NCCL_NVLS_ENABLE", "BRAID_FAKE_CUDA_NO_MULTICAST", "BRAID_NVLS_OBJECTS"}) unsetenv(v);
  }

 public:
  // A launch on `device` whose multimem accesses resolve through the fake driver, as its own launches do.
  braid::EmuLaunchConfig cfgOn(int device, int grid, const char* name) const {
    braid::EmuLaunchConfig cfg = cfgOf(grid, 32, name);
    cfg.multicast = resolve_;
    cfg.deviceOrdinal = device;
    return cfg;
  }
  braid::EmuMulticastFn resolve_ = nullptr;
};

template <typename T>
T inputOf(int rank, int round, size_t i) {
  return static_cast<T>((rank + 1) * 7 + round * 3 + static_cast<int>(i % 89));
}

// Rounds of one- and two-shot all-reduce of kCount T through the switch on kRanks ranks, every element checked.
template <typename T>
ncclResult_t multimemRounds(const MultimemKernels& t, int r, int kRanks, ncclComm_t comm, cudaStream_t stream) {
  constexpr int kGrid = 2, kRounds = 2;
  constexpr size_t kCount = 1001;  // not a multiple of the ranks' shares
  const Driver& drv = Driver::get();
  const size_t bytes = kCount * sizeof(T);
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  CHECK_OR(ncclCommQueryProperties(comm, &props) == ncclSuccess && props.multimemSupport, 9);
  void *send = nullptr, *recv = nullptr;
  CHECK_OR(ncclMemAlloc(&send, bytes) == ncclSuccess && ncclMemAlloc(&recv, bytes) == ncclSuccess, 10);
  ncclWindow_t sendWin = nullptr, recvWin = nullptr;
  CHECK_OR(ncclCommWindowRegister(comm, send, bytes, &sendWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 11);
  CHECK_OR(ncclCommWindowRegister(comm, recv, bytes, &recvWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 11);
  ncclTeamRequirements team{};
  ncclMultimemHandle teamHandle{};
  team.team = ncclTeam{kRanks, r, 1};  // the LSA team, asked for by a team requirement too
  team.multimem = true;
  team.outMultimemHandle = &teamHandle;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = kGrid;
  reqs.lsaMultimem = true;
  reqs.teamRequirementsList = &team;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
    return ncclInternalError;
  }
  CHECK_OR(dc.lsaMultimem.mcBasePtr != nullptr && teamHandle.mcBasePtr == dc.lsaMultimem.mcBasePtr, 12);
  void* mc[2] = {nullptr, nullptr};
  CHECK_OR(braid_emu::launch(t.cfgOn(r, 1, "multimemPointer"), [&] { multimemPointer(sendWin, dc, &mc[0]); }).isOk(),
           12);
  CHECK_OR(braid_emu::launch(t.cfgOn(r, 1, "multimemPointer"), [&] { multimemPointer(recvWin, dc, &mc[1]); }).isOk(),
           12);
  CHECK_OR(mc[0] != nullptr && mc[1] != nullptr && mc[0] != mc[1] && mc[0] != send, 12);
  // The host queries (NCCL 2.29) give what kernels get, and refuse an offset past the mapping.
  void *hostMc = nullptr, *viaHandle = nullptr, *lsa = nullptr;
  CHECK_OR(
      ncclGetLsaMultimemDevicePointer(sendWin, 64, &hostMc) == ncclSuccess && hostMc == static_cast<char*>(mc[0]) + 64,
      16);
  CHECK_OR(ncclGetMultimemDevicePointer(recvWin, 8, dc.lsaMultimem, &viaHandle) == ncclSuccess &&
               viaHandle == static_cast<char*>(mc[1]) + 8,
           16);
  CHECK_OR(ncclGetLsaMultimemDevicePointer(sendWin, bytes, &hostMc) == ncclInvalidArgument, 16);
  CHECK_OR(ncclGetLsaDevicePointer(sendWin, 0, r, &lsa) == ncclSuccess && lsa == send, 16);
  std::vector<T> in(kCount), out(kCount);
  for (int round = 0; round < kRounds; ++round) {
    for (bool oneShot : {true, false}) {
      // Inputs differ between the one- and two-shot runs, and the receive buffers start stale: a form that wrote
      // nothing fails.
      for (size_t i = 0; i < kCount; ++i) in[i] = inputOf<T>(r, round * 2 + (oneShot ? 0 : 1), i);
      drv.copy(send, in.data(), bytes, stream);
      std::vector<T> stale(kCount, static_cast<T>(-1));
      drv.copy(recv, stale.data(), bytes, stream);
      CHECK_OR(drv.streamSync(stream) == 0, 13);
      braid::Status st = braid_emu::launch(t.cfgOn(r, kGrid, "multimemAllReduce"),
                                           [&] { multimemAllReduce<T>(oneShot, sendWin, recvWin, kCount, dc); });
      if (!st.isOk()) {
        fprintf(stderr, "rank %d: %s\n", r, st.message().c_str());
        return ncclInternalError;
      }
      drv.copy(out.data(), recv, bytes, stream);
      CHECK_OR(drv.streamSync(stream) == 0, 13);
      for (size_t i = 0; i < kCount; ++i) {
        T want = 0;
        for (int p = 0; p < kRanks; ++p) want += inputOf<T>(p, round * 2 + (oneShot ? 0 : 1), i);
        if (out[i] != want) {
          fprintf(stderr, "rank %d round %d %s element %zu: %f, expected %f\n", r, round,
                  oneShot ? "one-shot" : "two-shot", i, static_cast<double>(out[i]), static_cast<double>(want));
          return ncclInternalError;
        }
      }
    }
  }
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 14);
  CHECK_OR(ncclCommWindowDeregister(comm, sendWin) == ncclSuccess, 15);
  CHECK_OR(ncclCommWindowDeregister(comm, recvWin) == ncclSuccess, 15);
  CHECK_OR(ncclMemFree(send) == ncclSuccess && ncclMemFree(recv) == ncclSuccess, 15);
  return ncclSuccess;
}

// What goes through the switch when a kernel asks for multimem besides the building blocks: the LSA barrier's
// arrival and the LL all-to-all's broadcast. Rounds of stamps are exact, and the switch is used exactly when the device
// communicator has multicast (the fake counts its resolutions).
enum class SwitchUse { kBarrier, kLlBcast };
ncclResult_t switchRounds(const MultimemKernels& t, int r, ncclComm_t comm, SwitchUse use, bool multicast) {
  constexpr int kRounds = 6;
  auto resolves =
      reinterpret_cast<unsigned long long (*)()>(dlsym(Driver::get().lib, "braidFakeCudaMulticastResolves"));
  CHECK_OR(resolves != nullptr, 40);
  ncclDevResourceHandle scratch = 0;
  ncclDevResourceRequirements buf{};
  ncclLLA2AHandle ll{};
  if (use == SwitchUse::kBarrier) {
    buf.bufferSize = sizeof(int);
    buf.outBufferHandle = &scratch;
  } else {
    CHECK_OR(ncclLLA2ACreateRequirement(1, ncclLLA2ACalcSlots(ncclTeamLsa(comm).nRanks, sizeof(int)), &ll, &buf) ==
                 ncclSuccess,
             40);
  }
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;  // the barrier kernel syncs on index 1: its slot is past index 0's
  reqs.lsaMultimem = multicast;
  reqs.resourceRequirementsList = &buf;
  ncclDevComm dc{};
  CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 41);
  CHECK_OR((dc.lsaMultimem.mcBasePtr != nullptr) == multicast, 41);
  std::vector<int> out(static_cast<size_t>(kRounds * dc.lsaSize), -1);
  const unsigned long long before = resolves();
  braid::Status st = braid_emu::launch(t.cfgOn(r, 1, "switchRounds"), [&] {
    if (use == SwitchUse::kBarrier) {
      multimemBarrierStamps(dc, scratch, kRounds, out.data());
    } else {
      multimemLlBcast(dc, ll, kRounds, out.data());
    }
  });
  if (!st.isOk()) {
    fprintf(stderr, "rank %d: %s\n", r, st.message().c_str());
    return ncclInternalError;
  }
  const unsigned long long after = resolves();
  for (int round = 0; round < kRounds; ++round) {
    for (int p = 0; p < dc.lsaSize; ++p) {
      CHECK_OR(out[static_cast<size_t>(round * dc.lsaSize + p)] == round * 100 + p, 42);
    }
  }
  CHECK_OR(multicast ? after > before : after == before, 43);
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 44);
  return ncclSuccess;
}

TEST_F(MultimemKernels, BarriersAndLlBroadcastsGoThroughTheSwitchWhereThereIsOne) {
  for (SwitchUse use : {SwitchUse::kBarrier, SwitchUse::kLlBcast}) {
    for (bool multicast : {true, false}) {
      auto res = runCudaRanks(
          3, [&](int r, ncclComm_t comm, cudaStream_t) { return switchRounds(*this, r, comm, use, multicast); });
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess)
            << (use == SwitchUse::kBarrier ? "barrier" : "LL broadcast") << (multicast ? " with" : " without")
            << " multicast, rank " << r;
      }
    }
  }
}

TEST_F(MultimemKernels, AllReduceThroughTheSwitchIsExact) {
  constexpr int kRanks = 4;
  auto f = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    return multimemRounds<float>(*this, r, kRanks, comm, stream);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(f[static_cast<size_t>(r)], ncclSuccess) << "float, rank " << r;
  auto u = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    return multimemRounds<int64_t>(*this, r, 3, comm, stream);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(u[static_cast<size_t>(r)], ncclSuccess) << "int64, rank " << r;
}

// Every mixed building block (LSA sources into multicast destinations and the reverse, in their ncclSymPtr,
// raw-pointer and lambda forms, and the generic reduction) as a two-shot all-reduce: exact sums (and the max, form
// 7) in every member's receive buffer, which starts stale, for 32-bit floats and 64-bit integers.
template <typename T>
ncclResult_t mixedRounds(const MultimemKernels& t, int r, int kRanks, ncclComm_t comm, cudaStream_t stream) {
  constexpr int kForms = 9;
  constexpr size_t kCount = 1001;  // shares of unequal length
  const Driver& drv = Driver::get();
  const size_t bytes = kCount * sizeof(T);
  void *send = nullptr, *recv = nullptr;
  CHECK_OR(ncclMemAlloc(&send, bytes) == ncclSuccess && ncclMemAlloc(&recv, bytes) == ncclSuccess, 60);
  ncclWindow_t sendWin = nullptr, recvWin = nullptr;
  CHECK_OR(ncclCommWindowRegister(comm, send, bytes, &sendWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 61);
  CHECK_OR(ncclCommWindowRegister(comm, recv, bytes, &recvWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 61);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.lsaMultimem = true;
  ncclDevComm dc{};
  CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess && dc.lsaMultimem.mcBasePtr != nullptr, 62);
  std::vector<T> in(kCount), out(kCount), stale(kCount, static_cast<T>(-1));
  for (int form = 0; form < kForms; ++form) {
    for (size_t i = 0; i < kCount; ++i) in[i] = inputOf<T>(r, form, i);
    drv.copy(send, in.data(), bytes, stream);
    drv.copy(recv, stale.data(), bytes, stream);
    CHECK_OR(drv.streamSync(stream) == 0, 63);
    braid::Status st = braid_emu::launch(t.cfgOn(r, 1, "mixedAllReduce"),
                                         [&] { mixedAllReduce<T>(form, sendWin, recvWin, kCount, dc); });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d form %d: %s\n", r, form, st.message().c_str());
      return ncclInternalError;
    }
    drv.copy(out.data(), recv, bytes, stream);
    CHECK_OR(drv.streamSync(stream) == 0, 64);
    for (size_t i = 0; i < kCount; ++i) {
      T want = form == 7 ? inputOf<T>(0, form, i) : 0;
      for (int p = 0; p < kRanks; ++p) {
        const T v = inputOf<T>(p, form, i);
        want = form == 7 ? (want < v ? v : want) : want + v;
      }
      if (out[i] != want) {
        fprintf(stderr, "rank %d form %d element %zu: %f, expected %f\n", r, form, i, static_cast<double>(out[i]),
                static_cast<double>(want));
        return ncclInternalError;
      }
    }
  }
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 65);
  CHECK_OR(ncclCommWindowDeregister(comm, sendWin) == ncclSuccess, 66);
  CHECK_OR(ncclCommWindowDeregister(comm, recvWin) == ncclSuccess, 66);
  CHECK_OR(ncclMemFree(send) == ncclSuccess && ncclMemFree(recv) == ncclSuccess, 66);
  return ncclSuccess;
}

TEST_F(MultimemKernels, MixedLsaAndMultimemBuildingBlocksAllReduceExactly) {
  auto f = runCudaRanks(
      3, [&](int r, ncclComm_t comm, cudaStream_t stream) { return mixedRounds<float>(*this, r, 3, comm, stream); });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(f[static_cast<size_t>(r)], ncclSuccess) << "float, rank " << r;
  auto u = runCudaRanks(
      2, [&](int r, ncclComm_t comm, cudaStream_t stream) { return mixedRounds<int64_t>(*this, r, 2, comm, stream); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(u[static_cast<size_t>(r)], ncclSuccess) << "int64, rank " << r;
}

// Half and bf16 through the switch and through LSA pointers, on 3 ranks. Inputs are small integers, exact in both
// types in any order; the LSA and switch sums of 2048 + 1 + 1 (half) and 256 + 1 + 1 (bf16) are exact only when they
// accumulate in float (in the type itself each + 1 rounds back down). Element windows of 64: every (first, count) of
// the list leaves elements alone in their 32-bit words at one end or both; the receive window's elements outside the
// copied range must keep their old value.
// The headers' own widening and rounding of half and bf16 (reduce_copy.h).
template <typename T>
float toF(T v) {
  return nccl_braid_::Acc<T>::in(v);
}
template <typename T>
T fromF(float f) {
  return nccl_braid_::Acc<T>::out(f);
}

template <typename T>
ncclResult_t halfRounds(const MultimemKernels& t, int r, int kRanks, ncclComm_t comm, cudaStream_t stream) {
  constexpr size_t kElems = 64;
  const Driver& drv = Driver::get();
  const size_t bytes = kElems * sizeof(T);
  void *send = nullptr, *recv = nullptr, *out = nullptr, *src = nullptr;
  CHECK_OR(ncclMemAlloc(&send, bytes) == ncclSuccess && ncclMemAlloc(&recv, bytes) == ncclSuccess, 50);
  CHECK_OR(ncclMemAlloc(&out, bytes) == ncclSuccess && ncclMemAlloc(&src, bytes) == ncclSuccess, 50);
  ncclWindow_t sendWin = nullptr, recvWin = nullptr;
  CHECK_OR(ncclCommWindowRegister(comm, send, bytes, &sendWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 51);
  CHECK_OR(ncclCommWindowRegister(comm, recv, bytes, &recvWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 51);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.lsaMultimem = true;
  ncclDevComm dc{};
  CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess && dc.lsaMultimem.mcBasePtr != nullptr, 52);
  // Values every type holds exactly, and whose sums it holds: e5m2 has two mantissa bits (9 is not one of its values).
  const size_t mod = std::is_same<T, __nv_fp8_e5m2>::value ? 3 : 5;
  auto value = [mod](int rank, int round, size_t k) {
    return static_cast<float>((rank + 1) * static_cast<int>((k + static_cast<size_t>(round)) % mod));
  };
  const bool fp8 = sizeof(T) == 1;
  auto copied = [fp8](size_t k) { return fp8 ? static_cast<float>(k % 8) : 100.0f + static_cast<float>(k); };
  const int writer = 1;
  const std::pair<size_t, size_t> ranges[] = {{0, 64}, {1, 7}, {2, 5}, {3, 6}, {1, 1}, {0, 1},
                                              {63, 1}, {5, 0}, {3, 2}, {2, 9}, {1, 3}, {4, 60}};
  int round = 0;
  for (const auto& range : ranges) {
    const size_t first = range.first, count = range.second;
    std::vector<T> in(kElems), stale(kElems, fromF<T>(-1)), copy(kElems);
    for (size_t k = 0; k < kElems; ++k) {
      in[k] = fromF<T>(value(r, round, k));
      copy[k] = fromF<T>(copied(k));
    }
    drv.copy(send, in.data(), bytes, stream);
    drv.copy(recv, stale.data(), bytes, stream);
    drv.copy(out, stale.data(), bytes, stream);
    drv.copy(src, copy.data(), bytes, stream);
    CHECK_OR(drv.streamSync(stream) == 0, 53);
    braid::Status st = braid_emu::launch(t.cfgOn(r, 1, "multimemHalf"), [&] {
      multimemHalf<T>(sendWin, recvWin, first, count, static_cast<T*>(out), static_cast<T*>(src), writer, dc);
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d first %zu count %zu: %s\n", r, first, count, st.message().c_str());
      return ncclInternalError;
    }
    std::vector<T> sums(kElems), got(kElems);
    drv.copy(sums.data(), out, bytes, stream);
    drv.copy(got.data(), recv, bytes, stream);
    CHECK_OR(drv.streamSync(stream) == 0, 53);
    for (size_t k = 0; k < count; ++k) {
      float want = 0;
      for (int p = 0; p < kRanks; ++p) want += value(p, round, first + k);
      if (toF(sums[k]) != want) {
        fprintf(stderr, "rank %d first %zu count %zu: sum %zu is %f, expected %f\n", r, first, count, k,
                static_cast<double>(toF(sums[k])), static_cast<double>(want));
        return ncclInternalError;
      }
    }
    for (size_t k = 0; k < kElems; ++k) {
      const bool inside = k >= first && k < first + count;
      const float want = inside ? copied(k - first) : -1.0f;
      if (toF(got[k]) != want) {
        fprintf(stderr, "rank %d first %zu count %zu: received element %zu is %f, expected %f\n", r, first, count, k,
                static_cast<double>(toF(got[k])), static_cast<double>(want));
        return ncclInternalError;
      }
    }
    ++round;
  }
  // Sums that are exact only in float: through LSA pointers and through the switch.
  // The largest value where + 1 rounds away in T itself (fp8: summed in f16 through the switch, in f32 by LSA).
  const float big = std::is_same<T, half>::value            ? 2048.0f
                    : std::is_same<T, __nv_bfloat16>::value ? 256.0f
                    : std::is_same<T, __nv_fp8_e4m3>::value ? 16.0f
                                                            : 8.0f;
  std::vector<T> in(kElems, fromF<T>(r == 0 ? big : 1.0f)), sums(kElems);
  drv.copy(send, in.data(), bytes, stream);
  CHECK_OR(drv.streamSync(stream) == 0, 54);
  for (bool viaSwitch : {false, true}) {
    braid::Status st = braid_emu::launch(t.cfgOn(r, 1, "halfSums"), [&] {
      if (viaSwitch) {
        multimemHalf<T>(sendWin, recvWin, 0, kElems, static_cast<T*>(out), static_cast<T*>(src), -1, dc);
      } else {
        lsaSumInto<T>(sendWin, static_cast<T*>(out), kElems, dc);
      }
    });
    CHECK_OR(st.isOk(), 55);
    drv.copy(sums.data(), out, bytes, stream);
    CHECK_OR(drv.streamSync(stream) == 0, 55);
    for (size_t k = 0; k < kElems; ++k) {
      if (toF(sums[k]) != big + 2.0f) {
        fprintf(stderr, "rank %d %s: element %zu is %f, expected %f\n", r, viaSwitch ? "switch" : "LSA", k,
                static_cast<double>(toF(sums[k])), static_cast<double>(big + 2.0f));
        return ncclInternalError;
      }
    }
  }
  // The raw-pointer form cannot store an element alone in its word: a kernel error that says so. One element only, so
  // that no word goes through the switch: a store into a peer that has already deregistered its window would fault
  // first (this launch is not bracketed by barriers).
  braid::Status st = braid_emu::launch(t.cfgOn(r, 1, "multimemHalfRawCopy"),
                                       [&] { multimemHalfRawCopy<T>(recvWin, static_cast<T*>(src), 1, dc); });
  if (st.isOk() || st.message().find("alone in its 32-bit word") == std::string::npos) {
    fprintf(stderr, "rank %d: the raw copy of a lone element: %s\n", r, st.isOk() ? "no trap" : st.message().c_str());
    return static_cast<ncclResult_t>(56);
  }
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 57);
  CHECK_OR(ncclCommWindowDeregister(comm, sendWin) == ncclSuccess, 57);
  CHECK_OR(ncclCommWindowDeregister(comm, recvWin) == ncclSuccess, 57);
  for (void* p : {send, recv, out, src}) CHECK_OR(ncclMemFree(p) == ncclSuccess, 57);
  return ncclSuccess;
}

// halfRounds<T> on 3 ranks, each rank's result expected ncclSuccess (`name` says which type failed).
template <typename T>
void narrowRoundsOnThreeRanks(const MultimemKernels& t, const char* name) {
  constexpr int kRanks = 3;
  auto res = runCudaRanks(
      kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) { return halfRounds<T>(t, r, kRanks, comm, stream); });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << name << ", rank " << r;
}

TEST_F(MultimemKernels, HalfAndBf16GoByPairsWithLoneElementsAtTheEdges) {
  narrowRoundsOnThreeRanks<half>(*this, "half");
  narrowRoundsOnThreeRanks<__nv_bfloat16>(*this, "bf16");
}

// fp8 (e4m3, e5m2) by the switch's quads (.acc::f16), with one to three lone elements at either end; the LSA forms
// sum in float.
TEST_F(MultimemKernels, Fp8GoByQuadsWithLoneElementsAtTheEdges) {
  narrowRoundsOnThreeRanks<__nv_fp8_e4m3>(*this, "e4m3");
  narrowRoundsOnThreeRanks<__nv_fp8_e5m2>(*this, "e5m2");
}

// Without multicast (NCCL_NVLS_ENABLE=0, or a GPU without NVSwitch) windows still register, have no multicast
// pointer, and a device communicator asking for lsaMultimem fails by name on every rank; one that does not ask works.
ncclResult_t withoutMulticast(const MultimemKernels& t, int r, ncclComm_t comm, const char* cause) {
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  CHECK_OR(ncclCommQueryProperties(comm, &props) == ncclSuccess && !props.multimemSupport, 20);
  const size_t bytes = 4096;
  void* buf = nullptr;
  CHECK_OR(ncclMemAlloc(&buf, bytes) == ncclSuccess, 21);
  ncclWindow_t win = nullptr;
  CHECK_OR(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 22);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaMultimem = true;
  ncclDevComm dc{};
  CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclInvalidUsage, 23);
  const std::string why = ncclGetLastError(comm);
  CHECK_OR(why.find("multimem") != std::string::npos && why.find(cause) != std::string::npos, 24);
  reqs.lsaMultimem = false;
  CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess && dc.lsaMultimem.mcBasePtr == nullptr, 25);
  void* mc = reinterpret_cast<void*>(1);
  CHECK_OR(braid_emu::launch(t.cfgOn(r, 1, "multimemPointer"), [&] { multimemPointer(win, dc, &mc); }).isOk(), 26);
  CHECK_OR(mc == nullptr, 26);
  mc = reinterpret_cast<void*>(1);
  CHECK_OR(ncclGetLsaMultimemDevicePointer(win, 0, &mc) == ncclSuccess && mc == nullptr, 26);
  // A multimem building block over it is a kernel error (a trap), never a silent no-op.
  std::vector<float> out(4, 0);
  braid::Status st =
      braid_emu::launch(t.cfgOn(r, 1, "multimemSumInto"), [&] { multimemSumInto(win, dc, out.data(), 4); });
  CHECK_OR(!st.isOk() && st.message().find("the source multicast pointer is null") != std::string::npos, 29);
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 27);
  CHECK_OR(ncclCommWindowDeregister(comm, win) == ncclSuccess && ncclMemFree(buf) == ncclSuccess, 28);
  return ncclSuccess;
}

TEST_F(MultimemKernels, WithoutMulticastLsaMultimemIsRefusedByName) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  auto res = runCudaRanks(
      2, [&](int r, ncclComm_t comm, cudaStream_t) { return withoutMulticast(*this, r, comm, "NCCL_NVLS_ENABLE=0"); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  unsetenv("NCCL_NVLS_ENABLE");
  setenv("BRAID_FAKE_CUDA_NO_MULTICAST", "1", 1);
  res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) {
    return withoutMulticast(*this, r, comm, "no multicast support");
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// The multicast budget: windows past BRAID_NVLS_OBJECTS register without a mapping (INFO says why) and keep working
// through their LSA pointers; deregistering one gives its object back.
TEST_F(MultimemKernels, WindowsPastTheObjectBudgetHaveNoMapping) {
  setenv("BRAID_NVLS_OBJECTS", "2", 1);  // the direct areas' object, and one window's
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    const size_t bytes = 4096;
    void *a = nullptr, *b = nullptr;
    CHECK_OR(ncclMemAlloc(&a, bytes) == ncclSuccess && ncclMemAlloc(&b, bytes) == ncclSuccess, 30);
    ncclWindow_t wa = nullptr, wb = nullptr;
    CHECK_OR(ncclCommWindowRegister(comm, a, bytes, &wa, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 31);
    CHECK_OR(ncclCommWindowRegister(comm, b, bytes, &wb, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 31);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevComm dc{};
    // The resource window is past the budget too: no multimem for this device communicator.
    reqs.lsaMultimem = true;
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclInvalidUsage, 32);
    CHECK_OR(std::string(ncclGetLastError(comm)).find("BRAID_NVLS_OBJECTS") != std::string::npos, 32);
    CHECK_OR(ncclCommWindowDeregister(comm, wa) == ncclSuccess, 33);  // its object goes
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess && dc.lsaMultimem.mcBasePtr != nullptr, 34);
    void* mc = reinterpret_cast<void*>(1);
    CHECK_OR(braid_emu::launch(cfgOn(r, 1, "multimemPointer"), [&] { multimemPointer(wb, dc, &mc); }).isOk(), 35);
    CHECK_OR(mc == nullptr, 35);  // wb was registered past the budget
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 36);
    CHECK_OR(ncclCommWindowDeregister(comm, wb) == ncclSuccess, 36);
    CHECK_OR(ncclMemFree(a) == ncclSuccess && ncclMemFree(b) == ncclSuccess, 36);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// The budget is per communicator (the "per-communicator budget"): a parent holding BRAID_NVLS_OBJECTS
// objects does not starve its split child, which gets its own direct object, a window mapping and a multimem device
// communicator; the child's count is its own, so its next window is the one past the budget.
TEST_F(MultimemKernels, TheObjectBudgetIsPerCommunicator) {
  setenv("BRAID_NVLS_OBJECTS", "3", 1);  // the direct areas' object, and two more
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    const size_t bytes = 4096;
    std::vector<void*> bufs(5, nullptr);
    for (void*& b : bufs) CHECK_OR(ncclMemAlloc(&b, bytes) == ncclSuccess, 40);
    std::vector<ncclWindow_t> wins(5, nullptr);
    // The parent at its budget: its areas' object and two windows'.
    for (int w = 0; w < 2; ++w) {
      CHECK_OR(ncclCommWindowRegister(comm, bufs[w], bytes, &wins[w], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 41);
    }
    ncclComm_t child = nullptr;
    CHECK_OR(ncclCommSplit(comm, 0, r, &child, nullptr) == ncclSuccess, 42);
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    CHECK_OR(ncclCommQueryProperties(child, &props) == ncclSuccess && props.multimemSupport, 43);
    CHECK_OR(ncclCommWindowRegister(child, bufs[2], bytes, &wins[2], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 44);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaMultimem = true;  // the resource window's object: the child's third
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(child, &reqs, &dc) == ncclSuccess && dc.lsaMultimem.mcBasePtr != nullptr, 45);
    CHECK_OR(ncclCommWindowRegister(child, bufs[3], bytes, &wins[3], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 46);
    for (int w = 2; w < 4; ++w) {
      void* mc = reinterpret_cast<void*>(1);
      CHECK_OR(braid_emu::launch(cfgOn(r, 1, "multimemPointer"), [&] { multimemPointer(wins[w], dc, &mc); }).isOk(),
               47);
      CHECK_OR((mc != nullptr) == (w == 2), 48);  // the second child window is past the child's budget
    }
    // The parent's count did not move: its next window is past its budget all the same.
    CHECK_OR(ncclCommWindowRegister(comm, bufs[4], bytes, &wins[4], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 49);
    ncclDevComm pdc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &pdc) == ncclInvalidUsage, 50);
    CHECK_OR(std::string(ncclGetLastError(comm)).find("BRAID_NVLS_OBJECTS") != std::string::npos, 50);
    CHECK_OR(ncclDevCommDestroy(child, &dc) == ncclSuccess, 51);
    for (int w = 2; w < 4; ++w) CHECK_OR(ncclCommWindowDeregister(child, wins[w]) == ncclSuccess, 51);
    CHECK_OR(ncclCommDestroy(child) == ncclSuccess, 52);
    for (int w : {0, 1, 4}) CHECK_OR(ncclCommWindowDeregister(comm, wins[w]) == ncclSuccess, 53);
    for (void* b : bufs) CHECK_OR(ncclMemFree(b) == ncclSuccess, 54);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

}  // namespace
