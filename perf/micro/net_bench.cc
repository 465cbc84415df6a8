// Micro-benchmark: streaming throughput of the built-in networks through the plugin ABI (NetModule), both ends in
// this process over loopback. A window of 8 messages is kept in flight; one thread posts and tests both sides
// (the networks' own helper threads, or libfabric's progress, move the bytes).
//   NetStream/Socket/<bytes>        NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD as set in the environment
//   NetStream/OFI/<bytes>           libfabric's provider as FI_PROVIDER selects (tcp, shm)
// bytes_per_second = bytes delivered / wall time. Run, e.g.:
//   FI_PROVIDER=tcp NCCL_SOCKET_IFNAME=lo build/perf/micro/braid_micro_bench --benchmark_filter=NetStream
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "transports/net/net_plugin.h"

namespace {

using braid::Status;
using braid::net::NetHandle;
using braid::net::NetModule;

constexpr int kWindow = 8;

struct Ends {
  std::unique_ptr<NetModule> net;
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  int dev = 0;
};

Status open(const ncclNet_v8_t* table, Ends* e) {
  if (table == nullptr) return braid::invalidUsage("network not built");
  e->net = NetModule::wrapV8(table, nullptr);
  BRAID_RETURN_IF_ERROR(e->net->init());
  BRAID_ASSIGN_OR_RETURN(int n, e->net->devices());
  if (n == 0) return braid::invalidUsage("no device");
  for (int d = 0; d < n; ++d) {  // loopback when there is one
    auto p = e->net->getProperties(d);
    if (p.isOk() && (p.value().name == "lo" || p.value().name.find("/lo") != std::string::npos)) e->dev = d;
  }
  NetHandle h;
  BRAID_RETURN_IF_ERROR(e->net->listen(e->dev, &h, &e->listen));
  auto t0 = std::chrono::steady_clock::now();
  while (e->send == nullptr || e->recv == nullptr) {
    if (e->send == nullptr) BRAID_RETURN_IF_ERROR(e->net->connect(e->dev, &h, &e->send));
    if (e->recv == nullptr) BRAID_RETURN_IF_ERROR(e->net->accept(e->listen, &e->recv));
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) return braid::remoteError("connect");
  }
  return Status::ok();
}

void close(Ends* e) {
  (void)e->net->closeSend(e->send);
  (void)e->net->closeRecv(e->recv);
  (void)e->net->closeListen(e->listen);
}

void stream(benchmark::State& state, const ncclNet_v8_t* table) {
  Ends e;
  Status s = open(table, &e);
  if (!s.isOk()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<std::vector<char>> src(kWindow, std::vector<char>(bytes, 1)), dst(kWindow, std::vector<char>(bytes));
  std::vector<void*> smh(kWindow), rmh(kWindow);
  for (int i = 0; i < kWindow; ++i) {
    (void)e.net->regMr(e.send, src[i].data(), bytes, NCCL_PTR_HOST, &smh[i]);
    (void)e.net->regMr(e.recv, dst[i].data(), bytes, NCCL_PTR_HOST, &rmh[i]);
  }
  size_t moved = 0;
  for (auto _ : state) {
    void* sreq[kWindow] = {};
    void* rreq[kWindow] = {};
    int left = 2 * kWindow;
    for (int i = 0; i < kWindow; ++i) {
      void* buf = dst[i].data();
      int tag = 0;
      while (rreq[i] == nullptr) (void)e.net->irecv(e.recv, 1, &buf, &bytes, &tag, &rmh[i], &rreq[i]);
      while (sreq[i] == nullptr) (void)e.net->isend(e.send, src[i].data(), bytes, 0, smh[i], &sreq[i]);
    }
    while (left > 0) {
      for (int i = 0; i < kWindow; ++i) {
        for (void** r : {&sreq[i], &rreq[i]}) {
          if (*r == nullptr) continue;
          bool done = false;
          Status t = e.net->test(*r, &done, nullptr);
          if (!t.isOk()) {
            state.SkipWithError(t.message().c_str());
            close(&e);
            return;
          }
          if (done) {
            *r = nullptr;
            --left;
          }
        }
      }
    }
    moved += bytes * kWindow;
  }
  state.SetBytesProcessed(static_cast<int64_t>(moved));
  for (int i = 0; i < kWindow; ++i) {
    (void)e.net->deregMr(e.send, smh[i]);
    (void)e.net->deregMr(e.recv, rmh[i]);
  }
  close(&e);
}

void netStreamSocket(benchmark::State& state) {
  stream(state, braid::net::socketNetTable());
}
void netStreamOfi(benchmark::State& state) {
  stream(state, braid::net::ofiNetTable());
}

BENCHMARK(netStreamSocket)->Name("NetStream/Socket")->RangeMultiplier(16)->Range(64 << 10, 16 << 20)->UseRealTime();
BENCHMARK(netStreamOfi)->Name("NetStream/OFI")->RangeMultiplier(16)->Range(64 << 10, 16 << 20)->UseRealTime();

}  // namespace
