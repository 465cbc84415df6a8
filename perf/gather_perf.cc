// gather_perf: nccl-tests' gather benchmark and checker, on braid's shared perf driver.
#include "perf/common/collective.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.sendCount = c.paramCount = bytes / typeSize / n;
  c.recvCount = c.sendCount * n;
  c.sendInPlaceOffset = c.sendCount;  // in place, each rank's input is its own block of the root's output
  return c;
}

size_t algBytes(const CollCounts& c, size_t typeSize, int nranks) {
  return c.paramCount * typeSize * static_cast<size_t>(nranks);
}

double busBwFactor(int nranks) {
  return nranks > 0 ? static_cast<double>(nranks - 1) / nranks : 0.0;
}

void input(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t expected(const DataCtx& ctx, void* out) {
  if (ctx.rank != ctx.root) return 0;
  const size_t block = ctx.counts.paramCount;
  char* p = static_cast<char*>(out);
  for (int r = 0; r < ctx.nranks; ++r) {
    braid::perf::fillInput(ctx.dataSpec(), r, 0, block, p + static_cast<size_t>(r) * block * ctx.type->size);
  }
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  braid::perf::CollectiveSpec spec;
  spec.name = "gather_perf";
  spec.kind = braid::perf::CollKind::kGather;
  spec.hasRoot = true;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
