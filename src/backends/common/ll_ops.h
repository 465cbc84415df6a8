// LL ("low latency") protocol: every 8-byte word of a buffer carries 4 bytes of payload and a 4-byte flag, and is
// written with one 8-byte atomic store. A reader that sees the expected flag in a word also sees that word's data,
// so the flag is the only signal: no tail counter, no fence, no second cache line to bounce between the two ends.
// The price is bandwidth (half of every line is flag) and a per-word check on the reader, so LL suits small
// messages; Simple (transport.h) stays the protocol for large ones.
//
// Line size. NCCL's GPU LL line is 16 bytes (two data words and two flags, one 128-bit store). We use 8-byte lines:
// a 16-byte store is atomic only with cmpxchg16b or vendor-specific SSE/AVX guarantees on the host, while an
// aligned 8-byte store is atomic on every 64-bit CPU and on the GPU, and an 8-byte __atomic access is lock-free
// (checked below), which a buffer shared between processes needs. The payload fraction (one half) is the same.
//
// Flags. A message written at step s carries llFlag(s), which is never 0: a zeroed buffer never looks valid, and a
// slot reused by a later step needs no clearing because the old flag simply no longer matches. Flags are compared
// for equality, never ordered, so wrap-around after 2^32-1 steps is harmless as long as a ring has fewer slots.
//
// Ownership of a buffer (when may the writer overwrite it?) is not this header's business: the caller returns
// slots to the writer (a head counter with release/acquire, or the reply of a ping-pong). Overwriting too early
// cannot hand the reader wrong bytes (the flag would not match); it can only make the reader wait forever, which
// its deadline catches.
//
// Memory access goes through llStoreWord/llLoadWord only (mem_order.h), and every function here is
// BRAID_HOST_DEVICE: the CPU executor and the CUDA kernel run this same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/backends/common/mem_order.h"
#include "src/common/host_device.h"

