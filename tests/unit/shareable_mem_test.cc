// ncclMemAlloc's host memory: a memfd another process maps and writes.
#include "src/common/shareable_mem.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace braid {
namespace {

TEST(ShareableMem, DescribedBuffersAreMappableByAnotherProcess) {
  bool shareable = false;
  Result<void*> r = allocShareable(3 * 4096 + 5, &shareable);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  char* base = static_cast<char*>(r.take());
  if (!shareable) GTEST_SKIP() << "memfd unavailable here";
  std::strcpy(base + 4096, "from the owner");

  const MemHandle inside = describeBuffer(base + 4096, 100);
  EXPECT_GE(inside.fd, 0);
  EXPECT_EQ(inside.offset, 4096u);
  EXPECT_GE(inside.allocBytes, 3u * 4096 + 5);
  EXPECT_EQ(describeBuffer(base + 4000, inside.allocBytes).fd, -1);  // runs past the allocation
  std::vector<char> heap(64);
  EXPECT_EQ(describeBuffer(heap.data(), heap.size()).fd, -1);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    PeerMappings maps;
    Result<char*> p = maps.resolve(inside);
    if (!p.isOk()) _exit(2);
    char* q = p.take();
    if (std::strcmp(q, "from the owner") != 0) _exit(3);
    std::strcpy(q, "from the peer");
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_STREQ(base + 4096, "from the peer");

  // Within the owning process a handle resolves to the address itself; private memory from elsewhere does not.
  PeerMappings maps;
  Result<char*> self = maps.resolve(inside);
  ASSERT_TRUE(self.isOk());
  EXPECT_EQ(self.take(), base + 4096);
  MemHandle foreign = describeBuffer(heap.data(), heap.size());
  foreign.pid = 1;
  EXPECT_FALSE(maps.resolve(foreign).isOk());

  EXPECT_TRUE(freeShareable(base).isOk());
  EXPECT_EQ(freeShareable(heap.data()).code(), Code::kInvalidArgument);
  EXPECT_EQ(freeShareable(base).code(), Code::kInvalidArgument);  // twice
}

}  // namespace
}  // namespace braid

namespace braid {
namespace {

// A peer that keeps allocating new buffers must not make the mapping cache grow without bound: mappings unused
// for two operations are dropped once the cache is full.
TEST(ShareableMem, PeerMappingCacheIsBounded) {
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  const int kBuffers = 200;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < kBuffers; ++i) {
      bool shareable = false;
      Result<void*> r = allocShareable(4096, &shareable);
      if (!r.isOk() || !shareable) _exit(2);
      char* p = static_cast<char*>(r.take());
      p[0] = static_cast<char>(i);
      const MemHandle h = describeBuffer(p, 4096);
      if (write(toParent[1], &h, sizeof(h)) != static_cast<ssize_t>(sizeof(h))) _exit(3);
    }
    char done = 0;
    if (read(toChild[0], &done, 1) != 1) _exit(4);  // keep the allocations alive until the parent is finished
    _exit(0);
  }
  PeerMappings maps;
  size_t most = 0;
  for (int i = 0; i < kBuffers; ++i) {
    MemHandle h;
    ASSERT_EQ(read(toParent[0], &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
    Result<char*> p = maps.resolve(h, static_cast<uint64_t>(i) + 1);
    ASSERT_TRUE(p.isOk()) << p.status().message();
    EXPECT_EQ(*p.take(), static_cast<char>(i));
    most = std::max(most, maps.cachedMappings());
  }
  EXPECT_LE(most, 64u);
  const char done = 1;
  ASSERT_EQ(write(toChild[1], &done, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace braid
