// CUDA graph capture of braid's collectives on the strict fake driver (tests/fake_cuda/fake_graphs.cc): a group
// issued on streams being captured goes into the user's graph (joined back, so the capture ends cleanly, in a
// capture mode that forbids allocating on the capturing thread); the graph replays any number
// of times with new inputs, interleaved with calls outside it; a group whose streams are not captured together is
// refused by name.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"

namespace {

using namespace braid_test;

class CudaGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  }
  void TearDown() override { unsetenv("NCCL_PROTO"); }
};

float input(int rank, size_t i, int replay) {
  return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3 + static_cast<size_t>(replay)) % 17);
}

// An all-reduce and an all-gather captured in one group, replayed three times with new inputs, between calls
// outside the graph (the connectors' cursors carry on across both), with LL and Simple.
TEST_F(CudaGraph, ReplaysWithNewInputsBetweenEagerCalls) {
  const Driver& drv = Driver::get();
  const Graphs g(drv.lib);
  constexpr int kRanks = 3;
  for (const char* proto : {"LL", "LL128", "Simple"}) {
    setenv("NCCL_PROTO", proto, 1);
    for (size_t count : {size_t{1000}, size_t{70000}}) {
      std::vector<ncclResult_t> res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
        const size_t bytes = count * 4;
        void* send = drv.alloc(bytes);
        void* sum = drv.alloc(bytes);
        void* gathered = drv.alloc(bytes * kRanks);
        std::vector<float> in(count), out(count), all(count * kRanks);
        auto eager = [&](int tag) {
          for (size_t i = 0; i < count; ++i) in[i] = input(r, i, 100 + tag);
          drv.copy(send, in.data(), bytes, stream);
          if (ncclAllReduce(send, sum, count, ncclFloat, ncclSum, comm, stream) != ncclSuccess) return false;
          drv.copy(out.data(), sum, bytes, stream);
          if (drv.streamSync(stream) != 0) return false;
          for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int p = 0; p < kRanks; ++p) want += input(p, i, 100 + tag);
            if (out[i] != want) return false;
          }
          return true;
        };
        if (!eager(0)) return ncclInternalError;
        // Thread-local capture mode (ranks are threads here, and in global mode another rank's allocation would
        // invalidate this capture, as on a GPU): braid must still not allocate in it on this thread, and does not.
        if (g.begin(stream, 1) != 0) return ncclSystemError;
        ncclGroupStart();
        ncclAllReduce(send, sum, count, ncclFloat, ncclSum, comm, stream);
        ncclAllGather(send, gathered, count, ncclFloat, comm, stream);
        if (ncclGroupEnd() != ncclSuccess) {
          ADD_FAILURE() << ncclGetLastError(comm);
          return ncclInternalError;
        }
        void* graph = nullptr;
        void* exec = nullptr;
        if (g.end(stream, &graph) != 0 || g.instantiate(&exec, graph, 0) != 0) return ncclSystemError;
        for (int replay = 0; replay < 3; ++replay) {
          for (size_t i = 0; i < count; ++i) in[i] = input(r, i, replay);
          drv.copy(send, in.data(), bytes, stream);
          if (g.launch(exec, stream) != 0) return ncclSystemError;
          drv.copy(out.data(), sum, bytes, stream);
          drv.copy(all.data(), gathered, bytes * kRanks, stream);
          if (drv.streamSync(stream) != 0) return ncclUnhandledCudaError;
          for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int p = 0; p < kRanks; ++p) want += input(p, i, replay);
            if (out[i] != want) {
              ADD_FAILURE() << proto << " rank " << r << " replay " << replay << " sum[" << i << "] " << out[i];
              return ncclInternalError;
            }
            for (int p = 0; p < kRanks; ++p) {
              if (all[static_cast<size_t>(p) * count + i] != input(p, i, replay)) {
                ADD_FAILURE() << proto << " rank " << r << " replay " << replay << " gathered from " << p;
                return ncclInternalError;
              }
            }
          }
          if (!eager(replay + 1)) return ncclInternalError;
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        g.execDestroy(exec);
        g.destroy(graph);
        for (void* p : {send, sum, gathered}) drv.memFree(reinterpret_cast<unsigned long long>(p));
        return async;
      });
      for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << proto << " " << count;
    }
  }
}

