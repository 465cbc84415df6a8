// reduce_scatter_perf: nccl-tests' reduce-scatter benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t base = braid::perf::blockCount(bytes, typeSize, nranks);
  CollCounts c;
  c.recvCount = c.paramCount = base;
  c.sendCount = base * n;
  c.recvInPlaceOffset = base;  // in place, each rank's result is its own block of the input
  return c;
}

size_t expected(const DataCtx& ctx, void* out) {
  const size_t block = ctx.counts.paramCount;
  braid::perf::fillReduced(ctx.dataSpec(), static_cast<size_t>(ctx.rank) * block, block, out);
  return block;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "reduce_scatter_perf";
  spec.kind = CollKind::kReduceScatter;
  spec.hasOp = true;
  spec.counts = counts;
  spec.algBytes = countBytesTimesRanks;
  spec.busBwFactor = blocksBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
