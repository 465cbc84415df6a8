// ncclMemAlloc's host memory: a memfd another process maps and writes.
#include "src/common/shareable_mem.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
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

// Pages of [p, p + bytes) this process has no page-table entry for (/proc/self/pagemap's present bit), or -1 when
// pagemap cannot be read here.
long unmappedPages(const void* p, size_t bytes) {
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page;
  std::vector<uint64_t> entries((bytes + page - 1) / page);
  const ssize_t want = static_cast<ssize_t>(entries.size() * sizeof(uint64_t));
  const ssize_t got = pread(fd, entries.data(), static_cast<size_t>(want), static_cast<off_t>(first * 8));
  close(fd);
  if (got != want) return -1;
  long missing = 0;
  for (uint64_t e : entries) missing += (e >> 63) == 0 ? 1 : 0;
  return missing;
}

// ncclMemAlloc's pages, and a peer's mapping of them, are mapped before anyone touches them, as cuMemCreate's are:
// an operation on fresh stretches of a buffer pays no page faults (regression: nccl-tests' rotation through a
// 256 MB buffer made 256 KB all-reduces on ncclMemAlloc buffers 3-4 GB/s instead of 8-9).
TEST(ShareableMem, AllocationsAndPeerMappingsArePopulated) {
  constexpr size_t kBytes = 8u << 20;
  bool shareable = false;
  Result<void*> r = allocShareable(kBytes, &shareable);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  char* base = static_cast<char*>(r.take());
  if (!shareable) GTEST_SKIP() << "memfd unavailable here";
  const long own = unmappedPages(base, kBytes);
  if (own < 0) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
  EXPECT_EQ(own, 0) << "of the owner's pages";
  EXPECT_EQ(base[kBytes - 1], 0);  // still zeroed

  const MemHandle h = describeBuffer(base, kBytes);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<void*> m = mapPeerFd(h.pid, h.fd, h.ino, h.allocBytes, true);
    if (!m.isOk()) _exit(2);
    _exit(unmappedPages(m.value(), kBytes) == 0 ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the peer could not map the buffer; 3: its mapping has pages not mapped";
  EXPECT_TRUE(freeShareable(base).isOk());

  // More than the host has is refused by name at once, not left to fail at a first touch.
  const long pages = sysconf(_SC_PHYS_PAGES);
  if (pages <= 0) return;  // the host's size is unknown here: nothing to refuse
  const size_t host = static_cast<size_t>(pages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  Result<void*> huge = allocShareable(host + (1u << 30), &shareable);
  ASSERT_FALSE(huge.isOk());
  EXPECT_EQ(huge.status().code(), Code::kSystemError);
  EXPECT_NE(huge.status().message().find("more than this host's memory"), std::string::npos) << huge.status().message();
}

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
