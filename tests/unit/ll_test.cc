// LL lines (transports/ll.h): round trips of every tail length, flags that must not be accepted (zeroed memory,
// a stale step, a partially rewritten slot), progressive reads, and a producer/consumer stream through a small
// ring of slots between two threads with every byte checked.
#include "transports/ll.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace braid {
namespace {

constexpr size_t kRoundTripSizes[] = {0, 1, 3, 4, 5, 8, 100, 4096 + 3};

// Deterministic bytes that differ between messages and between positions, so data from the wrong step or the
// wrong offset never compares equal by accident.
unsigned char patternByte(uint64_t message, size_t i) {
  uint64_t x = (message + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  return static_cast<unsigned char>(x ^ (x >> 17));
}

std::vector<unsigned char> pattern(uint64_t message, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = patternByte(message, i);
  return v;
}

// Lines start zeroed, like a fresh mmap or /dev/shm segment.
std::unique_ptr<LlLine[]> zeroedLines(size_t n) {
  auto lines = std::make_unique<LlLine[]>(n == 0 ? 1 : n);
  for (size_t i = 0; i < (n == 0 ? 1 : n); ++i) llStoreWord(&lines[i], 0);
  return lines;
}

TEST(LlTest, Sizes) {
  EXPECT_EQ(llLineCount(0), 0u);
  EXPECT_EQ(llLineCount(1), 1u);
  EXPECT_EQ(llLineCount(4), 1u);
  EXPECT_EQ(llLineCount(5), 2u);
  EXPECT_EQ(llBufferBytes(0), 0u);
  EXPECT_EQ(llBufferBytes(3), 8u);
  EXPECT_EQ(llBufferBytes(8), 16u);
  EXPECT_EQ(llBufferBytes(4099), 8 * 1025u);
  EXPECT_EQ(llPayloadCapacity(llBufferBytes(4096)), 4096u);
  EXPECT_EQ(llPayloadCapacity(15), 4u);
}

TEST(LlTest, FlagIsNeverZero) {
  EXPECT_EQ(llFlag(0), 1u);
  EXPECT_EQ(llFlag(1), 2u);
  EXPECT_EQ(llFlag(0xFFFFFFFEull), 0xFFFFFFFFu);
  EXPECT_EQ(llFlag(0xFFFFFFFFull), 1u);  // wraps past 0
  for (uint64_t base : {0ull, 0xFFFFFFFFull, 1ull << 32, 3ull << 40}) {
    for (uint64_t s = base; s < base + 4; ++s) EXPECT_NE(llFlag(s), 0u) << s;
  }
}

TEST(LlTest, RoundTrip) {
  for (size_t bytes : kRoundTripSizes) {
    SCOPED_TRACE(bytes);
    const size_t n = llLineCount(bytes);
    auto lines = zeroedLines(n);
    std::vector<unsigned char> src = pattern(7, bytes);
    llWrite(lines.get(), src.data(), bytes, llFlag(7));
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(llFlagOf(llLoadWord(&lines[i])), llFlag(7)) << "line " << i;
    if (bytes % kLlDataBytesPerLine != 0) {
      // Padding is zero, so the line's bytes are deterministic whatever src held beyond its end.
      uint32_t last = llDataOf(llLoadWord(&lines[n - 1]));
      size_t used = bytes % kLlDataBytesPerLine;
      unsigned char lastBytes[4];
      memcpy(lastBytes, &last, 4);
      for (size_t b = used; b < 4; ++b) EXPECT_EQ(lastBytes[b], 0) << "padding byte " << b;
    }
    // Guard bytes after dst catch a tail copy that writes a whole line.
    std::vector<unsigned char> dst(bytes + 8, 0xAB);
    ASSERT_TRUE(llTryRead(lines.get(), dst.data(), bytes, llFlag(7)));
    EXPECT_EQ(0, memcmp(dst.data(), src.data(), bytes));
    for (size_t i = bytes; i < dst.size(); ++i) EXPECT_EQ(dst[i], 0xAB) << "wrote past dst at " << i;
  }
}

TEST(LlTest, UnalignedSourceAndDestination) {
  for (size_t bytes : kRoundTripSizes) {
    for (size_t offset = 1; offset < 4; ++offset) {
      SCOPED_TRACE(testing::Message() << bytes << " bytes at offset " << offset);
      std::vector<unsigned char> src(bytes + offset), dst(bytes + offset + 4, 0);
      std::vector<unsigned char> want = pattern(offset, bytes);
      memcpy(src.data() + offset, want.data(), bytes);
      auto lines = zeroedLines(llLineCount(bytes));
      llWrite(lines.get(), src.data() + offset, bytes, llFlag(offset));
      ASSERT_TRUE(llTryRead(lines.get(), dst.data() + offset, bytes, llFlag(offset)));
      EXPECT_EQ(0, memcmp(dst.data() + offset, want.data(), bytes));
    }
  }
}

TEST(LlTest, ZeroedBufferIsNeverReady) {
  for (size_t bytes : kRoundTripSizes) {
    if (bytes == 0) continue;
    auto lines = zeroedLines(llLineCount(bytes));
    std::vector<unsigned char> dst(bytes);
    EXPECT_FALSE(llTryRead(lines.get(), dst.data(), bytes, llFlag(0))) << bytes;
  }
}

TEST(LlTest, EmptyMessageIsReadyAtOnce) {
  size_t done = 0;
  EXPECT_TRUE(llTryReadFrom(nullptr, nullptr, 0, llFlag(0), &done));
  EXPECT_EQ(done, 0u);
}

TEST(LlTest, EmptyFifoMessageIsOneFlagLine) {
  // A FIFO step with no payload still has to be seen to arrive: one line, flag only.
  std::unique_ptr<LlLine[]> lines = zeroedLines(2);
  size_t done = 0;
  EXPECT_FALSE(llTryReadMessage(lines.get(), nullptr, 0, llFlag(3), &done));
  llWriteMessage(lines.get(), nullptr, 0, llFlag(3));
  EXPECT_TRUE(llTryReadMessage(lines.get(), nullptr, 0, llFlag(3), &done));
  EXPECT_EQ(done, 1u);
  EXPECT_EQ(llFlagOf(llLoadWord(&lines[1])), 0u) << "an empty message writes one line only";
  size_t again = 0;
  EXPECT_FALSE(llTryReadMessage(lines.get(), nullptr, 0, llFlag(11), &again)) << "stale flag";
  // Non-empty messages are llWrite's.
  const uint32_t v = 0xdeadbeef;
  uint32_t got = 0;
  llWriteMessage(lines.get(), &v, sizeof(v), llFlag(4));
  size_t d2 = 0;
  EXPECT_TRUE(llTryReadMessage(lines.get(), &got, sizeof(got), llFlag(4), &d2));
  EXPECT_EQ(got, v);
}

TEST(LlTest, StaleFlagIsNotAccepted) {
  const size_t bytes = 100;
  auto lines = zeroedLines(llLineCount(bytes));
  std::vector<unsigned char> src = pattern(3, bytes), dst(bytes);
  llWrite(lines.get(), src.data(), bytes, llFlag(3));
  // The reader of step 4 (next use of this slot) and a reader of an older step must both keep waiting.
  EXPECT_FALSE(llTryRead(lines.get(), dst.data(), bytes, llFlag(4)));
  EXPECT_FALSE(llTryRead(lines.get(), dst.data(), bytes, llFlag(2)));
  EXPECT_TRUE(llTryRead(lines.get(), dst.data(), bytes, llFlag(3)));
}

TEST(LlTest, RewriteWithNextFlagReadsNewerData) {
  for (size_t bytes : kRoundTripSizes) {
    if (bytes == 0) continue;
    SCOPED_TRACE(bytes);
    auto lines = zeroedLines(llLineCount(bytes));
    std::vector<unsigned char> older = pattern(10, bytes), newer = pattern(11, bytes), dst(bytes);
    llWrite(lines.get(), older.data(), bytes, llFlag(10));
    llWrite(lines.get(), newer.data(), bytes, llFlag(11));  // no clearing in between
    EXPECT_FALSE(llTryRead(lines.get(), dst.data(), bytes, llFlag(10)));
    ASSERT_TRUE(llTryRead(lines.get(), dst.data(), bytes, llFlag(11)));
    EXPECT_EQ(0, memcmp(dst.data(), newer.data(), bytes));
  }
}

// A slot half rewritten for the next step: the reader of the next step gets the new half and stops exactly at the
// first line still carrying the old flag, then resumes from there once the rest arrives.
TEST(LlTest, ProgressiveReadStopsAtFirstStaleLine) {
  const size_t bytes = 4096 + 3;
  const size_t n = llLineCount(bytes);
  auto lines = zeroedLines(n);
  std::vector<unsigned char> older = pattern(20, bytes), newer = pattern(21, bytes), dst(bytes, 0);
  llWrite(lines.get(), older.data(), bytes, llFlag(20));

  const size_t firstBytes = 1000;  // whole lines
  llWrite(lines.get(), newer.data(), firstBytes, llFlag(21));
  size_t done = 0;
  EXPECT_FALSE(llTryReadFrom(lines.get(), dst.data(), bytes, llFlag(21), &done));
  EXPECT_EQ(done, firstBytes / kLlDataBytesPerLine);
  EXPECT_EQ(0, memcmp(dst.data(), newer.data(), firstBytes));

  // Everything but the tail line.
  const size_t bodyBytes = bytes / kLlDataBytesPerLine * kLlDataBytesPerLine;
  llWrite(lines.get() + done, newer.data() + firstBytes, bodyBytes - firstBytes, llFlag(21));
  EXPECT_FALSE(llTryReadFrom(lines.get(), dst.data(), bytes, llFlag(21), &done));
  EXPECT_EQ(done, n - 1);

  llWrite(lines.get() + done, newer.data() + bodyBytes, bytes - bodyBytes, llFlag(21));
  EXPECT_TRUE(llTryReadFrom(lines.get(), dst.data(), bytes, llFlag(21), &done));
  EXPECT_EQ(done, n);
  EXPECT_EQ(0, memcmp(dst.data(), newer.data(), bytes));
  // Asking again after completion is harmless.
  EXPECT_TRUE(llTryReadFrom(lines.get(), dst.data(), bytes, llFlag(21), &done));
}

// Two threads stream messages of varying length through a ring of a few LL slots. The flag is the only data-path
// signal; the consumer hands slots back through a head counter (release/acquire), as a connector would. Every
// message has its own byte pattern and a slot is reused every kSlots messages, so a reader that accepted a line
// before its data arrived, or data left from the slot's previous message, fails the byte check. The consumer reads
// progressively so it often overlaps the producer's writes into the same slot.
// Spinning keeps the two threads racing; the occasional yield keeps the test fast when both share one CPU (a busy
// machine running tests in parallel), where pure spinning would hand over only at the end of each time slice.
void backOff(uint32_t spins) {
  if (spins % 64 == 63) std::this_thread::yield();
}

TEST(LlTest, ProducerConsumerRing) {
  constexpr size_t kSlots = 4;
  constexpr size_t kSlotPayload = 4096;
  constexpr uint64_t kMessages = 10000;
  constexpr auto kTimeout = std::chrono::seconds(20);
  const size_t slotLines = llLineCount(kSlotPayload);
  auto ring = zeroedLines(kSlots * slotLines);
  std::atomic<uint64_t> head{0};  // messages consumed
  std::atomic<bool> failed{false};

  auto sizeOf = [](uint64_t m) { return static_cast<size_t>((m * 37) % (kSlotPayload + 1)); };  // 0..kSlotPayload

  std::thread producer([&] {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (uint64_t m = 0; m < kMessages; ++m) {
      for (uint32_t spins = 0; head.load(std::memory_order_acquire) + kSlots <= m; ++spins) {
        backOff(spins);
        if (failed.load(std::memory_order_relaxed)) return;
        if (std::chrono::steady_clock::now() > deadline) {
          failed.store(true);
          ADD_FAILURE() << "producer timed out waiting for slot of message " << m;
          return;
        }
      }
      std::vector<unsigned char> src = pattern(m, sizeOf(m));
      llWrite(ring.get() + (m % kSlots) * slotLines, src.data(), src.size(), llFlag(m));
    }
  });

  uint64_t badMessages = 0;
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  std::vector<unsigned char> dst(kSlotPayload);
  for (uint64_t m = 0; m < kMessages && !failed.load(); ++m) {
    const size_t bytes = sizeOf(m);
    // Prepared before waiting, so the consumer is the faster side and often reads a slot while it is being written.
    const std::vector<unsigned char> want = pattern(m, bytes);
    size_t done = 0;
    for (uint32_t spins = 0; !llTryReadFrom(ring.get() + (m % kSlots) * slotLines, dst.data(), bytes, llFlag(m), &done);
         ++spins) {
      backOff(spins);
      if (std::chrono::steady_clock::now() > deadline) {
        failed.store(true);
        ADD_FAILURE() << "consumer timed out on message " << m << " after " << done << " lines";
        break;
      }
    }
    if (memcmp(dst.data(), want.data(), bytes) != 0 && badMessages++ < 10) {
      size_t i = 0;
      while (dst[i] == want[i]) ++i;
      ADD_FAILURE() << "message " << m << " (" << bytes << " bytes) differs first at byte " << i << ": got "
                    << int(dst[i]) << ", want " << int(want[i]);
    }
    head.store(m + 1, std::memory_order_release);
  }
  producer.join();
  EXPECT_EQ(badMessages, 0u);
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(head.load(), kMessages);
}

}  // namespace
}  // namespace braid
