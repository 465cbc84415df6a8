// BRAID_CHECK_CALLS's comparison (src/core/call_check.h): what counts as the same call, and the message that names
// both calls and the ranks.
#include "src/core/call_check.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

PendingOp op(CollKind kind, size_t count, DType dtype, OpKind red, int root) {
  PendingOp p{};
  p.kind = kind;
  p.count = count;
  p.dtype = dtype;
  p.op.kind = red;
  p.root = root;
  return p;
}

TEST(CallCheck, SendsAndReceivesAreNotCompared) {
  const std::vector<PendingOp> pending = {op(CollKind::kSend, 4, DType::kFloat32, OpKind::kSum, 1),
                                          op(CollKind::kAllReduce, 4, DType::kFloat32, OpKind::kMax, 0),
                                          op(CollKind::kRecv, 9, DType::kInt8, OpKind::kSum, 1)};
  const std::vector<CallDesc> calls = describeCalls(pending);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(describeCall(calls[0]), "AllReduce(count 4, float, max)");
}

TEST(CallCheck, IrrelevantFieldsDoNotCount) {
  // A broadcast's op and an all-reduce's root are whatever the API passed; they must not make calls differ.
  auto a = describeCalls({op(CollKind::kBroadcast, 8, DType::kInt32, OpKind::kSum, 1),
                          op(CollKind::kAllReduce, 8, DType::kInt32, OpKind::kSum, 0)});
  auto b = describeCalls({op(CollKind::kBroadcast, 8, DType::kInt32, OpKind::kMax, 1),
                          op(CollKind::kAllReduce, 8, DType::kInt32, OpKind::kSum, 3)});
  EXPECT_TRUE(compareCalls({a, b}).isOk());
}

TEST(CallCheck, EachDifferenceIsNamed) {
  const auto base = op(CollKind::kReduce, 16, DType::kFloat32, OpKind::kSum, 0);
  struct Case {
    PendingOp other;
    const char* mentions;
  } cases[] = {
      {op(CollKind::kReduce, 32, DType::kFloat32, OpKind::kSum, 0), "count 32"},
      {op(CollKind::kReduce, 16, DType::kFloat16, OpKind::kSum, 0), "half"},
      {op(CollKind::kReduce, 16, DType::kFloat32, OpKind::kMin, 0), "min"},
      {op(CollKind::kReduce, 16, DType::kFloat32, OpKind::kSum, 2), "root 2"},
      {op(CollKind::kAllGather, 16, DType::kFloat32, OpKind::kSum, 0), "AllGather"},
  };
  for (const Case& c : cases) {
    Status st = compareCalls({describeCalls({base}), describeCalls({base}), describeCalls({c.other})});
    ASSERT_FALSE(st.isOk()) << c.mentions;
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_NE(st.message().find("Reduce(count 16, float, sum, root 0) on rank 0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.mentions), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("on rank 2"), std::string::npos) << st.message();
  }
  Status count = compareCalls({describeCalls({base, base}), describeCalls({base})});
  EXPECT_NE(count.message().find("rank 0 queued 2 collectives in this group, rank 1 queued 1"), std::string::npos)
      << count.message();
}

}  // namespace
}  // namespace braid
