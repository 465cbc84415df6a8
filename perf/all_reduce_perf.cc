// all_reduce_perf: nccl-tests' all-reduce benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::DataCtx;

size_t expected(const DataCtx& ctx, void* out) {
  braid::perf::fillReduced(ctx.dataSpec(), 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "all_reduce_perf";
  spec.kind = CollKind::kAllReduce;
  spec.hasOp = true;
  spec.counts = wholeBufferCounts;
  spec.algBytes = countBytes;
  // Every rank sends and receives (n-1)/n of the buffer in the reduce-scatter and again in the all-gather phase.
  spec.busBwFactor = allReduceBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
