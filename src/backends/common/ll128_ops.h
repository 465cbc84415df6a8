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

// Line i of a `bytes` message from src: payload (zero-padded), then the flag with release.
BRAID_HOST_DEVICE inline void ll128StoreLine(Ll128Line* lines, const void* src, size_t bytes, size_t i, uint32_t flag) {
  const size_t off = i * kLl128DataBytesPerLine;
  const size_t len = off >= bytes ? 0 : bytes - off < kLl128DataBytesPerLine ? bytes - off : kLl128DataBytesPerLine;
  memset(lines[i].data, 0, sizeof(lines[i].data));
  if (len != 0) memcpy(lines[i].data, static_cast<const char*>(src) + off, len);
  storeRelease(&lines[i].flag, static_cast<uint64_t>(flag));
}

// Line i's payload into dst, if it carries `flag` (acquire); false otherwise.
BRAID_HOST_DEVICE inline bool ll128LoadLine(const Ll128Line* lines, void* dst, size_t bytes, size_t i, uint32_t flag) {
  if (loadAcquire(&lines[i].flag) != flag) return false;
  const size_t off = i * kLl128DataBytesPerLine;
  if (off < bytes) {
    const size_t len = bytes - off < kLl128DataBytesPerLine ? bytes - off : kLl128DataBytesPerLine;
    memcpy(static_cast<char*>(dst) + off, lines[i].data, len);
  }
  return true;
}

// Host reference writer: every line of the payload.
BRAID_HOST_DEVICE inline void ll128Write(Ll128Line* lines, const void* src, size_t bytes, uint32_t flag) {
  for (size_t i = 0, n = ll128LineCount(bytes); i < n; ++i) ll128StoreLine(lines, src, bytes, i, flag);
}

// Host reference reader: false (nothing written to dst) until every line carries `flag`.
BRAID_HOST_DEVICE inline bool ll128TryRead(const Ll128Line* lines, void* dst, size_t bytes, uint32_t flag) {
  const size_t n = ll128LineCount(bytes);
  for (size_t i = 0; i < n; ++i) {
    if (loadAcquire(&lines[i].flag) != flag) return false;
  }
  for (size_t i = 0; i < n; ++i) ll128LoadLine(lines, dst, bytes, i, flag);
  return true;
}

// FIFO messages for a CTA of several threads, as ll_ops.h's: each thread writes or reads the lines first,
// first + stride, ... (a zero-byte message is its one empty line). A read returns whether every one of this
// thread's lines carries `flag`; dst may hold a prefix on false.
BRAID_HOST_DEVICE inline void ll128WriteMessageLines(Ll128Line* lines, const void* src, size_t bytes, uint32_t flag,
                                                     size_t first, size_t stride) {
  const size_t n = bytes == 0 ? 1 : ll128LineCount(bytes);
  for (size_t i = first; i < n; i += stride) ll128StoreLine(lines, src, bytes, i, flag);
}

BRAID_HOST_DEVICE inline bool ll128TryReadMessageLines(const Ll128Line* lines, void* dst, size_t bytes, uint32_t flag,
                                                       size_t first, size_t stride) {
  const size_t n = bytes == 0 ? 1 : ll128LineCount(bytes);
  for (size_t i = first; i < n; i += stride) {
    if (!ll128LoadLine(lines, dst, bytes, i, flag)) return false;
  }
  return true;
}

}  // namespace braid
