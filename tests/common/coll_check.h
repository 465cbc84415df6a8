// One collective with exact inputs and a bitwise check of every output element, shared by the thread and the
// process suites.
#pragma once

#include <string>

#include "nccl.h"

namespace braid_test {

enum class Coll {
  kAllReduce,
  kBroadcast,
  kBcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv
};
const char* collName(Coll c);
bool collHasOp(Coll c);

struct CollCase {
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;  // ncclNumOps means "a PreMulSum with scalar 2 made for this call"
  size_t count;
  bool inPlace;
  int root;
  bool memAlloc = false;  // buffers from ncclMemAlloc (peers can map them: the direct path) instead of the heap
};

// Runs the case on this rank; returns an empty string on success, else what went wrong.
std::string runCase(const CollCase& c, int rank, int nranks, ncclComm_t comm);

}  // namespace braid_test
