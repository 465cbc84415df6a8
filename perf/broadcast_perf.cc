// broadcast_perf: nccl-tests' broadcast benchmark and checker, on braid's shared perf driver.
#include "perf/common/collective.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int /*nranks*/) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = bytes / typeSize;
  return c;
}

size_t algBytes(const CollCounts& c, size_t typeSize, int /*nranks*/) {
  return c.paramCount * typeSize;
}

// A pipelined broadcast moves the whole buffer over every link once.
double busBwFactor(int /*nranks*/) {
  return 1.0;
}

void input(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t expected(const DataCtx& ctx, void* out) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.root, 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  braid::perf::CollectiveSpec spec;
  spec.name = "broadcast_perf";
  spec.kind = braid::perf::CollKind::kBroadcast;
  spec.hasRoot = true;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
