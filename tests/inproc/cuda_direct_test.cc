// NVLS-style (direct) collectives on CUDA communicators (src/backends/cuda/cuda_direct.h and the direct kernel,
// src/backends/common/direct_kernel.h), on the strict fake driver and the CTA emulator. NCCL_ALGO=NVLS forces the
// path (the model takes it only on NVLink-joined GPUs with BRAID_GPU_DIRECT_AUTO=1: the last test), so a communicator
// that could not set it up fails the call instead of quietly taking the ring. Checked bitwise: every datatype and
// reduction, one-shot and two-shot all-reduce, reduce-scatter and all-gather, in and out of place, several rounds,
// ranks sharing a GPU, ranks in two processes (the areas imported from exported cuMem handles), graph replay, and the
// failure paths.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/cuda_coll_cases.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"

namespace {

using namespace braid_test;

class CudaDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    setenv("NCCL_ALGO", "NVLS", 1);
  }
  void TearDown() override {
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_P2P_DISABLE");
    unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
    unsetenv("BRAID_TIMEOUT");
  }
};

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                 ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// Every datatype with every reduction (PreMulSum with a different scalar on each rank), one-shot all-reduce and
// reduce-scatter, 3 ranks on 3 GPUs: bitwise what the host computes.
TEST_F(CudaDirect, EveryDatatypeAndReduction) {
  std::vector<Case> cases;
  for (ncclDataType_t t : kTypes) {
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, ncclNumOps}) {
      cases.push_back(Case{Kind::kAllReduce, t, op, 1000, op == ncclMax});
      cases.push_back(Case{Kind::kReduceScatter, t, op, 333, op == ncclMin});
    }
    cases.push_back(Case{Kind::kAllGather, t, ncclSum, 257, t == ncclInt8});
  }
  runAll(3, cases);
}

// Sizes: 1 element; one-shot; two-shot (above 256 KB) over several rounds of every lane, with a count no lane
// width divides; reduce-scatter and all-gather over several rounds; in and out of place; 2 and 4 ranks.
TEST_F(CudaDirect, SizesAndRounds) {
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    for (size_t count : {size_t{1}, size_t{5000}, size_t{70000}, size_t{300001}}) {
      cases.push_back(Case{Kind::kAllReduce, ncclFloat32, ncclSum, count, inPlace});
    }
    cases.push_back(Case{Kind::kAllReduce, ncclFloat16, ncclAvg, 200003, inPlace});
    for (size_t count : {size_t{1}, size_t{40000}}) {
      cases.push_back(Case{Kind::kReduceScatter, ncclFloat32, ncclSum, count, inPlace});
      cases.push_back(Case{Kind::kAllGather, ncclInt32, ncclSum, count, inPlace});
    }
  }
  runAll(2, cases);
  runAll(4, cases);
}

// Four ranks on two GPUs (two each): the same GPU's areas, and another GPU's, in one operation.
TEST_F(CudaDirect, RanksSharingAGpu) {
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  std::vector<Case> cases = {
      Case{Kind::kAllReduce, ncclFloat32, ncclSum, 3000, true},
      Case{Kind::kAllReduce, ncclBfloat16, ncclMax, 100000, false},
      Case{Kind::kReduceScatter, ncclFloat64, ncclAvg, 20000, false},
      Case{Kind::kAllGather, ncclUint8, ncclSum, 70000, true},
  };
  runAll(4, cases, [](int r) { return r / 2; });
}

// Cases for registered buffers: every collective in and out of place, one-shot and two-shot, and a PreMulSum (its
// scalar is applied while staging, so it is staged whatever the buffer).
std::vector<Case> registeredCases() {
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    for (size_t count : {size_t{1}, size_t{5000}, size_t{70000}}) {
      cases.push_back(Case{Kind::kAllReduce, ncclFloat32, ncclSum, count, inPlace});
      cases.push_back(Case{Kind::kReduceScatter, ncclBfloat16, ncclMax, count, inPlace});
      cases.push_back(Case{Kind::kAllGather, ncclInt8, ncclSum, count, inPlace});
    }
    cases.push_back(Case{Kind::kAllReduce, ncclFloat16, ncclAvg, 200003, inPlace});
    cases.push_back(Case{Kind::kAllReduce, ncclInt64, ncclNumOps, 3000, inPlace});
  }
  return cases;
}

// How many of registeredCases() read their input in place: out of place all but PreMulSum (10 of 11); in place
// the two-shot all-reduces (70000 floats, 200003 halves) and the all-gathers (3), not the one-shot all-reduces and
// reduce-scatters, whose results overwrite inputs that peers still read.
constexpr size_t kReadInPlace = 10 + 5;

