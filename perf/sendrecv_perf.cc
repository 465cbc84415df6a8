// sendrecv_perf: nccl-tests' send/receive benchmark (each rank sends to the next and receives from the previous,
// in one group), on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::DataCtx;

size_t expected(const DataCtx& ctx, void* out) {
  const int prev = (ctx.rank - 1 + ctx.nranks) % ctx.nranks;
  braid::perf::fillInput(ctx.dataSpec(), prev, 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "sendrecv_perf";
  spec.kind = CollKind::kSendRecv;
  // Sending and receiving the same buffer at once has no defined result; nccl-tests reports in-place #wrong N/A.
  spec.checkInPlace = false;
  // nccl-tests' send/receive runs once per -o op and names it in the redop column, though no op is applied.
  spec.hasOp = true;
  spec.counts = wholeBufferCounts;
  spec.algBytes = countBytes;
  spec.busBwFactor = unitBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
