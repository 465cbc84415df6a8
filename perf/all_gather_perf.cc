// all_gather_perf: nccl-tests' all-gather benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::CollCounts;

CollCounts counts(size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t base = braid::perf::blockCount(bytes, typeSize, nranks);
  CollCounts c;
  c.sendCount = c.paramCount = base;
  c.recvCount = base * n;
  c.sendInPlaceOffset = base;  // in place, each rank's input is its own block of the output
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "all_gather_perf";
  spec.kind = CollKind::kAllGather;
  spec.counts = counts;
  spec.algBytes = countBytesTimesRanks;
  spec.busBwFactor = blocksBusFactor;  // each rank receives the (n-1) blocks it does not own
  spec.initInput = ownInput;
  spec.initExpected = gatheredInputs;
  return runPerf(spec, argc, argv);
}
