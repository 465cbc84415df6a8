// stripedCopy (reduce.h): memmove for the host kernels, reading ranges between kStripeMinBytes and
// kStripeMaxCopyBytes as four interleaved streams.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "src/backends/cpu/reduce.h"

namespace braid {
namespace {

std::vector<unsigned char> pattern(size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(i * 131 + (i >> 9) * 7 + 3);
  return v;
}

TEST(StripedCopy, IsMemcpyAroundItsBoundsAtOddAlignments) {
  // Sizes around both bounds (whole pieces, a remainder, a size no piece divides), sources and destinations at odd
  // offsets; the bytes around the destination stay untouched.
  const std::vector<unsigned char> src = pattern(kStripeMaxCopyBytes + 64);
  for (size_t bytes : {kStripeMinBytes - 1, kStripeMinBytes, kStripeMinBytes + 4 * 256 + 77, size_t{3} << 20,
                       kStripeMaxCopyBytes - 1, kStripeMaxCopyBytes}) {
    for (size_t from : {size_t{0}, size_t{3}}) {
      for (size_t to : {size_t{0}, size_t{9}}) {
        std::vector<unsigned char> want(bytes + 32, 0xEE), got(bytes + 32, 0xEE);
        std::memcpy(want.data() + to, src.data() + from, bytes);
        stripedCopy(got.data() + to, src.data() + from, bytes);
        ASSERT_TRUE(want == got) << "bytes " << bytes << " from " << from << " to " << to;
      }
    }
  }
}

TEST(StripedCopy, IsMemmoveForOverlappingAndTouchingRanges) {
  // Overlapping ranges go to memmove; ranges that only touch (a shift of exactly the size) are distinct and striped.
  const size_t bytes = kStripeMinBytes + 5000;
  const std::vector<unsigned char> base = pattern(3 * bytes);
  for (ptrdiff_t shift : {-static_cast<ptrdiff_t>(bytes), ptrdiff_t{-4096}, ptrdiff_t{-1}, ptrdiff_t{1}, ptrdiff_t{300},
                          static_cast<ptrdiff_t>(bytes)}) {
    std::vector<unsigned char> want = base, got = base;
    std::memmove(want.data() + bytes + shift, want.data() + bytes, bytes);
    stripedCopy(got.data() + bytes + shift, got.data() + bytes, bytes);
    ASSERT_TRUE(want == got) << "shifted by " << shift;
  }
}

TEST(StripedCopy, SameBufferAndNoBytesTouchNothing) {
  std::vector<unsigned char> buf = pattern(kStripeMinBytes * 2);
  const std::vector<unsigned char> before = buf;
  stripedCopy(buf.data(), buf.data(), buf.size());
  EXPECT_TRUE(buf == before);
  stripedCopy(nullptr, nullptr, 0);  // NCCL allows a count of 0 with any buffers
  stripedCopy(buf.data(), nullptr, 0);
  stripedCopy(nullptr, buf.data(), 0);
  EXPECT_TRUE(buf == before);
}

}  // namespace
}  // namespace braid
