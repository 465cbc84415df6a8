// Micro-benchmark: host reduction kernels per datatype, in GB/s of output, beside memcpy of the same size.
// Run: build/perf/micro/braid_micro_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "src/backends/cpu/reduce.h"

namespace {

constexpr size_t kBytes = 8 << 20;  // larger than the caches: memory-bound, as collectives are

void bmMemcpy(benchmark::State& state) {
  std::vector<char> a(kBytes, 1), b(kBytes);
  for (auto _ : state) {
    memcpy(b.data(), a.data(), kBytes);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(bmMemcpy);

// The copy bound of host collectives: each thread copies its own 64 MB buffers (far beyond the caches). With 2
// threads, the aggregate rate C2 bounds a 2-process direct all-reduce at busbw = C2 / 2 (each rank reads and
// writes as many bytes as one copy of the vector; docs/perf.md).
void bmMemcpyLarge(benchmark::State& state) {
  constexpr size_t kLarge = 64 << 20;
  std::vector<char> a(kLarge, 1), b(kLarge, 2);
  for (auto _ : state) {
    memcpy(b.data(), a.data(), kLarge);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLarge));
}
BENCHMARK(bmMemcpyLarge)->Threads(1)->Threads(2)->UseRealTime();

void bmReduce(benchmark::State& state, braid::DType dtype, braid::OpKind kind) {
  braid::ReduceOp op;
  op.dtype = dtype;
  op.kind = kind;
  op.nranks = 2;
  const size_t n = kBytes / braid::dtypeSize(op.dtype);
  std::vector<char> a(kBytes, 0), b(kBytes, 0), c(kBytes);
  for (auto _ : state) {
    braid::reduceInto(op, c.data(), a.data(), b.data(), n, false);
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

// Named Reduce/<type>/<op> ("Reduce/bfloat16/sum"), so --benchmark_filter=Reduce/half selects by type.
const bool kReduceRegistered = [] {
  constexpr braid::OpKind kOps[] = {braid::OpKind::kSum, braid::OpKind::kMax};
  constexpr const char* kOpNames[] = {"sum", "max"};
  for (int t = 0; t < 12; ++t) {
    const auto dtype = static_cast<braid::DType>(t);
    for (size_t o = 0; o < 2; ++o) {
      const std::string name = std::string("Reduce/") + braid::dtypeName(dtype) + "/" + kOpNames[o];
      benchmark::RegisterBenchmark(name.c_str(), bmReduce, dtype, kOps[o]);
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
