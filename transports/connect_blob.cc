#include "transports/connect_blob.h"

#include <cstring>

namespace braid {
namespace {

// The blob's kind field, which must be a terminated string equal to `want`.
bool kindIs(const char (&kind)[8], const char* want) {
  return memchr(kind, '\0', sizeof(kind)) != nullptr && strcmp(kind, want) == 0;
}

}  // namespace

Result<ShmBlob> decodeShmBlob(const char* blob, const char* kind, const PeerInfo& peer, uint64_t minBytes) {
  ShmBlob b;
  memcpy(&b, blob, sizeof(b));
  b.name[sizeof(b.name) - 1] = '\0';
  if (!kindIs(b.kind, kind)) {
    return internalError("rank %d sent a connection description of kind \"%.8s\" to the %s transport", peer.rank,
                         b.kind, kind);
  }
  if (strcmp(kind, "shm") != 0) return b;
  if (b.pid != static_cast<int32_t>(peer.pid)) {
    return internalError("rank %d's shm FIFO description names process %d, but rank %d is process %d", peer.rank,
                         static_cast<int>(b.pid), peer.rank, static_cast<int>(peer.pid));
  }
  if (b.fd < 0) return internalError("rank %d's shm FIFO description has descriptor %d", peer.rank, b.fd);
  if (b.bytes < minBytes || b.bytes > kMaxBlobSegmentBytes) {
    return internalError("rank %d's shm FIFO description announces %llu bytes (expected %llu to %llu)", peer.rank,
                         static_cast<unsigned long long>(b.bytes), static_cast<unsigned long long>(minBytes),
                         static_cast<unsigned long long>(kMaxBlobSegmentBytes));
  }
  return b;
}

Result<P2pBlob> decodeP2pBlob(const char* blob, const PeerInfo& peer, uint64_t minBytes) {
  P2pBlob b;
  memcpy(&b, blob, sizeof(b));
  if (!kindIs(b.kind, "p2p")) {
    return internalError("rank %d sent a connection description of kind \"%.8s\" to the p2p transport", peer.rank,
                         b.kind);
  }
  if (b.pid != static_cast<int32_t>(peer.pid)) {
    return internalError("rank %d's p2p FIFO description names process %d, but rank %d is process %d", peer.rank,
                         static_cast<int>(b.pid), peer.rank, static_cast<int>(peer.pid));
  }
  for (uint64_t v : {b.slotBytes, b.llSlotBytes}) {
    if (v < 64 || v > kMaxBlobSlotBytes || v % 64 != 0) {
      return internalError(
          "rank %d's p2p FIFO description announces slots of %llu bytes (64 to %llu, a multiple of 64)", peer.rank,
          static_cast<unsigned long long>(v), static_cast<unsigned long long>(kMaxBlobSlotBytes));
    }
  }
  if (b.bytes < minBytes || b.bytes > kMaxBlobSegmentBytes) {
    return internalError("rank %d's p2p FIFO description announces %llu bytes (expected %llu to %llu)", peer.rank,
                         static_cast<unsigned long long>(b.bytes), static_cast<unsigned long long>(minBytes),
                         static_cast<unsigned long long>(kMaxBlobSegmentBytes));
  }
  return b;
}

Result<NetBlob> decodeNetBlob(const char* blob, const PeerInfo& peer) {
  NetBlob b;
  memcpy(&b, blob, sizeof(b));
  if (!kindIs(b.kind, "net")) {
    return internalError("rank %d sent a connection description of kind \"%.8s\", expected a network handle", peer.rank,
                         b.kind);
  }
  if (b.slotBytes < 64 || b.slotBytes > kMaxBlobSlotBytes || b.slotBytes % 64 != 0) {
    return internalError(
        "rank %d's network FIFO description announces slots of %llu bytes (64 to %llu, a multiple "
        "of 64)",
        peer.rank, static_cast<unsigned long long>(b.slotBytes), static_cast<unsigned long long>(kMaxBlobSlotBytes));
  }
  return b;
}

}  // namespace braid
