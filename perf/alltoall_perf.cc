// alltoall_perf: nccl-tests' all-to-all benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t block = braid::perf::blockCount(bytes, typeSize, nranks);
  CollCounts c;
  c.paramCount = block;
  c.sendCount = c.recvCount = block * n;
  return c;
}

// Block j of the output is block `rank` of rank j's input.
size_t expected(const DataCtx& ctx, void* out) {
  const size_t block = ctx.counts.paramCount;
  char* p = static_cast<char*>(out);
  for (int j = 0; j < ctx.nranks; ++j) {
    braid::perf::fillInput(ctx.dataSpec(), j, static_cast<size_t>(ctx.rank) * block, block,
                           p + static_cast<size_t>(j) * block * ctx.type->size);
  }
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "alltoall_perf";
  spec.kind = CollKind::kAlltoAll;
  spec.counts = counts;
  spec.algBytes = countBytesTimesRanks;
  spec.busBwFactor = blocksBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
