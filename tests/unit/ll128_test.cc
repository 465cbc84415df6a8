// The LL128 line format's host reference.
#include "transports/ll128.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace braid {
namespace {

TEST(Ll128, SizesAndEfficiency) {
  EXPECT_EQ(ll128LineCount(0), 0u);
  EXPECT_EQ(ll128LineCount(1), 1u);
  EXPECT_EQ(ll128LineCount(120), 1u);
  EXPECT_EQ(ll128LineCount(121), 2u);
  EXPECT_EQ(ll128BufferBytes(1000), 9u * 128);
  EXPECT_EQ(ll128PayloadCapacity(128 * 8), 960u);
}

TEST(Ll128, RoundTripsAndStaleFlags) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{119}, size_t{120}, size_t{121}, size_t{4099}}) {
    std::vector<Ll128Line> lines(ll128LineCount(bytes) + 1);
    std::vector<unsigned char> src(bytes), dst(bytes + 1, 0xEE);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    const uint32_t flag = llFlag(5);
    if (bytes > 0) {
      EXPECT_FALSE(ll128TryRead(lines.data(), dst.data(), bytes, flag)) << "zeroed lines look valid";
    }
    ll128Write(lines.data(), src.data(), bytes, flag);
    EXPECT_FALSE(bytes > 0 && ll128TryRead(lines.data(), dst.data(), bytes, llFlag(6)));
    ASSERT_TRUE(ll128TryRead(lines.data(), dst.data(), bytes, flag));
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << bytes;
    EXPECT_EQ(dst[bytes], 0xEE) << "wrote past the destination";
  }
}

TEST(Ll128, StreamsBetweenThreads) {
  const int kMessages = 2000;
  const size_t bytes = 1000;
  std::vector<Ll128Line> lines(ll128LineCount(bytes));
  std::atomic<int> consumed{-1};
  std::thread producer([&] {
    std::vector<unsigned char> msg(bytes);
    for (int m = 0; m < kMessages; ++m) {
      while (consumed.load(std::memory_order_acquire) != m - 1) std::this_thread::yield();
      for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<unsigned char>(m + i);
      ll128Write(lines.data(), msg.data(), bytes, llFlag(static_cast<uint64_t>(m)));
    }
  });
  std::vector<unsigned char> got(bytes);
  int bad = 0;
  for (int m = 0; m < kMessages; ++m) {
    while (!ll128TryRead(lines.data(), got.data(), bytes, llFlag(static_cast<uint64_t>(m)))) std::this_thread::yield();
    for (size_t i = 0; i < bytes; ++i) bad += got[i] != static_cast<unsigned char>(m + i);
    consumed.store(m, std::memory_order_release);
  }
  producer.join();
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace braid
