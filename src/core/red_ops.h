// A communicator's reduction operators: the built-in ones (ncclSum .. ncclAvg) and those made by
// ncclRedOpCreatePreMulSum, resolved into the ReduceOp a collective carries. Thread-safe: ops may be created and
// destroyed from any thread while collectives resolve others.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "src/common/coll_types.h"
#include "src/common/dtype.h"
#include "src/common/status.h"

namespace braid {

// A user-created reduction operator (ncclRedOpCreatePreMulSum).
struct UserRedOp {
  bool live = false;
  DType dtype = DType::kFloat32;
  bool immediate = true;            // ncclScalarHostImmediate: scalar captured at creation
  uint64_t scalarBits = 0;          // immediate value
  const void* scalarPtr = nullptr;  // ncclScalarDevice: read at each call (host comms) or by the kernels (CUDA)
};

// ncclSum .. ncclAvg: ncclRedOp_t's values 0..4 are OpKind's first five. True, with *kind set, for those.
inline bool builtinOp(int op, OpKind* kind) {
  static_assert(static_cast<int>(OpKind::kAvg) == 4, "OpKind must follow ncclRedOp_t for built-in ops");
  if (op < 0 || op > static_cast<int>(OpKind::kAvg)) return false;
  *kind = static_cast<OpKind>(op);
  return true;
}

class RedOpTable {
 public:
  // The ReduceOp of `op` (ncclRedOp_t's value) for `dtype` on `nranks` ranks; errors name the op. deviceScalar: a
  // ncclScalarDevice scalar is passed by address for the kernels to read (a device communicator); otherwise its
  // value is read now (host memory on a host communicator).
  Result<ReduceOp> resolve(int op, DType dtype, int nranks, bool deviceScalar) const;
  Result<int> createPreMulSum(const void* scalar, DType dtype, bool immediate);
  Status destroy(int op);

 private:
  std::vector<UserRedOp> ops_;
  mutable std::mutex mu_;
};

}  // namespace braid