// ncclMemAlloc buffers registered on 3 ranks (3 GPUs of one process): every rank's peers read its inputs in place,
// bitwise as staged, and INFO says so for each registration and operation.
TEST_F(CudaDirect, RegisteredBuffersAreReadInPlace) {
  LogCapture log("REG,COLL");
  runAll(3, registeredCases(), nullptr, Buffers::kRegistered);
  const std::string text = log.textOf(getpid());
  EXPECT_EQ(occurrences(text, "is read in place by NVLS-style collectives: 2 peer(s) of this process reach it"), 6u)
      << text;
  EXPECT_EQ(occurrences(text, "reads sendbuff"), 3 * kReadInPlace) << text;
}

// The program's own cuMem mappings, registered, are read in place as ncclMemAlloc's are.
TEST_F(CudaDirect, TheProgramsOwnCuMemBuffersAreReadInPlace) {
  LogCapture log("REG,COLL");
  runAll(3, registeredCases(), nullptr, Buffers::kProgramCuMem);
  const std::string text = log.textOf(getpid());
  EXPECT_EQ(occurrences(text, "is read in place by NVLS-style collectives: 2 peer(s) of this process reach it"), 6u)
      << text;
  EXPECT_EQ(occurrences(text, "reads sendbuff"), 3 * kReadInPlace) << text;
}

// Only rank 1 registers: its peers read its inputs in place, it reads theirs from their stages, in one operation.
TEST_F(CudaDirect, ARankAloneReadInPlaceMixesWithStagedRanks) {
  LogCapture log("COLL");
  runAll(3, registeredCases(), nullptr, Buffers::kRegistered, [](int r) { return r == 1; });
  EXPECT_EQ(occurrences(log.textOf(getpid()), "reads sendbuff"), kReadInPlace);
}

// Ranks sharing a GPU (4 ranks on 2) read each other's registrations the same way.
TEST_F(CudaDirect, RegisteredBuffersOfRanksSharingAGpu) {
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  LogCapture log("COLL");
  runAll(
      4, registeredCases(), [](int r) { return r / 2; }, Buffers::kRegistered);
  EXPECT_EQ(occurrences(log.textOf(getpid()), "reads sendbuff"), 4 * kReadInPlace);
}

// A registered cudaMalloc buffer is staged (peers cannot map it), and INFO says why.
TEST_F(CudaDirect, ARegisteredCudaMallocBufferIsStaged) {
  LogCapture log("REG,COLL");
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    const Case c{Kind::kAllReduce, ncclFloat32, ncclSum, 5000, false};
    char* a = static_cast<char*>(Driver::get().alloc(20000));
    char* b = static_cast<char*>(Driver::get().alloc(20000));
    void* h = nullptr;
    if (ncclCommRegister(comm, a, 20000, &h) != ncclSuccess) return ncclInternalError;
    const std::string e = runCase(c, r, 2, comm, stream, a, b);
    EXPECT_EQ(e, "") << "rank " << r;
    ncclCommDeregister(comm, h);
    Driver::get().memFree(reinterpret_cast<unsigned long long>(a));
    Driver::get().memFree(reinterpret_cast<unsigned long long>(b));
    return e.empty() ? ncclSuccess : ncclInternalError;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
  const std::string text = log.textOf(getpid());
  EXPECT_EQ(occurrences(text, "is staged by NVLS-style collectives: it is neither ncclMemAlloc nor cuMem memory"), 2u)
      << text;
  EXPECT_EQ(occurrences(text, "reads sendbuff"), 0u) << text;
}

// With P2P off the ranks cannot reach each other's areas: no direct collectives, and NCCL_ALGO=NVLS is refused by
// name rather than run another way.
TEST_F(CudaDirect, WithoutP2pNvlsIsRefused) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = Driver::get().alloc(4000);
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, stream);
    msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    Driver::get().streamSync(stream);
    Driver::get().memFree(reinterpret_cast<unsigned long long>(buf));
    return st;
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclInvalidUsage) << msgs[r];
    EXPECT_NE(msgs[r].find("NVLS"), std::string::npos) << msgs[r];
  }
}

// Without NCCL_ALGO the GPU path takes the ring or tree (the staged peer-pointer schedules are chosen only when
// asked, until they have run on a GPU), and the result is the same.
TEST_F(CudaDirect, NotChosenUnlessAsked) {
  unsetenv("NCCL_ALGO");
  runAll(2, {Case{Kind::kAllReduce, ncclFloat32, ncclSum, 5000, false}});
}

