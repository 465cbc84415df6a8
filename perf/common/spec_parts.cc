#include "perf/common/spec_parts.h"

namespace braid::perf {

CollCounts wholeBufferCounts(size_t bytes, size_t typeSize, int /*nranks*/) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = bytes / typeSize;
  return c;
}

size_t blockCount(size_t bytes, size_t typeSize, int nranks) {
  const size_t perLine = typeSize >= 16 ? 1 : 16 / typeSize;
  return nranks > 0 ? bytes / typeSize / static_cast<size_t>(nranks) / perLine * perLine : 0;
}

size_t countBytes(const CollCounts& c, size_t typeSize, int /*nranks*/) {
  return c.paramCount * typeSize;
}

size_t countBytesTimesRanks(const CollCounts& c, size_t typeSize, int nranks) {
  return c.paramCount * typeSize * static_cast<size_t>(nranks);
}

double allReduceBusFactor(int nranks) {
  return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

double blocksBusFactor(int nranks) {
  return nranks > 0 ? static_cast<double>(nranks - 1) / nranks : 0.0;
}

double unitBusFactor(int /*nranks*/) {
  return 1.0;
}

void ownInput(const DataCtx& ctx, void* send) {
  fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t gatheredInputs(const DataCtx& ctx, void* out) {
  const size_t block = ctx.counts.paramCount;
  char* p = static_cast<char*>(out);
  for (int r = 0; r < ctx.nranks; ++r) {
    fillInput(ctx.dataSpec(), r, 0, block, p + static_cast<size_t>(r) * block * ctx.type->size);
  }
  return block * static_cast<size_t>(ctx.nranks);
}

}  // namespace braid::perf