namespace braid {

constexpr size_t kLlLineBytes = 8;         // one atomic word per line
constexpr size_t kLlDataBytesPerLine = 4;  // the other 4 bytes are the flag

// A line is a plain 8-byte word in memory, accessed only through llStoreWord/llLoadWord (mem_order.h).
using LlLine = uint64_t;
static_assert(sizeof(LlLine) == kLlLineBytes, "an LL line must be exactly one 8-byte word");
static_assert(__atomic_always_lock_free(sizeof(LlLine), 0), "LL lines in shared memory need lock-free 8-byte atomics");

// Lines that carry `bytes` of payload (the last one zero-padded).
BRAID_HOST_DEVICE constexpr size_t llLineCount(size_t bytes) {
  return (bytes + kLlDataBytesPerLine - 1) / kLlDataBytesPerLine;
}

// Buffer bytes needed to send `bytes` of payload as LL lines: twice the payload, rounded up to a whole line.
BRAID_HOST_DEVICE constexpr size_t llBufferBytes(size_t bytes) {
  return llLineCount(bytes) * kLlLineBytes;
}

// Largest payload that fits in a buffer of `bufferBytes`.
BRAID_HOST_DEVICE constexpr size_t llPayloadCapacity(size_t bufferBytes) {
  return bufferBytes / kLlLineBytes * kLlDataBytesPerLine;
}

// The flag of the message written at `step` (0-based): in [1, 2^32-1], so never the value of zeroed memory.
BRAID_HOST_DEVICE constexpr uint32_t llFlag(uint64_t step) {
  return static_cast<uint32_t>(step % 0xFFFFFFFFu) + 1;
}

// Data in the low half, flag in the high half. Both ends pack and unpack by value, so the layout in memory only
// matters to another implementation of this protocol (a GPU kernel), which must pack the same way.
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint64_t llPack(uint32_t data, uint32_t flag) {
  return (static_cast<uint64_t>(flag) << 32) | data;
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint32_t llFlagOf(uint64_t word) {
  return static_cast<uint32_t>(word >> 32);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint32_t llDataOf(uint64_t word) {
  return static_cast<uint32_t>(word);
}

// Relaxed is enough on both sides: data and flag are parts of one atomic object, and an atomic load returns
// exactly one earlier store to it, never a mix. So a reader that sees the expected flag holds the data of the
// same store, without any happens-before edge to the writer. The reader checks every word it uses, never infers
// one word's readiness from another's flag, and touches no other memory the writer produced; so no acquire,
// release or fence is needed (on x86 these are plain movs; on Arm, plain ldr/str instead of ldar/stlr).
// The scope is the system's: the reader may be another process, a GPU or the host.
BRAID_HOST_DEVICE BRAID_FORCE_INLINE void llStoreWord(LlLine* line, uint64_t word) {
  storeRelaxed(line, word);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint64_t llLoadWord(const LlLine* line) {
  return loadRelaxed(line);
}

// Writes `bytes` of src (any length, any alignment) into llLineCount(bytes) lines, all stamped with `flag`.
BRAID_HOST_DEVICE inline void llWrite(LlLine* lines, const void* src, size_t bytes, uint32_t flag) {
  const auto* in = static_cast<const unsigned char*>(src);
  const size_t full = bytes / kLlDataBytesPerLine;
  for (size_t i = 0; i < full; ++i) {
    uint32_t data;
    memcpy(&data, in + i * kLlDataBytesPerLine, sizeof(data));  // src need not be 4-byte aligned
    llStoreWord(lines + i, llPack(data, flag));
  }
  const size_t tail = bytes - full * kLlDataBytesPerLine;
  if (tail != 0) {
    uint32_t data = 0;  // padding is zero so the line's content is deterministic
    memcpy(&data, in + full * kLlDataBytesPerLine, tail);
    llStoreWord(lines + full, llPack(data, flag));
  }
}

// Non-blocking, resumable read. Copies the lines from *linesDone up to the first one whose flag is not `flag` yet
// into dst, advances *linesDone past them, and returns true once all llLineCount(bytes) lines are in. The caller
// loops (checking its deadline and abort flag between calls) and never re-reads lines it already has, so a large
// message is consumed while it is still being written.
BRAID_HOST_DEVICE inline bool llTryReadFrom(const LlLine* lines, void* dst, size_t bytes, uint32_t flag,
                                            size_t* linesDone) {
  auto* out = static_cast<unsigned char*>(dst);
  const size_t full = bytes / kLlDataBytesPerLine;
  size_t i = *linesDone;
  for (; i < full; ++i) {
    const uint64_t word = llLoadWord(lines + i);
    if (llFlagOf(word) != flag) {
      *linesDone = i;
      return false;
    }
    const uint32_t data = llDataOf(word);
    memcpy(out + i * kLlDataBytesPerLine, &data, sizeof(data));
  }
  const size_t tail = bytes - full * kLlDataBytesPerLine;
  if (tail != 0 && i == full) {
    const uint64_t word = llLoadWord(lines + full);
    if (llFlagOf(word) != flag) {
      *linesDone = full;
      return false;
    }
    const uint32_t data = llDataOf(word);
    memcpy(out + full * kLlDataBytesPerLine, &data, tail);  // never past dst + bytes
    i = full + 1;
  }
  *linesDone = i;
  return true;
}

// Non-blocking read of a whole message: true when every line carries `flag` (dst then holds the payload). On false
// dst may hold a prefix of the message; llTryReadFrom avoids re-reading that prefix on the next attempt.
BRAID_HOST_DEVICE inline bool llTryRead(const LlLine* lines, void* dst, size_t bytes, uint32_t flag) {
  size_t done = 0;
  return llTryReadFrom(lines, dst, bytes, flag, &done);
}

// FIFO messages: a step's slot always carries at least one line, so an empty block (a short last tile) is still
// seen to arrive. An empty message is one line with a zero payload.
BRAID_HOST_DEVICE inline void llWriteMessage(LlLine* lines, const void* src, size_t bytes, uint32_t flag) {
  if (bytes == 0) {
    llStoreWord(lines, llPack(0, flag));
    return;
  }
  llWrite(lines, src, bytes, flag);
}

BRAID_HOST_DEVICE inline bool llTryReadMessage(const LlLine* lines, void* dst, size_t bytes, uint32_t flag,
                                               size_t* linesDone) {
  if (bytes != 0) return llTryReadFrom(lines, dst, bytes, flag, linesDone);
  if (*linesDone == 0 && llFlagOf(llLoadWord(lines)) != flag) return false;
  *linesDone = 1;
  return true;
}

// The same for a CTA of several threads: each thread writes or reads the lines first, first + stride, ... of the
// message (a zero-byte message is its one empty line). A read returns whether every one of this thread's lines
// carries `flag`; it is not resumable (the next attempt starts over), and dst may hold a prefix on false.
BRAID_HOST_DEVICE inline void llWriteMessageLines(LlLine* lines, const void* src, size_t bytes, uint32_t flag,
                                                  size_t first, size_t stride) {
  const auto* in = static_cast<const unsigned char*>(src);
  const size_t n = bytes == 0 ? 1 : llLineCount(bytes);
  for (size_t i = first; i < n; i += stride) {
    const size_t off = i * kLlDataBytesPerLine;
    const size_t len = bytes - off < kLlDataBytesPerLine ? bytes - off : kLlDataBytesPerLine;
    uint32_t data = 0;
    if (bytes != 0) memcpy(&data, in + off, len);
    llStoreWord(lines + i, llPack(data, flag));
  }
}

BRAID_HOST_DEVICE inline bool llTryReadMessageLines(const LlLine* lines, void* dst, size_t bytes, uint32_t flag,
                                                    size_t first, size_t stride) {
  auto* out = static_cast<unsigned char*>(dst);
  const size_t n = bytes == 0 ? 1 : llLineCount(bytes);
  for (size_t i = first; i < n; i += stride) {
    const uint64_t word = llLoadWord(lines + i);
    if (llFlagOf(word) != flag) return false;
    if (bytes == 0) continue;
    const uint32_t data = llDataOf(word);
    const size_t off = i * kLlDataBytesPerLine;
    const size_t len = bytes - off < kLlDataBytesPerLine ? bytes - off : kLlDataBytesPerLine;
    memcpy(out + off, &data, len);
  }
  return true;
}

}  // namespace braid
