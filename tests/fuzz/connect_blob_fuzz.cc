// Fuzz target for the connect blobs a sender receives from its receiver through the bootstrap
// (transports/connect_blob.h): the inproc/shm, p2p and network descriptions. Any 256 bytes decode to a blob whose
// fields are within bounds or to an error naming the peer, never a crash. Corpus: tests/fixtures/fuzz/connect_blob.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transports/connect_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char blob[braid::kConnectBlobBytes] = {};
  std::memcpy(blob, data, size < sizeof(blob) ? size : sizeof(blob));
  braid::PeerInfo peer;
  peer.rank = 3;
  peer.pid = 4242;
  for (const char* kind : {"shm", "inproc"}) {
    braid::Result<braid::ShmBlob> b = braid::decodeShmBlob(blob, kind, peer, 4096);
    if (b.isOk() && std::strcmp(kind, "shm") == 0) {
      if (b.value().pid != 4242 || b.value().fd < 0 || b.value().bytes < 4096 ||
          b.value().bytes > braid::kMaxBlobSegmentBytes || std::strlen(b.value().name) >= sizeof(b.value().name)) {
        __builtin_trap();  // a blob outside the bounds passed
      }
    }
  }
  braid::Result<braid::P2pBlob> p = braid::decodeP2pBlob(blob, peer, 4096);
  if (p.isOk() && (p.value().pid != 4242 || p.value().bytes < 4096 || p.value().bytes > braid::kMaxBlobSegmentBytes ||
                   p.value().slotBytes % 64 != 0 || p.value().llSlotBytes % 64 != 0 || p.value().slotBytes < 64)) {
    __builtin_trap();
  }
  braid::Result<braid::NetBlob> n = braid::decodeNetBlob(blob, peer);
  if (n.isOk() && (n.value().slotBytes < 64 || n.value().slotBytes % 64 != 0)) __builtin_trap();
  return 0;
}
