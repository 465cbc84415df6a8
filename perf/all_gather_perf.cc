// all_gather_perf: nccl-tests' all-gather benchmark and checker, on braid's shared perf driver.
#include "perf/common/collective.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

constexpr size_t kAlign = 4;  // nccl-tests rounds each rank's block down to a multiple of 4 elements

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t base = bytes / typeSize / (kAlign * n) * kAlign;
  CollCounts c;
  c.sendCount = c.paramCount = base;
  c.recvCount = base * n;
  c.sendInPlaceOffset = base;  // in place, each rank's input is its own block of the output
  return c;
}

size_t algBytes(const CollCounts& c, size_t typeSize, int nranks) {
  return c.paramCount * typeSize * static_cast<size_t>(nranks);
}

// Each rank receives the (n-1) blocks it does not own.
double busBwFactor(int nranks) {
  return nranks > 0 ? static_cast<double>(nranks - 1) / nranks : 0.0;
}

void input(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t expected(const DataCtx& ctx, void* out) {
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
  spec.name = "all_gather_perf";
  spec.kind = braid::perf::CollKind::kAllGather;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
