// broadcast_perf: nccl-tests' broadcast benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::DataCtx;

size_t expected(const DataCtx& ctx, void* out) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.root, 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "broadcast_perf";
  spec.kind = CollKind::kBroadcast;
  spec.hasRoot = true;
  spec.counts = wholeBufferCounts;
  spec.algBytes = countBytes;
  spec.busBwFactor = unitBusFactor;  // a pipelined broadcast moves the whole buffer over every link once
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
