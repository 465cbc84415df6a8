// The vocabulary every layer speaks: which collective, which reduction, which algorithm and protocol. Plain enums
// and one POD, so algorithms, the planner, both backends and the device code take them from here and no layer
// includes an algorithm or a backend to name a type. Compiles as CUDA device code.
#pragma once

#include <cstdint>

#include "src/common/dtype.h"
#include "src/common/host_device.h"

namespace braid {

enum class CollKind : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kSend,
  kRecv,
  kAlltoAll,  // queued as one collective only for the log-step (Bruck) schedule; otherwise sends and receives
};
const char* collKindName(CollKind kind);

// Reduction operators. An operation is pre -> combine -> post:
//   pre(x)     = x * scalar for kPreMulSum, identity otherwise;
//   combine    = + for kSum/kAvg/kPreMulSum, * for kProd, max/min for kMax/kMin;
//   post(x)    = x / nranks for kAvg, identity otherwise.
// The element functions live in src/backends/common/reduce_elem.h.
enum class OpKind : uint8_t { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
const char* opKindName(OpKind op);  // "sum", "prod", "max", "min", "avg", "premulsum"

struct ReduceOp {
  OpKind kind = OpKind::kSum;
  DType dtype = DType::kFloat32;
  uint64_t scalar = 0;  // kPreMulSum: the scalar's bytes in dtype's own format (little-endian, low bytes)
  int nranks = 1;       // kAvg: the divisor applied by the post-op (values < 1 are treated as 1)
  // kPreMulSum with ncclScalarDevice on a device communicator: the scalar is read from here when the work runs (as
  // NCCL does, so a graph replay sees the value current then); null: `scalar` holds it.
  const void* scalarPtr = nullptr;
};

// The NVLS-style (direct) collectives (algorithms/direct/direct.h builds their schedules; kernels run them).
enum class DirectCollective { kAllReduceOneShot, kAllReduceTwoShot, kReduceScatter, kAllGather };

// Algorithm and protocol identities, in NCCL's order (NCCL_ALGO / NCCL_PROTO names them so).
enum class AlgoId { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat };
constexpr int kAlgos = 7;
enum class ProtoId { kLL, kLL128, kSimple };
constexpr int kProtos = 3;

const char* algoName(AlgoId a);    // "Tree", "Ring", ... as NCCL spells them
const char* protoName(ProtoId p);  // "LL", "LL128", "Simple"

}  // namespace braid
