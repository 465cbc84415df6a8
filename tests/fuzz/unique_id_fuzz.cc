// Fuzz target for what the bootstrap reads from outside the process before any authentication: the 128-byte
// unique id a user passes to ncclCommInitRank (src/bootstrap/bootstrap.h). Any bytes decode to an id or an error,
// never a crash. Corpus: tests/fixtures/fuzz/unique_id.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/bootstrap/bootstrap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char id[braid::kUniqueIdBytes] = {};
  std::memcpy(id, data, size < sizeof(id) ? size : sizeof(id));
  braid::Result<braid::UniqueIdInfo> info = braid::decodeUniqueId(id);
  if (info.isOk()) {
    char again[braid::kUniqueIdBytes];
    braid::encodeUniqueId(info.value(), again);
    (void)info.value().root.toString();
  }
  return 0;
}