// A PreMulSum whose scalar is in device memory (ncclScalarDevice) is read when the kernel runs, as in NCCL: a graph
// that captured the all-reduce replays with the scalar each rank stored since. Over the ring and NVLS-style.
TEST_F(CudaGraph, ADeviceScalarIsReadWhenTheKernelRuns) {
  const Driver& drv = Driver::get();
  const Graphs g(drv.lib);
  constexpr int kRanks = 2;
  constexpr size_t kCount = 3000;
  for (const char* algo : {"", "NVLS"}) {
    if (*algo != '\0') setenv("NCCL_ALGO", algo, 1);
    std::vector<ncclResult_t> res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      void* buf = drv.alloc(kCount * 4);
      void* scalar = drv.alloc(4);
      std::vector<float> in(kCount), out(kCount);
      float hostScalar = 0;  // outlives the copy (a pageable source)
      auto setScalar = [&](float v) {
        hostScalar = v;
        drv.copy(scalar, &hostScalar, 4, stream);
      };
      auto run = [&](float base, const std::function<bool()>& call) {
        for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i + static_cast<size_t>(r)) % 7);
        drv.copy(buf, in.data(), kCount * 4, stream);
        setScalar(base + static_cast<float>(r));
        if (!call()) return false;
        drv.copy(out.data(), buf, kCount * 4, stream);
        if (drv.streamSync(stream) != 0) return false;
        for (size_t i = 0; i < kCount; ++i) {
          float want = 0;
          for (int p = 0; p < kRanks; ++p) want += static_cast<float>((i + static_cast<size_t>(p)) % 7) * (base + p);
          if (out[i] != want) {
            ADD_FAILURE() << algo << " rank " << r << " scalar base " << base << " element " << i << ": " << out[i]
                          << ", expected " << want;
            return false;
          }
        }
        return true;
      };
      ncclRedOp_t op;
      if (ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat, ncclScalarDevice, comm) != ncclSuccess) {
        return ncclInternalError;
      }
      auto allReduce = [&] { return ncclAllReduce(buf, buf, kCount, ncclFloat, op, comm, stream) == ncclSuccess; };
      if (!run(2, allReduce)) return ncclInternalError;
      void* graph = nullptr;
      void* exec = nullptr;
      if (g.begin(stream, 1) != 0 || !allReduce() || g.end(stream, &graph) != 0 ||
          g.instantiate(&exec, graph, 0) != 0) {
        return ncclSystemError;
      }
      for (float base : {3.0f, 5.0f}) {
        if (!run(base, [&] { return g.launch(exec, stream) == 0; })) return ncclInternalError;
      }
      g.execDestroy(exec);
      g.destroy(graph);
      ncclRedOpDestroy(op, comm);
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      drv.memFree(reinterpret_cast<unsigned long long>(scalar));
      return ncclSuccess;
    });
    unsetenv("NCCL_ALGO");
    for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << algo;
  }
}

// A group whose streams are captured and not captured: refused at ncclGroupEnd, naming both streams.
TEST_F(CudaGraph, AGroupsStreamsAreCapturedTogetherOrNotAtAll) {
  const Driver& drv = Driver::get();
  const Graphs g(drv.lib);
  // Another stream of the group not captured, then the legacy NULL stream (which cannot be captured at all); each on
  // communicators of their own, since a group refused at its end leaves the communicator unusable (its ranks'
  // queues no longer match).
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "the legacy stream" : "another stream");
    std::vector<std::string> msgs(2);
    std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      void* other = nullptr;
      if (!legacy) drv.streamCreate(&other, 1);
      void* a = drv.alloc(400);
      void* b = drv.alloc(400);
      if (g.begin(stream, 2) != 0) return ncclSystemError;
      ncclGroupStart();
      ncclAllReduce(a, a, 100, ncclFloat, ncclSum, comm, stream);
      ncclAllReduce(b, b, 100, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(other));
      const ncclResult_t st = ncclGroupEnd();
      msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
      void* graph = nullptr;
      g.end(stream, &graph);
      if (graph != nullptr) g.destroy(graph);
      drv.memFree(reinterpret_cast<unsigned long long>(a));
      drv.memFree(reinterpret_cast<unsigned long long>(b));
      if (other != nullptr) drv.streamDestroy(other);
      return st == ncclInvalidUsage ? ncclSuccess : ncclInternalError;
    });
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(res[r], ncclSuccess) << msgs[r];
      EXPECT_NE(msgs[r].find(legacy ? "and (nil)) are not captured together" : "are not captured together"),
                std::string::npos)
          << msgs[r];
    }
  }
}

// A capture invalidated by a call CUDA forbids during it (querying the stream): a collective on that stream is
// refused by name, not captured into a graph that can never be instantiated, and the ranks go on after.
TEST_F(CudaGraph, AnInvalidatedCaptureIsRefusedByName) {
  const Driver& drv = Driver::get();
  const Graphs g(drv.lib);
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* a = drv.alloc(400);
    if (g.begin(stream, 2) != 0) return ncclSystemError;
    g.query(stream);  // not allowed while capturing: the capture is invalidated
    const ncclResult_t st = ncclAllReduce(a, a, 100, ncclFloat, ncclSum, comm, stream);
    msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    void* graph = nullptr;
    g.end(stream, &graph);  // fails: the capture was invalidated
    if (graph != nullptr) g.destroy(graph);
    // Outside the capture the communicator still works.
    std::vector<float> v(100, 1.0f), out(100, 0);
    drv.copy(a, v.data(), 400, stream);
    const ncclResult_t after = ncclAllReduce(a, a, 100, ncclFloat, ncclSum, comm, stream);
    drv.copy(out.data(), a, 400, stream);
    const bool ok = drv.streamSync(stream) == 0 && out[99] == 2.0f;
    drv.memFree(reinterpret_cast<unsigned long long>(a));
    return st == ncclInvalidUsage && after == ncclSuccess && ok ? ncclSuccess : ncclInternalError;
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclSuccess) << msgs[r];
    EXPECT_NE(msgs[r].find("its CUDA graph capture was invalidated"), std::string::npos) << msgs[r];
  }
}

}  // namespace
