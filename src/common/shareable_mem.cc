#include "src/common/shareable_mem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace braid {
namespace {

struct Allocation {
  size_t bytes = 0;
  int fd = -1;  // -1: private memory (posix_memalign), when memfd was unavailable
  uint64_t ino = 0;
};

// Live allocations (shareable and private) by base address: what ncclMemFree may free.
std::mutex gAllocMu;
std::map<uintptr_t, Allocation>& allocations() {
  static auto* m = new std::map<uintptr_t, Allocation>();  // never destroyed: frees may run during exit
  return *m;
}

size_t pageBytes() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t roundToPage(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + pageBytes() - 1) / pageBytes() * pageBytes();
}

}  // namespace

Result<void*> allocShareable(size_t bytes, bool* shareable) {
  *shareable = false;
  // Rounding up to whole pages must not wrap around to a tiny buffer; nor may the size exceed what mmap and
  // ftruncate take (off_t).
  if (bytes > static_cast<size_t>(PTRDIFF_MAX) - pageBytes()) {
    return invalidArgument("size=%zu is larger than any allocation can be (at most %zu bytes)", bytes,
                           static_cast<size_t>(PTRDIFF_MAX) - pageBytes());
  }
  const size_t rounded = roundToPage(bytes);
  const long hostPages = sysconf(_SC_PHYS_PAGES);
  const size_t hostBytes = hostPages > 0 ? static_cast<size_t>(hostPages) * pageBytes() : 0;
  if (hostBytes > 0 && rounded > hostBytes) {
    return systemError("size=%zu is more than this host's memory (%zu bytes)", bytes, hostBytes);
  }
  const int fd = memfd_create("braid-buffer", MFD_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    void* p = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(rounded)) == 0 && fstat(fd, &st) == 0) {
      // The pages are allocated and mapped now, as cuMemCreate's are: a host short of memory fails here, by name,
      // not with SIGBUS at a first touch inside a collective; and no operation pays for faulting pages in (nccl-tests
      // moves every iteration to fresh stretches of its buffers: page faults made 256 KB all-reduces 10x slower).
      // A pending signal interrupts a large fallocate; a sandbox that forbids it (or a kernel without it) leaves
      // the pages to be allocated at first touch, as before.
      int r = 0;
      do {
        r = fallocate(fd, 0, 0, static_cast<off_t>(rounded));
      } while (r != 0 && errno == EINTR);
      if (r != 0 && (errno == ENOSPC || errno == ENOMEM || errno == EFBIG)) {
        const int err = errno;
        close(fd);
        return errnoError(err,
                          "cannot allocate %zu bytes of shareable host memory (the host, or the memory limit of "
                          "its cgroup, is short of it)",
                          rounded);
      }
      p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    }
    if (p != MAP_FAILED) {
      std::lock_guard<std::mutex> lock(gAllocMu);
      allocations()[reinterpret_cast<uintptr_t>(p)] = Allocation{rounded, fd, static_cast<uint64_t>(st.st_ino)};
      *shareable = true;
      return p;
    }
    close(fd);
  }
  void* p = nullptr;
  if (posix_memalign(&p, pageBytes(), rounded) != 0) {
    return systemError("cannot allocate %zu bytes of host memory", bytes);
  }
  std::memset(p, 0, rounded);  // zeroed, like the memfd pages
  std::lock_guard<std::mutex> lock(gAllocMu);
  allocations()[reinterpret_cast<uintptr_t>(p)] = Allocation{rounded, -1, 0};
  return p;
}

Status freeShareable(void* p) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    auto it = allocations().find(reinterpret_cast<uintptr_t>(p));
    if (it == allocations().end()) {
      // Inside a live allocation, or nowhere braid knows: either way, nothing is freed.
      auto above = allocations().upper_bound(reinterpret_cast<uintptr_t>(p));
      if (above != allocations().begin()) {
        --above;
        if (reinterpret_cast<uintptr_t>(p) < above->first + above->second.bytes) {
          return invalidArgument("ptr=%p is inside the buffer %p that ncclMemAlloc returned, not its start", p,
                                 reinterpret_cast<void*>(above->first));
        }
      }
      return invalidArgument(
          "ptr=%p was not returned by ncclMemAlloc, or was already freed (memory from malloc or new is freed with "
          "free or delete)",
          p);
    }
    a = it->second;
    allocations().erase(it);
  }
  if (a.fd < 0) {
    free(p);
    return Status::ok();
  }
  munmap(p, a.bytes);
  close(a.fd);
  return Status::ok();
}

