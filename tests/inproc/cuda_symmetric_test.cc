// Symmetric-memory collectives on the CUDA backend: send and receive buffers in windows (ncclCommWindowRegister)
// that have multicast mappings of their own, at the same offsets on every rank, run through the switch on the user's
// buffers, staging nothing (src/backends/common/direct_kernel.h, DirectOpDesc::symKey). On the strict fake driver
// (its switch sums in a seeded order; it counts multimem resolutions) and the CTA emulator, ranks as threads.
// Checked: exact results for one-shot and two-shot all-reduce, reduce-scatter and all-gather, in and out of place,
// the switch used; buffers at different offsets on different ranks (not symmetric) run the ordinary rounds, still
// exact and without the switch; PreMulSum never takes it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/log_capture.h"

namespace {

using namespace braid_test;

class CudaSymmetric : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr || !Driver::get().fake) GTEST_SKIP() << "needs the fake CUDA driver";
    resolves_ = reinterpret_cast<unsigned long long (*)()>(dlsym(Driver::get().lib, "braidFakeCudaMulticastResolves"));
    ASSERT_NE(resolves_, nullptr);
    setenv("NCCL_ALGO", "NVLS", 1);
  }
  void TearDown() override { unsetenv("NCCL_ALGO"); }
  unsigned long long (*resolves_)() = nullptr;
};

enum class Coll { kAllReduce, kReduceScatter, kAllGather };

struct SymCase {
  Coll coll;
  ncclDataType_t type;  // ncclFloat32 or ncclInt32
  ncclRedOp_t op;
  size_t count;  // NCCL's count (per rank for reduce-scatter and all-gather)
  bool inPlace;
  const char* name;
};

