#include "transports/shm/shared_segment.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "src/common/logging.h"
#include "src/common/shareable_mem.h"

namespace braid {
namespace {

struct SegmentInfo {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t ino = 0;
  uint64_t bytes = 0;
};

}  // namespace

Result<std::unique_ptr<SharedSegment>> SharedSegment::create(const AllGatherFn& allGather, int rank, int nranks,
                                                             size_t bytes) {
  std::unique_ptr<SharedSegment> seg(new SharedSegment());
  seg->bytes_ = bytes;
  int ownFd = -1;  // rank 0 keeps the memfd open until every rank has mapped it
  std::vector<SegmentInfo> infos(static_cast<size_t>(nranks));
  if (rank == 0) {
    const int fd = memfd_create("braid-direct", MFD_CLOEXEC);
    struct stat st {};
    void* p = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0 && fstat(fd, &st) == 0) {
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (p != MAP_FAILED) {
      seg->base_ = static_cast<char*>(p);
      ownFd = fd;
      infos[0] = SegmentInfo{static_cast<int32_t>(getpid()), fd, static_cast<uint64_t>(st.st_ino), bytes};
    } else if (fd >= 0) {
      close(fd);
    }
  }
  Status gathered = allGather(infos.data(), sizeof(SegmentInfo)).withContext("direct segment");
  if (!gathered.isOk()) {
    if (ownFd >= 0) close(ownFd);
    return gathered;
  }
  int32_t ok = infos[0].fd >= 0 ? 1 : 0;
  if (rank != 0 && ok) {
    // Not populated: each rank touches its own stages first, so they are placed on its NUMA node.
    Result<void*> mapped = mapPeerFd(infos[0].pid, infos[0].fd, infos[0].ino, infos[0].bytes, false);
    if (mapped.isOk()) {
      seg->base_ = static_cast<char*>(mapped.take());
    } else {
      ok = 0;
      BRAID_INFO(kLogInit, "rank %d: no direct (NVLS-style) collectives: %s", rank, mapped.status().message().c_str());
    }
  }
  std::vector<int32_t> oks(static_cast<size_t>(nranks), 0);
  oks[static_cast<size_t>(rank)] = ok;
  Status agreed = allGather(oks.data(), sizeof(int32_t)).withContext("direct segment check");
  if (ownFd >= 0) close(ownFd);  // every rank has mapped it (or given up): the mappings keep it alive
  BRAID_RETURN_IF_ERROR(agreed);
  for (int32_t o : oks) {
    if (o == 0) return std::unique_ptr<SharedSegment>();  // the destructor unmaps
  }
  return seg;
}

SharedSegment::~SharedSegment() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

}  // namespace braid
