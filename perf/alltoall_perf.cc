// alltoall_perf: nccl-tests' all-to-all benchmark and checker, on braid's shared perf driver.
#include "perf/common/collective.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  // nccl-tests keeps each block a multiple of 16 bytes.
  const size_t perBlockAlign = typeSize >= 16 ? 1 : 16 / typeSize;
  const size_t block = bytes / typeSize / n / perBlockAlign * perBlockAlign;
  CollCounts c;
  c.paramCount = block;
  c.sendCount = c.recvCount = block * n;
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
  braid::perf::CollectiveSpec spec;
  spec.name = "alltoall_perf";
  spec.kind = braid::perf::CollKind::kAlltoAll;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