// Two ncclMemAlloc buffers of `bytes` registered as symmetric windows (a: send, b: receive), released at scope end.
// Registration is collective: every rank builds one alike.
struct WindowPair {
  ncclComm_t comm;
  void* a = nullptr;
  void* b = nullptr;
  ncclWindow_t wa = nullptr, wb = nullptr;
  bool ok = false;
  WindowPair(ncclComm_t c, size_t bytes) : comm(c) {
    ok = ncclMemAlloc(&a, bytes) == ncclSuccess && ncclMemAlloc(&b, bytes) == ncclSuccess &&
         ncclCommWindowRegister(c, a, bytes, &wa, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess &&
         ncclCommWindowRegister(c, b, bytes, &wb, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess;
  }
  ~WindowPair() {
    if (wa != nullptr) ncclCommWindowDeregister(comm, wa);
    if (wb != nullptr) ncclCommWindowDeregister(comm, wb);
    if (a != nullptr) ncclMemFree(a);
    if (b != nullptr) ncclMemFree(b);
  }
};

// Rank r's input element i (exact in float and int32 whatever the order of the sums).
int inputOf(int r, size_t i) {
  return static_cast<int>((i * 7 + static_cast<size_t>(r) * 13) % 101) - 50;
}

// One case on n ranks; each rank's buffers lie at byte offset offsetOf(r) in its windows (ncclMemAlloc'd, registered
// with NCCL_WIN_COLL_SYMMETRIC). Every element is checked; ncclSuccess or why not.
ncclResult_t runCase(int r, int n, ncclComm_t comm, cudaStream_t stream, const SymCase& c,
                     const std::function<size_t(int)>& offsetOf) {
  const Driver& drv = Driver::get();
  const size_t es = 4;
  const size_t nIn = c.coll == Coll::kReduceScatter ? c.count * static_cast<size_t>(n) : c.count;
  const size_t nOut = c.coll == Coll::kAllGather ? c.count * static_cast<size_t>(n) : c.count;
  const size_t big = (nIn > nOut ? nIn : nOut) * es + 64 * 1024;
  WindowPair w(comm, big);
  if (!w.ok) return ncclInternalError;
  const size_t off = offsetOf(r);
  char* recv = static_cast<char*>(w.b) + off;
  char* send = static_cast<char*>(w.a) + off;
  if (c.inPlace) {
    send = c.coll == Coll::kAllGather ? recv + static_cast<size_t>(r) * c.count * es : recv;
  }
  std::vector<int32_t> in(nIn);
  std::vector<float> inF(nIn);
  for (size_t i = 0; i < nIn; ++i) {
    in[i] = inputOf(r, i);
    inF[i] = static_cast<float>(in[i]);
  }
  drv.copy(send, c.type == ncclFloat32 ? static_cast<const void*>(inF.data()) : in.data(), nIn * es, stream);
  ncclResult_t st = ncclSuccess;
  switch (c.coll) {
    case Coll::kAllReduce:
      st = ncclAllReduce(send, recv, c.count, c.type, c.op, comm, stream);
      break;
    case Coll::kReduceScatter:
      st = ncclReduceScatter(send, recv, c.count, c.type, c.op, comm, stream);
      break;
    case Coll::kAllGather:
      st = ncclAllGather(send, recv, c.count, c.type, comm, stream);
      break;
  }
  if (st != ncclSuccess) return st;
  std::vector<int32_t> out(nOut);
  drv.copy(out.data(), recv, nOut * es, stream);
  if (drv.streamSync(stream) != 0) return ncclUnhandledCudaError;
  for (size_t i = 0; i < nOut && st == ncclSuccess; ++i) {
    long long want = 0;
    if (c.coll == Coll::kAllGather) {
      want = inputOf(static_cast<int>(i / c.count), i % c.count);
    } else {
      const size_t at = c.coll == Coll::kReduceScatter ? static_cast<size_t>(r) * c.count + i : i;
      want = c.op == ncclMax ? -1000 : 0;
      for (int p = 0; p < n; ++p)
        want = c.op == ncclMax ? std::max<long long>(want, inputOf(p, at)) : want + inputOf(p, at);
    }
    float f = 0;
    memcpy(&f, &out[i], 4);
    const long long got = c.type == ncclFloat32 ? static_cast<long long>(f) : out[i];
    if (got != want) {
      ADD_FAILURE() << c.name << " rank " << r << " element " << i << ": " << got << ", expected " << want;
      st = ncclInternalError;
    }
  }
  return st;
}

const std::vector<SymCase>& cases() {
  static const std::vector<SymCase> all = {
      {Coll::kAllReduce, ncclFloat32, ncclSum, 4096, false, "one-shot all-reduce"},
      {Coll::kAllReduce, ncclFloat32, ncclSum, 300000, false, "two-shot all-reduce, rounds"},
      {Coll::kAllReduce, ncclInt32, ncclMax, 300000, true, "two-shot all-reduce in place"},
      {Coll::kReduceScatter, ncclFloat32, ncclSum, 20000, false, "reduce-scatter"},
      {Coll::kAllGather, ncclInt32, ncclSum, 20000, false, "all-gather"},
      {Coll::kAllGather, ncclFloat32, ncclSum, 12000, true, "all-gather in place"},
  };
  return all;
}

TEST_F(CudaSymmetric, WindowsAtTheSameOffsetsRunThroughTheSwitchExactly) {
  for (int n : {2, 4}) {
    for (const SymCase& c : cases()) {
      LogCapture log("COLL,NVLS");
      const unsigned long long before = resolves_();
      auto res = runCudaRanks(n, [&](int r, ncclComm_t comm, cudaStream_t s) {
        return runCase(r, n, comm, s, c, [](int) { return 256; });
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << c.name << " rank " << r;
      EXPECT_GT(resolves_(), before) << n << " ranks, " << c.name;
      EXPECT_GE(occurrences(log.textOf(getpid()), "symmetric rounds through the switch"), static_cast<size_t>(n))
          << c.name;
    }
  }
}

// NCCL 2.32's ncclConfig_t.nvlsHostMode: ncclNvlsHostModeDisableSymmetricMultimem keeps the window collectives off
// the switch on that communicator (a split of the one above with the config), which still gets them right.
TEST_F(CudaSymmetric, NvlsHostModeKeepsWindowCollectivesOffTheSwitch) {
  const SymCase c = cases().front();
  LogCapture log("COLL,NVLS");
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t s) -> ncclResult_t {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.nvlsHostMode = ncclNvlsHostModeDisableSymmetricMultimem;
    ncclComm_t child = nullptr;
    if (ncclCommSplit(comm, 0, r, &child, &cfg) != ncclSuccess) return ncclInternalError;
    const ncclResult_t st = runCase(r, 2, child, s, c, [](int) { return 256; });
    ncclCommDestroy(child);
    return st;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << c.name << " rank " << r;
  EXPECT_EQ(log.textOf(getpid()).find("symmetric rounds"), std::string::npos) << log.textOf(getpid());
}

// Different offsets on different ranks are not symmetric: the keys differ, every rank runs the ordinary rounds
// (its input read in place, as a registered buffer), exact and without the switch.
TEST_F(CudaSymmetric, BuffersAtDifferentOffsetsRunTheOrdinaryRounds) {
  for (const SymCase& c : cases()) {
    if (c.inPlace && c.coll != Coll::kAllReduce) continue;
    const unsigned long long before = resolves_();
    auto res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t s) {
      return runCase(r, 3, comm, s, c, [](int rank) { return 256 + 4096 * static_cast<size_t>(rank); });
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << c.name << " rank " << r;
    EXPECT_EQ(resolves_(), before) << c.name;
  }
}

// PreMulSum scales each rank's input by its own scalar, which the switch cannot: never symmetric (its inputs are
// staged, scaled, in the direct areas).
TEST_F(CudaSymmetric, PreMulSumIsNeverSymmetric) {
  LogCapture log("COLL,NVLS");
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const Driver& drv = Driver::get();
    const size_t count = 4096, bytes = count * 4 + 4096;
    WindowPair w(comm, bytes);
    if (!w.ok) return ncclInternalError;
    void* a = w.a;
    void* b = w.b;
    float scalar = static_cast<float>(r + 2);
    ncclRedOp_t op;
    if (ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm) != ncclSuccess) {
      return ncclInternalError;
    }
    std::vector<float> in(count, 1.0f), out(count, 0);
    drv.copy(a, in.data(), count * 4, stream);
    ncclResult_t st = ncclAllReduce(a, b, count, ncclFloat32, op, comm, stream);
    drv.copy(out.data(), b, count * 4, stream);
    if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
    for (size_t i = 0; i < count && st == ncclSuccess; ++i) {
      if (out[i] != 5.0f) st = ncclInternalError;  // 1 x 2 + 1 x 3
    }
    ncclRedOpDestroy(op, comm);
    return st;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  EXPECT_EQ(log.textOf(getpid()).find("symmetric rounds"), std::string::npos);
}

// A rank whose buffer is not in a window stages its input (key 0): no rank takes the switch, the result is exact.
TEST_F(CudaSymmetric, ARankOutsideTheWindowsTurnsItOffForAll) {
  const unsigned long long before = resolves_();
  auto res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const Driver& drv = Driver::get();
    const size_t count = 300000, bytes = count * 4;
    WindowPair w(comm, bytes);
    if (!w.ok) return ncclInternalError;
    void* a = w.a;
    void* b = w.b;
    // Rank 1 passes buffers of its own, outside any window or registration.
    void* send = r == 1 ? drv.alloc(bytes) : a;
    void* recv = r == 1 ? drv.alloc(bytes) : b;
    std::vector<float> in(count), out(count, 0);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(inputOf(r, i));
    drv.copy(send, in.data(), bytes, stream);
    ncclResult_t st = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
    drv.copy(out.data(), recv, bytes, stream);
    if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
    for (size_t i = 0; i < count && st == ncclSuccess; ++i) {
      if (out[i] != static_cast<float>(inputOf(0, i) + inputOf(1, i) + inputOf(2, i))) st = ncclInternalError;
    }
    if (r == 1) {
      drv.memFree(reinterpret_cast<unsigned long long>(send));
      drv.memFree(reinterpret_cast<unsigned long long>(recv));
    }
    return st;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  EXPECT_EQ(resolves_(), before);
}

// Several symmetric operations in one group (an average among them, divided before the stores), issued twice on one
// communicator: the keys and generations of consecutive launches do not mix.
TEST_F(CudaSymmetric, SeveralOperationsInAGroupAndAgain) {
  const unsigned long long before = resolves_();
  auto res = runCudaRanks(4, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const Driver& drv = Driver::get();
    const size_t count = 200000, bytes = 3 * count * 4;
    WindowPair w(comm, bytes);
    if (!w.ok) return ncclInternalError;
    void* a = w.a;
    void* b = w.b;
    ncclResult_t st = ncclSuccess;
    for (int iter = 0; iter < 2 && st == ncclSuccess; ++iter) {
      std::vector<float> in(3 * count), out(3 * count, -7);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(4 * (inputOf(r, i) + iter));
      drv.copy(a, in.data(), bytes, stream);
      drv.copy(b, out.data(), bytes, stream);
      char* sa = static_cast<char*>(a);
      char* sb = static_cast<char*>(b);
      ncclGroupStart();
      ncclAllReduce(sa, sb, count, ncclFloat32, ncclSum, comm, stream);
      ncclAllReduce(sa + count * 4, sb + count * 4, count, ncclFloat32, ncclAvg, comm, stream);
      ncclAllReduce(sa + 2 * count * 4, sb + 2 * count * 4, 1024, ncclFloat32, ncclSum, comm, stream);  // one-shot
      st = ncclGroupEnd();
      drv.copy(out.data(), b, bytes, stream);
      if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
      for (size_t i = 0; i < 2 * count + 1024 && st == ncclSuccess; ++i) {
        float want = 0;
        for (int p = 0; p < 4; ++p) want += static_cast<float>(4 * (inputOf(p, i) + iter));
        if (i >= count && i < 2 * count) want /= 4;
        if (out[i] != want) {
          ADD_FAILURE() << "rank " << r << " iteration " << iter << " element " << i << ": " << out[i] << ", expected "
                        << want;
          st = ncclInternalError;
        }
      }
    }
    return st;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  EXPECT_GT(resolves_(), before);
}

}  // namespace
