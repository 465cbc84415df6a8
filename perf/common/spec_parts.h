// The pieces several perf tools share: nccl-tests' buffer shapes, algbw sizes and busbw factors (reference in
// docs/perf.md), and the common input/expected-output generators. A tool's .cc keeps only what is its own.
#pragma once

#include <cstddef>

#include "perf/common/collective.h"

namespace braid::perf {

// One buffer of bytes / typeSize elements on every rank, sent and received whole (all-reduce, broadcast, reduce,
// send/recv).
CollCounts wholeBufferCounts(size_t bytes, size_t typeSize, int nranks);

// One rank's block of a message of `bytes` bytes split over nranks, in elements: nccl-tests rounds it down to whole
// 16-byte lines ((count / nranks) & -(16 / typeSize)), so the table's size and count columns match its own.
size_t blockCount(size_t bytes, size_t typeSize, int nranks);

// S in algbw = S / t: the count argument's bytes, or that times the rank count (per-rank counts).
size_t countBytes(const CollCounts& c, size_t typeSize, int nranks);
size_t countBytesTimesRanks(const CollCounts& c, size_t typeSize, int nranks);

// busbw factors: 2(n-1)/n (all-reduce), (n-1)/n (each rank receives the other ranks' blocks), 1 (one copy of the
// buffer crosses every link).
double allReduceBusFactor(int nranks);
double blocksBusFactor(int nranks);
double unitBusFactor(int nranks);

// This rank's whole send buffer of generated input.
void ownInput(const DataCtx& ctx, void* send);

// Block r of `out` (paramCount elements each) holds rank r's input, for every rank; returns the element count.
size_t gatheredInputs(const DataCtx& ctx, void* out);

}  // namespace braid::perf