// A rank whose peer never comes: its kernel stops at BRAID_TIMEOUT and the error names the rank it waited for.
TEST_F(CudaDirect, AMissingPeerIsNamedAtTheDeadline) {
  setenv("BRAID_TIMEOUT", "1", 1);
  const Driver& drv = Driver::get();
  std::string msg;
  std::atomic<bool> done{false};
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = drv.alloc(4000);
    if (r == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      return ncclSuccess;
    }
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, stream);
    drv.streamSync(stream);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    msg = ncclGetLastError(comm);
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    done.store(true);
    return st == ncclSuccess && async == ncclRemoteError ? ncclSuccess : ncclInternalError;
  });
  EXPECT_EQ(res[0], ncclSuccess) << msg;
  EXPECT_NE(msg.find("braidKernelDirect on lane"), std::string::npos) << msg;
  EXPECT_NE(msg.find("waiting for rank 1"), std::string::npos) << msg;
}

// The body of GraphReplays on one kind of buffer.
void graphReplays(bool registered) {
  const Driver& drv = Driver::get();
  const Graphs g(drv.lib);
  constexpr int kRanks = 3;
  constexpr size_t kCount = 70000;  // two-shot, several rounds
  std::vector<ncclResult_t> res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    const size_t bytes = kCount * 4;
    void* send = nullptr;
    void* recv = nullptr;
    void* handles[2] = {nullptr, nullptr};
    if (registered) {
      if (ncclMemAlloc(&send, bytes) != ncclSuccess || ncclMemAlloc(&recv, bytes) != ncclSuccess ||
          ncclCommRegister(comm, send, bytes, &handles[0]) != ncclSuccess ||
          ncclCommRegister(comm, recv, bytes, &handles[1]) != ncclSuccess) {
        return ncclInternalError;
      }
    } else {
      send = drv.alloc(bytes);
      recv = drv.alloc(bytes);
    }
    std::vector<float> in(kCount), out(kCount);
    auto value = [](int rank, size_t i, int tag) {
      return static_cast<float>((i * 5 + static_cast<size_t>(rank) * 3 + static_cast<size_t>(tag)) % 19);
    };
    auto check = [&](int tag) {
      drv.copy(out.data(), recv, bytes, stream);
      if (drv.streamSync(stream) != 0) return false;
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += value(p, i, tag);
        if (out[i] != want) return false;
      }
      return true;
    };
    auto setInput = [&](int tag) {
      for (size_t i = 0; i < kCount; ++i) in[i] = value(r, i, tag);
      drv.copy(send, in.data(), bytes, stream);
    };
    setInput(0);
    if (ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess || !check(0)) {
      return ncclInternalError;
    }
    void* graph = nullptr;
    void* exec = nullptr;
    if (g.begin(stream, 1) != 0) return ncclSystemError;
    if (ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) return ncclInternalError;
    if (g.end(stream, &graph) != 0 || g.instantiate(&exec, graph, 0) != 0) return ncclSystemError;
    for (int replay = 1; replay <= 3; ++replay) {
      setInput(replay);
      if (g.launch(exec, stream) != 0 || !check(replay)) return ncclInternalError;
      setInput(10 + replay);  // an eager call between replays
      if (ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess || !check(10 + replay)) {
        return ncclInternalError;
      }
    }
    g.execDestroy(exec);
    g.destroy(graph);
    if (registered) {
      ncclCommDeregister(comm, handles[0]);
      ncclCommDeregister(comm, handles[1]);
      ncclMemFree(send);
      ncclMemFree(recv);
    } else {
      drv.memFree(reinterpret_cast<unsigned long long>(send));
      drv.memFree(reinterpret_cast<unsigned long long>(recv));
    }
    return ncclSuccess;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// A captured all-reduce replays with new inputs between eager direct calls: generations live in the areas, not in
// the captured work. On cudaMalloc buffers (staged), and on registered ncclMemAlloc ones (read in place: the
// peers' addresses are in the captured work, the buffers stay registered as long as the graph).
TEST_F(CudaDirect, GraphReplays) {
  for (bool registered : {false, true}) {
    SCOPED_TRACE(registered ? "registered ncclMemAlloc buffers" : "cudaMalloc buffers");
    graphReplays(registered);
  }
}

