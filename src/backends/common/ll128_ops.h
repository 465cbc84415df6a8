// LL128: the protocol between LL and Simple, defined here for the CUDA backend (the host backend does not run it).
//
// A line is 128 bytes: 15 eight-byte words of payload and, last, one eight-byte flag word. A warp writes a whole
// line with one 128-byte store per lane group; NVLink and PCIe deliver a 128-byte aligned store to the peer in
// order within the line, so a reader that sees the flag word of a line sees its 120 payload bytes too, with no
// fence (NCCL relies on the same property, and disables LL128 where a path does not guarantee it). Payload
// efficiency is 120/128 = 93.75 %, against LL's 50 %, at a latency close to LL's.
//
// On a CPU nothing makes a 128-byte store visible atomically, so the host reference below (used by tests, and by a
// CUDA backend's host-side checks) publishes the flag word with release and reads it with acquire: correct
// anywhere, but that ordering is exactly what the GPU path gets for free. Flags are llFlag(step), never 0. As with
// LL, when a writer may reuse a buffer is the caller's business (the reader copies after checking the flags).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/backends/common/ll_ops.h"
#include "src/backends/common/mem_order.h"
#include "src/common/host_device.h"

namespace braid {

constexpr size_t kLl128LineBytes = 128;
constexpr size_t kLl128WordsPerLine = kLl128LineBytes / 8;
constexpr size_t kLl128DataBytesPerLine = kLl128LineBytes - 8;  // the last word is the flag

// Lines that carry `bytes` of payload, and the buffer they need.
BRAID_HOST_DEVICE constexpr size_t ll128LineCount(size_t bytes) {
  return (bytes + kLl128DataBytesPerLine - 1) / kLl128DataBytesPerLine;
}
BRAID_HOST_DEVICE constexpr size_t ll128BufferBytes(size_t bytes) {
  return ll128LineCount(bytes) * kLl128LineBytes;
}
BRAID_HOST_DEVICE constexpr size_t ll128PayloadCapacity(size_t bufferBytes) {
  return bufferBytes / kLl128LineBytes * kLl128DataBytesPerLine;
}

struct alignas(kLl128LineBytes) Ll128Line {
  uint64_t data[kLl128WordsPerLine - 1];
  uint64_t flag;  // accessed only through mem_order.h
};
static_assert(sizeof(Ll128Line) == kLl128LineBytes, "an LL128 line is 128 bytes");

// Host reference writer: payload first, then the flag with release. The last line is zero-padded.
BRAID_HOST_DEVICE inline void ll128Write(Ll128Line* lines, const void* src, size_t bytes, uint32_t flag) {
  const char* p = static_cast<const char*>(src);
  for (size_t i = 0, n = ll128LineCount(bytes); i < n; ++i) {
    const size_t off = i * kLl128DataBytesPerLine;
    const size_t len = bytes - off < kLl128DataBytesPerLine ? bytes - off : kLl128DataBytesPerLine;
    memset(lines[i].data, 0, sizeof(lines[i].data));
    memcpy(lines[i].data, p + off, len);
    storeRelease(&lines[i].flag, static_cast<uint64_t>(flag));
  }
}

// Host reference reader: false (nothing written to dst) until every line carries `flag`.
BRAID_HOST_DEVICE inline bool ll128TryRead(const Ll128Line* lines, void* dst, size_t bytes, uint32_t flag) {
  const size_t n = ll128LineCount(bytes);
  for (size_t i = 0; i < n; ++i) {
    if (loadAcquire(&lines[i].flag) != flag) return false;
  }
  char* out = static_cast<char*>(dst);
  for (size_t i = 0; i < n; ++i) {
    const size_t off = i * kLl128DataBytesPerLine;
    const size_t len = bytes - off < kLl128DataBytesPerLine ? bytes - off : kLl128DataBytesPerLine;
    memcpy(out + off, lines[i].data, len);
  }
  return true;
}

}  // namespace braid
