// gather_perf: nccl-tests' gather benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.sendCount = c.paramCount = braid::perf::blockCount(bytes, typeSize, nranks);
  c.recvCount = c.sendCount * n;
  c.sendInPlaceOffset = c.sendCount;  // in place, each rank's input is its own block of the root's output
  return c;
}

// Only the root receives.
size_t expected(const DataCtx& ctx, void* out) {
  return ctx.rank == ctx.root ? braid::perf::gatheredInputs(ctx, out) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "gather_perf";
  spec.kind = CollKind::kGather;
  spec.hasRoot = true;
  spec.counts = counts;
  spec.algBytes = countBytesTimesRanks;
  spec.busBwFactor = blocksBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
