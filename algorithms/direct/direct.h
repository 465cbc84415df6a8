// NVLS-style ("direct") schedules: every rank loads peers' buffers and stores into peers' buffers over a shared
// address space, with no FIFO in between. On one host all ranks see each other's buffers (threads of a process,
// or ncclMemAlloc memory mapped across processes); the CUDA backend runs the same steps with peer pointers or
// multicast objects. A schedule is data: per rank, the steps that rank performs between the two barriers that
// bracket an operation (all buffers published; all ranks finished).
//
//   kReduce  dst[i] = src_0[i] + src_1[i] + ... + src_{n-1}[i] over every rank's send buffer, always in rank
//            order, so results do not depend on chunking or on which rank computes them (deterministic).
//   kCopy    dst[i] = src_p[i] from one rank's send buffer.
// The destination is one rank's receive buffer, or every rank's at the same offset (a multicast store).
#pragma once

#include <cstddef>
#include <vector>

#include "src/common/coll_types.h"  // DirectCollective

namespace braid {

enum class DirectKind { kReduce, kCopy };

struct DirectStep {
  DirectKind kind = DirectKind::kReduce;
  int srcRank = -1;      // kCopy: whose send buffer; kReduce: -1 (all ranks')
  size_t srcOffset = 0;  // elements into the send buffer(s)
  size_t count = 0;      // elements
  int dstRank = -1;      // whose receive buffer; -1: every rank's
  size_t dstOffset = 0;  // elements into the receive buffer(s)
};

// The steps of `rank` for one operation. `count` is NCCL's count argument: all-reduce's element count,
// reduce-scatter's and all-gather's per-rank count.
std::vector<DirectStep> buildDirectProgram(DirectCollective coll, int nranks, int rank, size_t count);
// The same into *out (cleared first), so a caller on the latency path can reuse its storage.
void buildDirectProgram(DirectCollective coll, int nranks, int rank, size_t count, std::vector<DirectStep>* out);

}  // namespace braid

#include "src/common/status.h"

namespace braid {

// Runs every rank's program symbolically and verifies the collective: each output element of each rank is
// written exactly once, with exactly the right sources (every rank's element once for reductions, the right
// rank's block for copies). OK, or an error naming the first violation.
Status checkDirectSchedule(DirectCollective coll, int nranks, size_t count);
// The same check on given programs (programs[rank]), so tests can show a broken schedule is caught.
Status checkDirectPrograms(DirectCollective coll, int nranks, size_t count,
                           const std::vector<std::vector<DirectStep>>& programs);

}  // namespace braid
