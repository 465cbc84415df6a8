// sendrecv_perf: nccl-tests' send/receive benchmark (each rank sends to the next and receives from the previous,
// in one group), on braid's shared perf driver.
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

double busBwFactor(int /*nranks*/) {
  return 1.0;
}

void input(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t expected(const DataCtx& ctx, void* out) {
  const int prev = (ctx.rank - 1 + ctx.nranks) % ctx.nranks;
  braid::perf::fillInput(ctx.dataSpec(), prev, 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  braid::perf::CollectiveSpec spec;
  spec.name = "sendrecv_perf";
  spec.kind = braid::perf::CollKind::kSendRecv;
  // Sending and receiving the same buffer at once has no defined result; nccl-tests reports in-place #wrong N/A.
  spec.checkInPlace = false;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
