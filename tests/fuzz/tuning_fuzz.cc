// Fuzz target for BRAID_TUNING_FILE's grammar (algorithms/selector/cost_model.h): any text gives a cost model or an
// error naming the file and line, never a crash. Corpus: tests/fixtures/fuzz/tuning.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "algorithms/selector/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  braid::Result<braid::CostModel> m = braid::CostModel::parse(text, "fuzz.tuning");
  if (!m.isOk()) {
    if (m.status().message().find("fuzz.tuning") == std::string::npos) abort();  // errors name the file
    return 0;
  }
  // A model that parsed must answer questions without trouble.
  (void)m.value().predictUs(braid::FilterColl::kAllReduce, braid::AlgoId::kRing, braid::ProtoId::kSimple, 4, 2,
                            1 << 20);
  return 0;
}
