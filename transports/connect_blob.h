// Connect blobs: what a receiver sends its sender through the bootstrap (kConnectBlobBytes) to describe the FIFO
// to attach to, per transport, and the checks a sender makes before it uses anything in one. The bootstrap
// authenticates the peer, but a blob from a mismatched build or a corrupted message must still fail by name, never
// map a wrong size or another process's file. Fuzzed by tests/fuzz/connect_blob_fuzz.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_net.h"
#include "src/common/fd_share.h"
#include "src/common/status.h"
#include "transports/transport.h"

namespace braid {

// The inproc and shm transports' blob.
struct ShmBlob {
  char kind[8];  // "inproc" or "shm"
  uint64_t bytes;
  uint64_t slotBytes;
  uint64_t id;
  char name[200];  // where it was created (messages only: it is unlinked at once)
  int32_t pid;     // shm: the receiver, which keeps the file open while the connector lives
  int32_t fd;
  uint64_t ino;
};
static_assert(sizeof(ShmBlob) <= kConnectBlobBytes, "blob too large");

// The network transport's blob: the receiver's listen handle.
struct NetBlob {
  char kind[8];  // "net"
  uint64_t slotBytes;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
};
static_assert(sizeof(NetBlob) <= kConnectBlobBytes, "the handle must fit the connect blob");

// The p2p transport's blob: a FIFO in the receiver's GPU memory.
struct P2pBlob {
  char kind[8];    // "p2p"
  uint64_t bytes;  // as mapped (the driver's granularity)
  uint64_t slotBytes;
  uint64_t llSlotBytes;
  uint64_t devPtr;  // same process: the FIFO's device address
  uint64_t id;      // same process: the transport's key for the mapping's owner
  int32_t pid;      // the receiver's process
  int32_t device;   // the receiver's CUDA ordinal (in its process)
  FdTicket ticket;  // another process: where to fetch the exported memory's descriptor
};
static_assert(sizeof(P2pBlob) <= kConnectBlobBytes, "blob too large");

// The largest FIFO segment and slot a blob may announce (NCCL_BUFFSIZE's range allows no more).
constexpr uint64_t kMaxBlobSegmentBytes = uint64_t{1} << 36;
constexpr uint64_t kMaxBlobSlotBytes = uint64_t{1} << 32;

// `blob` as a ShmBlob of `kind` ("inproc" or "shm") sent by `peer`. For "shm": the process must be the peer's (its
// pid from init), the descriptor non-negative, and the size between minBytes and kMaxBlobSegmentBytes. Errors
// (kInternalError) name the peer and the field.
Result<ShmBlob> decodeShmBlob(const char* blob, const char* kind, const PeerInfo& peer, uint64_t minBytes);
// `blob` as a P2pBlob sent by `peer`: kind "p2p", the peer's process, slot sizes in 64..kMaxBlobSlotBytes and
// multiples of 64, and a mapping of at least the FIFO's bytes (minBytes) and at most kMaxBlobSegmentBytes.
Result<P2pBlob> decodeP2pBlob(const char* blob, const PeerInfo& peer, uint64_t minBytes);
// `blob` as a NetBlob sent by `peer`: kind "net", slot size in 64..kMaxBlobSlotBytes and a multiple of 64.
Result<NetBlob> decodeNetBlob(const char* blob, const PeerInfo& peer);

}  // namespace braid
