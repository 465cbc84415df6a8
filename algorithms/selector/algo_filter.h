// NCCL_ALGO and NCCL_PROTO: NCCL's grammar for restricting algorithms and protocols, per collective.
//
//   list            "ring,tree"       only these (names are case-insensitive)
//   exclusion       "^tree"           all but these
//   per collective  "ring;allreduce:tree,ring;broadcast:^ring"   the first entry may omit "func:" and sets the
//                   default for every collective; "func:list" entries override it for one collective
//                   (func = broadcast, reduce, allgather, reducescatter, allreduce)
// An unknown name or collective is an error naming the token (NCCL 2.24+ behaviour). Which of the allowed
// entries braid implements is the caller's question.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "src/common/coll_types.h"
#include "src/common/status.h"

namespace braid {

enum class FilterColl { kBroadcast, kReduce, kAllGather, kReduceScatter, kAllReduce };
constexpr int kFilterColls = 5;
const char* filterCollName(FilterColl c);

// Algorithm and protocol names as NCCL spells them, in NCCL's order (AlgoId / ProtoId index them).
const std::vector<std::string>& algoNames();   // "Tree", "Ring", ...
const std::vector<std::string>& protoNames();  // "LL", "LL128", "Simple"

// allowed[collective][item]; everything allowed when the setting is empty.
struct Filter {
  std::string setting;               // the text it came from ("" = unset)
  std::string source = "NCCL_ALGO";  // where that text came from, for messages
  std::vector<std::array<bool, 8>> allowed = std::vector<std::array<bool, 8>>(kFilterColls, allTrue());
  std::array<bool, 8> base = allTrue();  // the first, collective-less entry (send/receive follow it)
  bool allows(FilterColl c, int item) const { return allowed[static_cast<size_t>(c)][static_cast<size_t>(item)]; }
  bool allowsDefault(int item) const { return base[static_cast<size_t>(item)]; }

 private:
  static std::array<bool, 8> allTrue() {
    std::array<bool, 8> a{};
    a.fill(true);
    return a;
  }
};

// Parses `text` (the value of `envName`) against `names`. Errors name the variable, the setting and the token.
Result<Filter> parseFilter(const std::string& text, const std::vector<std::string>& names, const char* envName);
// What both allow (a communicator's NCCL_ALGO and a call's selection); `source` names the result in messages.
Filter intersectFilters(const Filter& a, const Filter& b, const std::string& source);

}  // namespace braid