MemHandle describeBuffer(const void* p, size_t bytes) {
  MemHandle h;
  h.pid = static_cast<int32_t>(getpid());
  h.addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(gAllocMu);
  auto& all = allocations();
  auto it = all.upper_bound(h.addr);
  if (it == all.begin()) return h;
  --it;
  const uintptr_t base = it->first;
  if (it->second.fd < 0 || h.addr + bytes > base + it->second.bytes) return h;
  h.fd = it->second.fd;
  h.ino = it->second.ino;
  h.offset = h.addr - base;
  h.allocBytes = it->second.bytes;
  return h;
}

Result<void*> mapPeerFd(int32_t pid, int32_t fd, uint64_t ino, size_t bytes, bool populate) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", static_cast<int>(pid), static_cast<int>(fd));
  const int local = open(path, O_RDWR | O_CLOEXEC);
  if (local < 0) return errnoError(errno, "cannot open %s (the memory of process %d)", path, static_cast<int>(pid));
  struct stat st {};
  if (fstat(local, &st) != 0 || static_cast<uint64_t>(st.st_ino) != ino) {
    close(local);
    return internalError("%s is no longer the shared allocation it was (process %d freed it?)", path,
                         static_cast<int>(pid));
  }
  // Mapping past the end of the file would turn a wrong size into SIGBUS at the first access.
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    close(local);
    return internalError("%s holds %lld bytes, fewer than the %zu announced for process %d's memory", path,
                         static_cast<long long>(st.st_size), bytes, static_cast<int>(pid));
  }
  // Populated, a pool of many GB would cost its page tables in every peer at once; up to kPopulateMaxBytes the
  // faults are taken here rather than page by page inside operations.
  const int flags = MAP_SHARED | (populate && bytes <= kPopulateMaxBytes ? MAP_POPULATE : 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, local, 0);
  const int err = errno;
  close(local);
  if (p == MAP_FAILED) return errnoError(err, "mmap of %zu bytes of process %d's memory", bytes, static_cast<int>(pid));
  return p;
}

PeerMappings::~PeerMappings() {
  for (auto& kv : maps_) munmap(kv.second.base, kv.second.bytes);
}

Result<char*> PeerMappings::resolve(const MemHandle& h, uint64_t epoch) {
  if (h.pid == static_cast<int32_t>(getpid())) return reinterpret_cast<char*>(h.addr);
  if (h.fd < 0) {
    return invalidUsage("a buffer of process %d is private memory; only ncclMemAlloc buffers can be reached directly",
                        static_cast<int>(h.pid));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_pair(h.pid, h.ino);
  auto it = maps_.find(key);
  if (it == maps_.end() || it->second.bytes < h.allocBytes) {
    if (it != maps_.end()) {
      munmap(it->second.base, it->second.bytes);
      maps_.erase(it);
    }
    if (maps_.size() >= kMaxCached) {
      // Drop mappings the last two operations did not use: the current one may still need its own.
      for (auto m = maps_.begin(); m != maps_.end();) {
        if (m->second.lastEpoch + 2 <= epoch) {
          munmap(m->second.base, m->second.bytes);
          m = maps_.erase(m);
        } else {
          ++m;
        }
      }
    }
    BRAID_ASSIGN_OR_RETURN(void* base, mapPeerFd(h.pid, h.fd, h.ino, h.allocBytes, true));
    it = maps_.emplace(key, Mapping{base, h.allocBytes, epoch}).first;
  }
  it->second.lastEpoch = epoch;
  return static_cast<char*>(it->second.base) + h.offset;
}

}  // namespace braid
