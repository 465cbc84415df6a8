#include "src/common/coll_types.h"

namespace braid {

const char* collKindName(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce:
      return "AllReduce";
    case CollKind::kBroadcast:
      return "Broadcast";
    case CollKind::kReduce:
      return "Reduce";
    case CollKind::kAllGather:
      return "AllGather";
    case CollKind::kReduceScatter:
      return "ReduceScatter";
    case CollKind::kSend:
      return "Send";
    case CollKind::kRecv:
      return "Recv";
    case CollKind::kAlltoAll:
      return "AlltoAll";
  }
  return "?";
}

const char* opKindName(OpKind op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < 6 ? kNames[i] : "?";
}

const char* algoName(AlgoId a) {
  static const char* const kNames[kAlgos] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                             "NVLSTree", "PAT"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < kAlgos ? kNames[i] : "?";
}

const char* protoName(ProtoId p) {
  static const char* const kNames[kProtos] = {"LL", "LL128", "Simple"};
  const int i = static_cast<int>(p);
  return i >= 0 && i < kProtos ? kNames[i] : "?";
}

}  // namespace braid
