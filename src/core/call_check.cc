#include "src/core/call_check.h"

#include "algorithms/selector/selector.h"
#include "src/common/dtype.h"
#include "src/common/logging.h"
#include "src/common/sha256.h"

namespace braid {
namespace {

bool reduces(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}
bool rooted(CollKind k) {
  return k == CollKind::kBroadcast || k == CollKind::kReduce;
}

bool sameCall(const CallDesc& a, const CallDesc& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.op == b.op && a.root == b.root && a.count == b.count &&
         a.selection == b.selection && a.minChannels == b.minChannels && a.maxChannels == b.maxChannels &&
         a.nvlsChannels == b.nvlsChannels;
}

}  // namespace

std::vector<CallDesc> describeCalls(const std::vector<PendingOp>& pending) {
  std::vector<CallDesc> out;
  for (const PendingOp& p : pending) {
    if (p.kind == CollKind::kSend || p.kind == CollKind::kRecv) continue;
    CallDesc c{};
    c.kind = static_cast<int32_t>(p.kind);
    c.dtype = static_cast<int32_t>(p.dtype);
    c.op = reduces(p.kind) ? static_cast<int32_t>(p.op.kind) : -1;
    c.root = rooted(p.kind) ? p.root : 0;
    c.count = p.count;
    c.selection = p.selector != nullptr ? textHash(p.selector->config().algo.setting) : 0;
    c.minChannels = p.minChannels;
    c.maxChannels = p.maxChannels;
    c.nvlsChannels = p.nvlsChannels;
    out.push_back(c);
  }
  return out;
}

std::string describeCall(const CallDesc& c) {
  const auto kind = static_cast<CollKind>(c.kind);
  std::string s = strPrintf("%s(count %llu, %s", collKindName(kind), static_cast<unsigned long long>(c.count),
                            dtypeName(static_cast<DType>(c.dtype)));
  if (c.op >= 0) s += strPrintf(", %s", opKindName(static_cast<OpKind>(c.op)));
  if (rooted(kind)) s += strPrintf(", root %d", c.root);
  if (c.selection != 0) s += strPrintf(", algSelection #%016llx", static_cast<unsigned long long>(c.selection));
  if (c.minChannels > 0) s += strPrintf(", minCTAs %d", c.minChannels);
  if (c.maxChannels > 0) s += strPrintf(", maxCTAs %d", c.maxChannels);
  if (c.nvlsChannels > 0) s += strPrintf(", nvlsCTAs %d", c.nvlsChannels);
  return s + ")";
}

Status compareCalls(const std::vector<std::vector<CallDesc>>& all) {
  // Every rank runs this on the same data and reports the first difference against rank 0, so all say the same.
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].size() != all[0].size()) {
      return invalidUsage(
          "mismatched collectives (BRAID_CHECK_CALLS): rank 0 queued %zu collectives in this group, rank %zu queued "
          "%zu; every rank must call the same collectives in the same order",
          all[0].size(), r, all[r].size());
    }
    for (size_t i = 0; i < all[0].size(); ++i) {
      if (sameCall(all[0][i], all[r][i])) continue;
      return invalidUsage(
          "mismatched collectives (BRAID_CHECK_CALLS): collective %zu of the group is %s on rank 0 but %s on rank "
          "%zu; every rank must call the same collective with the same count, datatype, op, root and ncclCollConfig_t",
          i, describeCall(all[0][i]).c_str(), describeCall(all[r][i]).c_str(), r);
    }
  }
  return Status::ok();
}

}  // namespace braid
