// The device-API kernels of tests/devapi (what CI runs on the CTA emulator over the fake driver) on real GPUs, for
// tests/gpu/run.sh: ranks as threads of this process, one per GPU (two sharing the GPU when there is one), each
// with a CUDA communicator of braid's libnccl.so.2 (ncclCommInitRank after cudaSetDevice). Checks, every value
// compared with the host's: the two-shot LSA all-reduce over windows (LSA barriers, LSA pointers); the GIN
// all-gather by puts, signals and counters on every context, and the GIN values/gets/hybrid-barrier kernel; the Flow
// ring all-reduce (NCCL 2.32's Flow device API) in each protocol and with direct sends; where
// the communicator has NVLS multicast, the multimem all-reduce and every mixed LSA/multimem building block.
// Prints "ok: ..." / "FAIL: ..." / "SKIP: ..." lines; exits with the number of failed checks.
//   nvcc -std=c++17 -arch=native -I include tests/gpu/devapi_gpu.cu -L BUILD -lnccl -Xlinker -rpath=BUILD
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../devapi/flow_kernels.cuh"
#include "../devapi/gin_kernels.cuh"
#include "../devapi/lsa_kernels.cuh"
#include "../devapi/multimem_kernels.cuh"

namespace {

struct Rank {
  int r = 0, n = 0, dev = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int failures = 0;
  std::vector<std::string> lines;
  void say(const char* kind, const std::string& what) {
    if (r == 0) lines.push_back(std::string(kind) + ": " + what);
    if (std::string(kind) == "FAIL") ++failures;
  }
};

// A window of `bytes` of ncclMemAlloc memory.
struct Win {
  void* buf = nullptr;
  ncclWindow_t win = nullptr;
};
bool makeWin(Rank& k, size_t bytes, Win* w) {
  return ncclMemAlloc(&w->buf, bytes) == ncclSuccess && cudaMemset(w->buf, 0, bytes) == cudaSuccess &&
         ncclCommWindowRegister(k.comm, w->buf, bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess &&
         w->win != nullptr;
}
void dropWin(Rank& k, Win& w) {
  (void)ncclCommWindowDeregister(k.comm, w.win);
  (void)ncclMemFree(w.buf);
}
bool done(Rank& k) {
  return cudaStreamSynchronize(k.stream) == cudaSuccess && cudaGetLastError() == cudaSuccess;
}
float inputOf(int rank, int round, size_t i) {
  return static_cast<float>((rank + 1) * 3 + round * 5 + static_cast<int>(i % 97));
}

std::string lsaTwoShot(Rank& k) {
  constexpr size_t kCount = 1 << 20;
  constexpr int kGrid = 4, kRounds = 3;
  Win send, recv;
  if (!makeWin(k, kCount * 4, &send) || !makeWin(k, kCount * 4, &recv)) return "windows";
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = kGrid;
  ncclDevComm dc{};
  if (ncclDevCommCreate(k.comm, &reqs, &dc) != ncclSuccess) return ncclGetLastError(k.comm);
  std::vector<float> in(kCount), out(kCount);
  std::string err;
  for (int round = 0; round < kRounds && err.empty(); ++round) {
    for (size_t i = 0; i < kCount; ++i) in[i] = inputOf(k.r, round, i);
    cudaMemcpyAsync(send.buf, in.data(), kCount * 4, cudaMemcpyHostToDevice, k.stream);
    lsaTwoShotAllReduce<<<kGrid, 256, 0, k.stream>>>(send.win, recv.win, kCount, dc);
    if (!done(k)) err = "kernel failed";
    cudaMemcpy(out.data(), recv.buf, kCount * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < kCount && err.empty(); ++i) {
      float want = 0;
      for (int p = 0; p < k.n; ++p) want += inputOf(p, round, i);
      if (out[i] != want) err = "round " + std::to_string(round) + " element " + std::to_string(i) + " wrong";
    }
  }
  (void)ncclDevCommDestroy(k.comm, &dc);
  dropWin(k, send);
  dropWin(k, recv);
  return err;
}

std::string ginRounds(Rank& k) {
  constexpr size_t kCount = 4099;
  constexpr int kGrid = 2, kRounds = 4;
  Win send, recv, sig;
  if (!makeWin(k, kCount * 4, &send) || !makeWin(k, kCount * 4 * static_cast<size_t>(k.n), &recv) ||
      !makeWin(k, 8 * static_cast<size_t>(k.n), &sig)) {
    return "windows";
  }
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 2;
  reqs.ginCounterCount = 2;
  reqs.worldGinBarrierCount = kGrid;
  reqs.barrierCount = 1;
  ncclDevComm dc{};
  if (ncclDevCommCreate(k.comm, &reqs, &dc) != ncclSuccess) return ncclGetLastError(k.comm);
  uint64_t* out = nullptr;
  cudaMalloc(&out, kGinOutWords * 8);
  std::vector<float> in(kCount), got(kCount * static_cast<size_t>(k.n));
  std::vector<uint64_t> words(kGinOutWords);
  std::string err;
  for (int round = 0; round < kRounds && err.empty(); ++round) {
    for (size_t i = 0; i < kCount; ++i) in[i] = inputOf(k.r, round, i);
    cudaMemcpyAsync(send.buf, in.data(), kCount * 4, cudaMemcpyHostToDevice, k.stream);
    ginAllGather<<<kGrid, 128, 0, k.stream>>>(send.win, recv.win, kCount, round, round % dc.ginContextCount, dc, out);
    if (!done(k)) err = "ginAllGather failed";
    cudaMemcpy(got.data(), recv.buf, got.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(words.data(), out, kGinOutWords * 8, cudaMemcpyDeviceToHost);
    for (int p = 0; p < k.n && err.empty(); ++p) {
      for (size_t i = 0; i < kCount; ++i) {
        if (got[static_cast<size_t>(p) * kCount + i] != inputOf(p, round, i)) {
          err = "all-gather round " + std::to_string(round) + " from " + std::to_string(p) + " wrong";
          break;
        }
      }
    }
    const uint64_t puts = static_cast<uint64_t>(k.n) * static_cast<uint64_t>(round + 1);
    if (err.empty() && (words[kGinSignal0] != puts || words[kGinCounter0] != puts)) err = "signal 0 or counter 0";
  }
  // The values, gets and hybrid-barrier kernel, one round (its signals start from zero here).
  if (err.empty()) {
    ginValuesAndGets<<<1, 128, 0, k.stream>>>(send.win, recv.win, sig.win, 0, 64, 301, 0, dc, out);
    if (!done(k)) err = "ginValuesAndGets failed";
    cudaMemcpy(words.data(), out, kGinOutWords * 8, cudaMemcpyDeviceToHost);
    const int prev = (k.r + k.n - 1) % k.n;
    if (err.empty() && (words[kGinValue] != static_cast<uint64_t>(prev) || words[kGinVaSignal] != 2 ||
                        words[kGinBefore] != 0 || words[kGinDelta] != 3 || words[kGinTimedSync] != ncclSuccess)) {
      err = "values, VA signal, shadow or timed sync";
    }
  }
  cudaFree(out);
  (void)ncclDevCommDestroy(k.comm, &dc);
  dropWin(k, send);
  dropWin(k, recv);
  dropWin(k, sig);
  return err;
}

std::string multimemForms(Rank& k) {
  constexpr size_t kCount = 1 << 16;
  Win send, recv;
  if (!makeWin(k, kCount * 4, &send) || !makeWin(k, kCount * 4, &recv)) return "windows";
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;
  reqs.lsaMultimem = true;
  ncclDevComm dc{};
  if (ncclDevCommCreate(k.comm, &reqs, &dc) != ncclSuccess) return ncclGetLastError(k.comm);
  std::vector<float> in(kCount), out(kCount);
  std::string err;
  for (int form = -1; form < 9 && err.empty(); ++form) {
    for (size_t i = 0; i < kCount; ++i) in[i] = inputOf(k.r, form + 1, i);
    cudaMemcpyAsync(send.buf, in.data(), kCount * 4, cudaMemcpyHostToDevice, k.stream);
    if (form < 0) {
      multimemAllReduce<float><<<2, 256, 0, k.stream>>>(false, send.win, recv.win, kCount, dc);
    } else {
      mixedAllReduce<float><<<1, 256, 0, k.stream>>>(form, send.win, recv.win, kCount, dc);
    }
    if (!done(k)) err = "form " + std::to_string(form) + " failed";
    cudaMemcpy(out.data(), recv.buf, kCount * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < kCount && err.empty(); ++i) {
      float want = form == 7 ? inputOf(0, form + 1, i) : 0;
      for (int p = 0; p < k.n; ++p) {
        const float v = inputOf(p, form + 1, i);
        want = form == 7 ? (want < v ? v : want) : want + v;
      }
      if (out[i] != want) err = "form " + std::to_string(form) + " element " + std::to_string(i) + " wrong";
    }
  }
  (void)ncclDevCommDestroy(k.comm, &dc);
  dropWin(k, send);
  dropWin(k, recv);
  return err;
}

// The Flow ring all-reduce of tests/devapi/flow_kernels.cuh, two launches per form (the connections resume): with one
// part, each protocol through the FIFOs and with direct sends; with two parts (rings both ways), Simple.
std::string flowRings(Rank& k, const FlowRingShape shape) {
  constexpr size_t kCount = (1 << 20) + 333;
  constexpr int kGrid = 4;
  const int workers = 2 * shape.nParts;
  Win send, recv;
  if (!makeWin(k, kCount * 4, &send) || !makeWin(k, kCount * 4, &recv)) return "windows";
  FlowRingResources res{};
  ncclDevResourceRequirements bufs[3];
  flowRingRequirements(kGrid, shape, &res, bufs);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.resourceRequirementsList = &bufs[0];
  ncclDevComm dc{};
  if (ncclDevCommCreate(k.comm, &reqs, &dc) != ncclSuccess) return ncclGetLastError(k.comm);
  ncclFlowShmem* shmem = nullptr;
  float* word = nullptr;
  cudaMalloc(&shmem, sizeof(ncclFlowShmem));
  cudaMalloc(&word, sizeof(float));
  std::vector<float> in(kCount), out(kCount);
  std::string err;
  // One GPU process: every peer is within load/store reach, so the LSA forms (the GIN-masked ones run on the emulator,
  // across hosts).
  constexpr int kLsaVariants = kFlowGinSimple;
  const int forms = shape.nParts == 1 ? 2 * kLsaVariants : 1;
  for (int form = 0; form < forms && err.empty(); ++form) {
    const int variant = form % kLsaVariants;
    const bool direct = form >= kLsaVariants;
    const int threads = 32 * (workers + shape.nParts * (variant == kFlowLL128 ? 1 : 2));
    for (int round = 0; round < 2 && err.empty(); ++round) {
      for (size_t i = 0; i < kCount; ++i) in[i] = inputOf(k.r, round + form, i);
      cudaMemcpyAsync(send.buf, in.data(), kCount * 4, cudaMemcpyHostToDevice, k.stream);
      cudaMemsetAsync(recv.buf, 0xff, kCount * 4, k.stream);
      // Every rank's buffers are ready before any kernel writes a peer's (direct sends) and read after all ended.
      (void)ncclAllReduce(word, word, 1, ncclFloat, ncclSum, k.comm, k.stream);
      flowRingKernel<<<kGrid, threads, 0, k.stream>>>(variant, dc, shape, res, send.win, recv.win, kCount, workers,
                                                      direct, shmem);
      if (!done(k)) err = "kernel failed";
      cudaMemcpy(out.data(), recv.buf, kCount * 4, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < kCount && err.empty(); ++i) {
        float want = 0;
        for (int p = 0; p < k.n; ++p) want += inputOf(p, round + form, i);
        if (out[i] != want) {
          err = "form " + std::to_string(form) + " round " + std::to_string(round) + " element " + std::to_string(i) +
                " wrong";
        }
      }
      (void)ncclAllReduce(word, word, 1, ncclFloat, ncclSum, k.comm, k.stream);
      if (!done(k)) err = "barrier failed";
    }
  }
  cudaFree(shmem);
  cudaFree(word);
  (void)ncclDevCommDestroy(k.comm, &dc);
  dropWin(k, send);
  dropWin(k, recv);
  return err;
}

void runRank(Rank& k, const ncclUniqueId& id) {
  cudaSetDevice(k.dev);
  cudaFree(nullptr);  // the context current: a CUDA communicator
  if (ncclCommInitRank(&k.comm, k.n, id, k.r) != ncclSuccess) {
    k.say("FAIL", "ncclCommInitRank");
    return;
  }
  cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking);
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  if (ncclCommQueryProperties(k.comm, &props) != ncclSuccess || !props.deviceApiSupport) {
    k.say("FAIL", "ncclCommQueryProperties: no device API support");
  } else {
    const std::string who = std::to_string(k.n) + " ranks";
    std::string e = lsaTwoShot(k);
    k.say(e.empty() ? "ok" : "FAIL",
          "device API: LSA two-shot all-reduce over windows, " + who + (e.empty() ? "" : ": " + e));
    e = flowRings(k, FlowRingShape{1, 4, 4096});
    k.say(e.empty() ? "ok" : "FAIL",
          "device API: Flow ring all-reduce (Simple, 2 slots, LL, LL128; FIFO and direct), " + who +
              (e.empty() ? "" : ": " + e));
    e = flowRings(k, FlowRingShape{2, 4, 4096});
    k.say(e.empty() ? "ok" : "FAIL",
          "device API: Flow ring all-reduce with two parts (rings both ways), " + who + (e.empty() ? "" : ": " + e));
    e = ginRounds(k);
    k.say(e.empty() ? "ok" : "FAIL",
          "device API: GIN puts, signals, counters, gets and barriers, " + who + (e.empty() ? "" : ": " + e));
    if (props.multimemSupport) {
      e = multimemForms(k);
      k.say(e.empty() ? "ok" : "FAIL",
            "device API: multimem and mixed building blocks through NVLS, " + who + (e.empty() ? "" : ": " + e));
    } else {
      k.say("SKIP", "device API multimem: the communicator has no NVLS multicast (multimemSupport 0)");
    }
  }
  cudaStreamDestroy(k.stream);
  (void)ncclCommDestroy(k.comm);
}

}  // namespace

int main() {
  int ngpus = 0;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 1) {
    printf("SKIP: no GPU\n");
    return 0;
  }
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  const int n = ngpus >= 2 ? ngpus : 2;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    printf("FAIL: ncclGetUniqueId\n");
    return 1;
  }
  std::vector<Rank> ranks(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.r = r;
    k.n = n;
    k.dev = r % ngpus;
    threads.emplace_back([&k, &id] { runRank(k, id); });
  }
  int failures = 0;
  for (int r = 0; r < n; ++r) {
    threads[static_cast<size_t>(r)].join();
    failures += ranks[static_cast<size_t>(r)].failures;
  }
  for (const std::string& l : ranks[0].lines) printf("%s\n", l.c_str());
  if (failures != 0) printf("FAIL: %d failed checks over the ranks\n", failures);
  return failures;
}
