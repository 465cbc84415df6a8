// scatter_perf: nccl-tests' scatter benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.recvCount = c.paramCount = braid::perf::blockCount(bytes, typeSize, nranks);
  c.sendCount = c.recvCount * n;
  c.recvInPlaceOffset = c.recvCount;  // in place, each rank's output is its own block of the root's input
  return c;
}

// Block `rank` of the root's input.
size_t expected(const DataCtx& ctx, void* out) {
  const size_t block = ctx.counts.paramCount;
  braid::perf::fillInput(ctx.dataSpec(), ctx.root, static_cast<size_t>(ctx.rank) * block, block, out);
  return block;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "scatter_perf";
  spec.kind = CollKind::kScatter;
  spec.hasRoot = true;
  spec.counts = counts;
  spec.algBytes = countBytesTimesRanks;
  spec.busBwFactor = blocksBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
