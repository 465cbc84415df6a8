#include "src/core/red_ops.h"

#include <cstring>

namespace braid {

Result<ReduceOp> RedOpTable::resolve(int op, DType dtype, int nranks, bool deviceScalar) const {
  ReduceOp r;
  r.dtype = dtype;
  r.nranks = nranks;
  if (builtinOp(op, &r.kind)) return r;
  std::lock_guard<std::mutex> lock(mu_);
  size_t idx = static_cast<size_t>(op) - 5;
  if (op < 5 || idx >= ops_.size() || !ops_[idx].live) {
    return invalidArgument(
        "op=%d is not a valid reduction operator (0..4 or one made by ncclRedOpCreatePreMulSum "
        "on this communicator)",
        op);
  }
  const UserRedOp& u = ops_[idx];
  if (u.dtype != dtype) {
    return invalidArgument("op=%d was created for datatype %s but the collective uses %s", op, dtypeName(u.dtype),
                           dtypeName(dtype));
  }
  r.kind = OpKind::kPreMulSum;
  r.scalar = 0;
  if (u.immediate) {
    r.scalar = u.scalarBits;
  } else if (deviceScalar) {
    r.scalarPtr = u.scalarPtr;
  } else {
    memcpy(&r.scalar, u.scalarPtr, dtypeSize(dtype));
  }
  return r;
}

Result<int> RedOpTable::createPreMulSum(const void* scalar, DType dtype, bool immediate) {
  UserRedOp u;
  u.live = true;
  u.dtype = dtype;
  u.immediate = immediate;
  if (immediate) {
    memcpy(&u.scalarBits, scalar, dtypeSize(dtype));
  } else {
    u.scalarPtr = scalar;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!ops_[i].live) {
      ops_[i] = u;
      return static_cast<int>(i) + 5;
    }
  }
  ops_.push_back(u);
  return static_cast<int>(ops_.size()) + 4;
}

Status RedOpTable::destroy(int op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (op < 5)
    return invalidArgument("op=%d is a built-in operator; only ops from ncclRedOpCreatePreMulSum can be destroyed", op);
  size_t idx = static_cast<size_t>(op) - 5;
  if (idx >= ops_.size() || !ops_[idx].live) {
    return invalidArgument("op=%d was not created on this communicator or was already destroyed", op);
  }
  ops_[idx].live = false;
  return Status::ok();
}

}  // namespace braid
