// Fuzz target for NCCL_ALGO / NCCL_PROTO's grammar (algorithms/selector/algo_filter.h): any text gives a filter or
// an error naming the variable, never a crash. Corpus: tests/fixtures/fuzz/algo_filter.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "algorithms/selector/algo_filter.h"
#include "src/common/coll_types.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto* names : {&braid::algoNames(), &braid::protoNames()}) {
    braid::Result<braid::Filter> f = braid::parseFilter(text, *names, "NCCL_FUZZ");
    if (!f.isOk()) {
      if (f.status().message().find("NCCL_FUZZ") == std::string::npos) abort();
      continue;
    }
    for (int c = 0; c < braid::kFilterColls; ++c) {
      for (int a = 0; a < static_cast<int>(names->size()); ++a)
        (void)f.value().allows(static_cast<braid::FilterColl>(c), a);
    }
  }
  return 0;
}