// Ranks in two processes, their GPUs under one switch: each maps the other's area from an exported cuMem handle.
// No fixture: the parent must not initialise CUDA before it forks.
TEST(CudaDirectProcesses, ImportEachOthersAreas) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  std::vector<int> codes = runProcesses(2, checkedAllReducesOfTwo, 120, nullptr, nullptr, [](int r) {
    if (!Driver::get().use(r)) _exit(20);
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

// Rank r of two processes: registeredCases() on registered ncclMemAlloc buffers, then once more after the first
// pair was deregistered and freed and a new pair registered (the peer unmapped the old ones), this time the
// program's own exportable cuMem memory, each buffer over two mappings (NCCL 2.29's multi-segment registration). 0,
// or 10 + the step that failed, with the reason on stderr.
int registeredCasesOfTwo(int r, ncclComm_t comm) {
  const Driver& drv = Driver::get();
  void* stream = nullptr;
  drv.streamCreate(&stream, 1);
  for (int pass = 0; pass < 2; ++pass) {
    const size_t bytes = 2 * 200003 * 8;
    void* buf[2] = {nullptr, nullptr};
    void* handle[2] = {nullptr, nullptr};
    void* made[2] = {nullptr, nullptr};
    size_t mapped[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      if (pass == 1) {
        made[i] = drv.cuMemMake(size_t{2} << 20, r, {r}, true, &mapped[i], 2);
        if (made[i] == nullptr) return 14;
        buf[i] = static_cast<char*>(made[i]) + (512 << 10);  // 0.5 to 3.7 MB: over both 2 MiB mappings
      } else if (ncclMemAlloc(&buf[i], bytes) != ncclSuccess) {
        return 11;
      }
      if (ncclCommRegister(comm, buf[i], bytes, &handle[i]) != ncclSuccess) {
        fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
        return 11;
      }
    }
    for (const Case& c : registeredCases()) {
      const std::string e = runCase(c, r, 2, comm, static_cast<cudaStream_t>(stream), static_cast<char*>(buf[0]),
                                    static_cast<char*>(buf[1]));
      if (!e.empty()) {
        fprintf(stderr, "rank %d pass %d: %s: %s\n", r, pass, describe(c).c_str(), e.c_str());
        return 12;
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (ncclCommDeregister(comm, handle[i]) != ncclSuccess) return 13;
      if (pass == 1) {
        drv.cuMemDrop(made[i], mapped[i], 2);
      } else if (ncclMemFree(buf[i]) != ncclSuccess) {
        return 13;
      }
    }
  }
  drv.streamDestroy(stream);
  return 0;
}

// Two processes register ncclMemAlloc buffers, then buffers over two cuMem mappings of their own: each maps the
// other's at registration (through its registry service), reads them in place, and unmaps them at deregistration.
TEST(CudaDirectProcesses, RegisteredBuffersAreMappedByThePeerProcess) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  LogCapture log("REG,COLL");
  std::vector<pid_t> pids;
  std::vector<int> codes = runProcesses(2, registeredCasesOfTwo, 120, &pids, nullptr, [](int r) {
    LogCapture::reopenInChild();
    if (!Driver::get().use(r)) _exit(20);
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  for (pid_t pid : pids) {
    const std::string text = log.textOf(pid);
    EXPECT_EQ(occurrences(text, "0 peer(s) of this process reach it, 1 of other processes mapped it"), 4u) << text;
    EXPECT_EQ(occurrences(text, "reads sendbuff"), 2 * kReadInPlace) << text;
    EXPECT_EQ(occurrences(text, "did not unmap"), 0u) << text;
  }
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

// The peer process cannot import the exported handle (injected failure): the registration is staged, said at INFO
// with the driver's error, and the results stay exact.
TEST(CudaDirectProcesses, APeerThatCannotMapARegistrationLeavesItStaged) {
  BRAID_REQUIRE_FAKE_NOT_LOADED("braidFakeCudaInject");
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  LogCapture log("REG,COLL");
  std::vector<pid_t> pids;
  auto fn = [](int r, ncclComm_t comm) {
    // From here on rank 1's process refuses imports; the all-reduce after keeps rank 0 from registering before.
    if (r == 1) {
      auto inject = reinterpret_cast<void (*)(const char*)>(dlsym(Driver::get().lib, "braidFakeCudaInject"));
      if (inject == nullptr) return 30;
      inject("cuMemImportFromShareableHandle=1");
    }
    void* stream = nullptr;
    Driver::get().streamCreate(&stream, 1);
    void* one = Driver::get().alloc(4);
    const bool together =
        ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(stream)) == ncclSuccess &&
        Driver::get().streamSync(stream) == 0;
    Driver::get().memFree(reinterpret_cast<unsigned long long>(one));
    Driver::get().streamDestroy(stream);
    return together ? registeredCasesOfTwo(r, comm) : 31;
  };
  std::vector<int> codes = runProcesses(2, fn, 120, &pids, nullptr, [](int r) {
    LogCapture::reopenInChild();
    if (!Driver::get().use(r)) _exit(20);
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  ASSERT_EQ(pids.size(), 2u);
  const std::string t0 = log.textOf(pids[0]);
  const std::string t1 = log.textOf(pids[1]);
  EXPECT_EQ(occurrences(t0, "is staged by NVLS-style collectives: rank 1 could not map it"), 4u) << t0;
  EXPECT_NE(t0.find("cuMemImportFromShareableHandle: CUDA_ERROR_INVALID_VALUE"), std::string::npos) << t0;
  EXPECT_EQ(occurrences(t0, "reads sendbuff"), 0u) << t0;
  EXPECT_EQ(occurrences(t1, "reads sendbuff"), 2 * kReadInPlace) << t1;  // rank 0 maps rank 1's
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

// Without NCCL_ALGO, and with BRAID_GPU_DIRECT_AUTO=1 on every rank, the selector takes the path where NCCL's
// symmetric-kernel model prices it below the FIFO path: on GPUs meshed by NVLink a small all-reduce runs NVLS-style
// (exact results), said at INFO with the model's figures. On the same GPUs under a PCIe switch the path has no price
// (NCCL runs no symmetric kernel there), and without the opt-in it has none either (it has not run on a GPU): the
// FIFO path runs, INFO saying why.
TEST(CudaDirectModel, TheSelectorTakesThePathWhereNcclsModelPricesItBelowTheFifoPath) {
  if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  BRAID_REQUIRE_FAKE("the fake GPUs' topology file");
  constexpr int kGpus = 3;
  constexpr size_t kFloats = 1024;
  struct Setup {
    bool nvlink;
    bool optIn;
    const char* why;  // null: the path is taken
  };
  for (const Setup& s : {Setup{true, true, nullptr}, Setup{false, true, "not every pair of GPUs is joined by NVLink"},
                         Setup{true, false, "BRAID_GPU_DIRECT_AUTO is not 1 on every rank"}}) {
    SCOPED_TRACE(std::string(s.nvlink ? "NVLink mesh" : "PCIe switch") + (s.optIn ? ", opted in" : ""));
    const std::string topo = writeFakeGpuTopology(false, s.nvlink);
    setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
    if (s.optIn) setenv("BRAID_GPU_DIRECT_AUTO", "1", 1);
    LogCapture log("INIT,TUNING");
    std::vector<ncclResult_t> rc = runCudaRanks(kGpus, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      std::vector<float> in(kFloats);
      for (size_t i = 0; i < kFloats; ++i) in[i] = static_cast<float>((r + 1) * (i % 7));
      return checkedAllReduce(comm, stream, in, [](size_t i) { return static_cast<float>(6 * (i % 7)); });
    });
    unsetenv("BRAID_GPU_DIRECT_AUTO");
    unsetenv("NCCL_TOPO_FILE");
    unlink(topo.c_str());
    for (int r = 0; r < kGpus; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
    const std::string text = log.textOf(getpid());
    const std::string chose = "allreduce 4096 bytes, 3 ranks: ";
    const size_t at = text.find(chose);
    ASSERT_NE(at, std::string::npos) << text;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    if (s.why == nullptr) {
      EXPECT_EQ(occurrences(text,
                            "the NVLS-style path is priced by NCCL's symmetric-kernel model (2 lanes, peer "
                            "pointers"),
                static_cast<size_t>(kGpus))
          << text;
      EXPECT_NE(line.find("-> NVLS/Simple"), std::string::npos) << line;
      EXPECT_NE(line.find("NVLS by its symmetric-kernel model"), std::string::npos) << line;
    } else {
      EXPECT_EQ(occurrences(text, std::string("the NVLS-style path is taken only when NCCL_ALGO or a tuning-file pin "
                                              "asks: ") +
                                      s.why),
                static_cast<size_t>(kGpus))
          << text;
      EXPECT_EQ(line.find("-> NVLS/"), std::string::npos) << line;
      EXPECT_NE(line.find("NVLS/Simple -1.0 us"), std::string::npos) << line;
    }
  }
}

}  // namespace
