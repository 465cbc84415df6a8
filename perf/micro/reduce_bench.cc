// Micro-benchmark: host reduction kernels per datatype, in GB/s of output, beside memcpy of the same size.
// Run: build/perf/micro/braid_micro_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
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

void bmReduce(benchmark::State& state) {
  braid::ReduceOp op;
  op.dtype = static_cast<braid::DType>(state.range(0));
  op.kind = static_cast<braid::OpKind>(state.range(1));
  op.nranks = 2;
  const size_t n = kBytes / braid::dtypeSize(op.dtype);
  std::vector<char> a(kBytes, 0), b(kBytes, 0), c(kBytes);
  for (auto _ : state) {
    braid::reduceInto(op, c.data(), a.data(), b.data(), n, false);
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
  state.SetLabel(std::string(braid::dtypeName(op.dtype)));
}
BENCHMARK(bmReduce)->ArgsProduct({benchmark::CreateDenseRange(0, 11, 1), {0, 2}});

}  // namespace

BENCHMARK_MAIN();
