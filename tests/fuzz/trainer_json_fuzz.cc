// Fuzz target for braid-train's JSON config reader (tools/common/json.h): any text gives a value or an error
// naming the line and column, never a crash (deep nesting included). Corpus: tests/fixtures/fuzz/trainer_json.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tools/common/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  braid::JsonValue v;
  std::string error;
  if (!braid::parseJson(text, &v, &error)) {
    if (error.find("line ") != 0) abort();
    return 0;
  }
  (void)v.show();
  return 0;
}
