// Micro-benchmark: host reduction kernels per datatype, in GB/s of output, beside memcpy of the same size.
// Run: build/perf/micro/braid_micro_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <utility>
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

// What a 2-process heap all-reduce's ring asks of each rank's memory, with no exchange: per 512 KB step, the
// rank's second half into a send slot, its first half reduced with a received slot into a third, then both slots
// streamed to the output, with the kernels the ring runs (stripedCopy, reduceInto, streamCopy). Each of the two
// threads works on its own 64 MB vectors, as two ranks on two CPUs do. bytes_per_second / 2 is each thread's
// rate over its vector, so RingRankWork/whole bounds the busbw (= algbw at 2 ranks) of the real all-reduce on
// this machine, where the slots also cross between the cores. /reads and /writes run only its memory reads (the
// vector into a slot) or only its memory writes (a slot streamed out) over the whole vector
// (docs/perf.md, night of 2026-12-07).
enum class RingPart { kWhole, kReads, kWrites };

void bmRingRankWork(benchmark::State& state, RingPart part) {
  constexpr size_t kVector = 64 << 20;
  constexpr size_t kSlot = 512 << 10;
  std::vector<char> in(kVector, 1), out(kVector, 2), slot(kSlot, 0), sum(kSlot, 0);
  braid::ReduceOp op;
  op.dtype = braid::DType::kFloat32;
  op.kind = braid::OpKind::kSum;
  op.nranks = 2;
  const size_t half = kVector / 2;
  for (auto _ : state) {
    for (size_t at = 0; at < half; at += kSlot) {
      if (part == RingPart::kReads) {
        braid::stripedCopy(slot.data(), in.data() + half + at, kSlot);
        braid::stripedCopy(slot.data(), in.data() + at, kSlot);
        continue;
      }
      if (part == RingPart::kWrites) {
        braid::streamCopy(out.data() + at, slot.data(), kSlot);
        braid::streamCopy(out.data() + half + at, slot.data(), kSlot);
        continue;
      }
      braid::stripedCopy(slot.data(), in.data() + half + at, kSlot);
      braid::reduceInto(op, sum.data(), slot.data(), in.data() + at, kSlot / sizeof(float), false);
      braid::streamCopy(out.data() + at, sum.data(), kSlot);
      braid::streamCopy(out.data() + half + at, slot.data(), kSlot);
    }
    braid::streamFence();
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(slot.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kVector));
}

const bool kRingRankWorkRegistered = [] {
  const std::pair<const char*, RingPart> parts[] = {{"RingRankWork/whole", RingPart::kWhole},
                                                    {"RingRankWork/reads", RingPart::kReads},
                                                    {"RingRankWork/writes", RingPart::kWrites}};
  for (const auto& [name, part] : parts) {
    benchmark::RegisterBenchmark(name, bmRingRankWork, part)->Threads(2)->UseRealTime();
  }
  return true;
}();

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

// The direct path's tile reduction over 4 ranks' sources (reduce.h's reduceMany: narrow types widened once and
// rounded once) beside the chain of binary steps it replaced, in GB/s of output. Tiles of 16 KB of output, as
// direct_exec.cc reduces, from sources far larger than the caches.
void bmReduceMany(benchmark::State& state, braid::DType dtype, bool chain) {
  constexpr int kSources = 4;
  constexpr size_t kTile = 16 << 10;
  const size_t es = braid::dtypeSize(dtype);
  std::vector<std::vector<char>> src(kSources, std::vector<char>(kBytes, 0));
  const char* srcs[kSources];
  std::vector<char> acc(kTile);
  braid::ReduceOp ops[kSources];
  for (auto& op : ops) op.dtype = dtype;
  for (auto _ : state) {
    for (size_t at = 0; at < kBytes; at += kTile) {
      for (int p = 0; p < kSources; ++p) srcs[p] = src[static_cast<size_t>(p)].data();
      if (chain) {
        braid::copyLocal(ops[0], acc.data(), srcs[0] + at, kTile / es, false);
        for (int p = 1; p < kSources; ++p)
          braid::reduceInto(ops[p], acc.data(), acc.data(), srcs[p] + at, kTile / es, false);
      } else {
        braid::reduceMany(ops, acc.data(), srcs, at, kSources, kTile / es, true);
      }
      benchmark::DoNotOptimize(acc.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

const bool kReduceManyRegistered = [] {
  for (braid::DType t : {braid::DType::kFloat16, braid::DType::kBfloat16, braid::DType::kFloat32}) {
    for (bool chain : {true, false}) {
      const std::string name = std::string("ReduceMany/") + braid::dtypeName(t) + (chain ? "/chain" : "/one-pass");
      benchmark::RegisterBenchmark(name.c_str(), bmReduceMany, t, chain);
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
