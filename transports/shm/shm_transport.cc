// Host shared-memory transports: "inproc" for ranks that are threads of one process (anonymous memory shared by
// pointer, no system calls on the data path) and "shm" for ranks that are processes on one host. A shm FIFO is a
// file in BRAID_SHM_DIR (/dev/shm), reserved with posix_fallocate (so a full directory fails at once, with a
// message) and unlinked as soon as the receiver has mapped it, before anyone else knows it: the sender opens it
// through /proc/<receiver pid>/fd/<fd>, checking the inode. A segment is never left named, whichever rank dies when.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>

#include "src/common/logging.h"
#include "src/common/numa.h"
#include "src/common/shareable_mem.h"
#include "src/common/wait.h"
#include "transports/connect_blob.h"
#include "transports/transport.h"

namespace braid {

bool Connector::peerAlive() const {
  if (!crossProcess_ || peer_.pid <= 0) return true;
  return !processGone(static_cast<int32_t>(peer_.pid));
}

void Connector::markAborted(const std::string& why) {
  FifoCtrl* c = view_.ctrl;
  if (!why.empty() && c->failure[0] == '\0' && !view_.peerAborted()) {
    snprintf(c->failure, sizeof(c->failure), "%s", why.c_str());
  }
  view_.markAborted();
}

namespace {

constexpr size_t kCtrlBytes = 4096;

size_t segmentBytes(size_t slotBytes, size_t llSlotBytes) {
  return kCtrlBytes + (slotBytes + llSlotBytes) * kFifoSlots;
}

// A receive FIFO lives on its receiver's NUMA node: the receiver polls its control words and reads every slot.
void placeOnNumaNode(void* base, size_t bytes, const PeerInfo& self) {
  Status st = preferNumaNode(base, bytes, self.numa);
  if (!st.isOk()) BRAID_INFO(kLogShm, "rank %d: FIFO not placed: %s", self.rank, st.message().c_str());
}

FifoCtrl* initCtrl(void* base, size_t slotBytes, size_t llSlotBytes) {
  auto* ctrl = new (base) FifoCtrl();
  fifoCtrlInit(ctrl, slotBytes, llSlotBytes);
  return ctrl;
}

using Blob = ShmBlob;  // transports/connect_blob.h

// ---------------------------------------------------------------------------------------------------------------
class InprocTransport : public Transport {
 public:
  const char* name() const override { return "inproc"; }
  bool canConnect(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer) const override {
    return self.hostHash == peer.hostHash && self.pid == peer.pid;
  }

  Result<RecvSetup> setupRecv(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer, int channel,
                              size_t slotBytes, size_t llSlotBytes) override {
    size_t bytes = segmentBytes(slotBytes, llSlotBytes);
    BRAID_ASSIGN_OR_RETURN(LocalFifo fifo, cfg.memory->allocLocal(self, slotBytes, llSlotBytes, nullptr));
    RecvSetup setup;
    setup.connector = std::make_unique<Connector>(fifo.mem, fifo.ctrl, fifo.slots, false, peer, false);
    Blob b{};
    strcpy(b.kind, "inproc");
    b.bytes = bytes;
    b.slotBytes = slotBytes;
    b.id = handoff_.put(fifo.mem);
    memcpy(setup.blob, &b, sizeof(b));
    return setup;
  }

  Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                                 int channel, const char* blob) override {
    BRAID_ASSIGN_OR_RETURN(Blob b, decodeShmBlob(blob, "inproc", peer, 0));
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, handoff_.take(b.id, "inproc", peer.rank));
    auto* base = static_cast<char*>(mem.get());
    return std::make_unique<Connector>(mem, reinterpret_cast<FifoCtrl*>(base), base + kCtrlBytes, true, peer, false);
  }

 private:
  FifoHandoff handoff_;
};

// ---------------------------------------------------------------------------------------------------------------
class ShmTransport : public Transport {
 public:
  const char* name() const override { return "shm"; }
  bool canConnect(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer) const override {
    return self.hostHash == peer.hostHash && !cfg.shmDisable;
  }

  Result<RecvSetup> setupRecv(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer, int channel,
                              size_t slotBytes, size_t llSlotBytes) override {
    size_t bytes = segmentBytes(slotBytes, llSlotBytes);
    const std::string& dir = cfg.shmDir;
    Blob b{};
    strcpy(b.kind, "shm");
    b.bytes = bytes;
    b.slotBytes = slotBytes;
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seq = ++nextId_;
    }
    snprintf(b.name, sizeof(b.name), "%s/braid-%d-%d-%d-%llu", dir.c_str(), static_cast<int>(getpid()), self.rank,
             peer.rank, static_cast<unsigned long long>(seq));
    // An unnamed file in the directory (O_TMPFILE), or where the file system lacks that, one unlinked the moment
    // it exists: nothing is named while the FIFO is set up, so no crash of either rank leaves a file behind.
    int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
      fd = open(b.name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd >= 0) unlink(b.name);
    }
    if (fd < 0) {
      return errnoError(errno, "cannot create a shared-memory segment in %s (BRAID_SHM_DIR)", dir.c_str());
    }
    // Reserve the pages now: a full /dev/shm must fail here with a clear message, not later with SIGBUS.
    int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      close(fd);
      if (rc == ENOSPC) {
        return systemError(
            "%s is full: a shared-memory segment of %zu bytes for the FIFO from rank %d to rank %d does not fit. "
            "Remedies: enlarge %s (docker run --shm-size=1g, or mount -o remount,size=...), lower NCCL_BUFFSIZE "
            "(now %zu bytes per connector) or NCCL_LL_BUFFSIZE (now %zu), or set NCCL_SHM_DISABLE=1",
            dir.c_str(), bytes, peer.rank, self.rank, dir.c_str(), slotBytes * kFifoSlots, llSlotBytes * kFifoSlots);
      }
      return errnoError(rc, "posix_fallocate of %zu bytes in %s", bytes, dir.c_str());
    }
    struct stat st {};
    void* base = fstat(fd, &st) == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (base == MAP_FAILED) {
      int err = errno;
      close(fd);
      return errnoError(err, "mapping a shared-memory segment of %zu bytes in %s", bytes, dir.c_str());
    }
    b.pid = static_cast<int32_t>(getpid());
    b.fd = fd;
    b.ino = static_cast<uint64_t>(st.st_ino);
    Result<std::function<void()>> pinned = cfg.memory->pinShared(base, bytes);
    if (!pinned.isOk()) {
      munmap(base, bytes);
      close(fd);
      return pinned.status();
    }
    std::shared_ptr<void> mem(base, [bytes, fd, unpin = pinned.take()](void* p) {
      if (unpin) unpin();
      munmap(p, bytes);
      close(fd);
    });
    placeOnNumaNode(base, bytes, self);
    FifoCtrl* ctrl = initCtrl(base, slotBytes, llSlotBytes);
    RecvSetup setup;
    setup.connector = std::make_unique<Connector>(mem, ctrl, static_cast<char*>(base) + kCtrlBytes, false, peer, true);
    memcpy(setup.blob, &b, sizeof(b));
    BRAID_INFO(kLogShm, "shm: rank %d created an unnamed segment in %s (%zu bytes, fd %d) for the FIFO from rank %d",
               self.rank, dir.c_str(), bytes, fd, peer.rank);
    return setup;
  }

  Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                                 int channel, const char* blob) override {
    BRAID_ASSIGN_OR_RETURN(Blob b, decodeShmBlob(blob, "shm", peer, kCtrlBytes));
    // Through the receiver's open descriptor: the file has no name (see the top of this file).
    Result<void*> mapped = mapPeerFd(b.pid, b.fd, b.ino, b.bytes, true);
    if (!mapped.isOk()) {
      return mapped.status().withContext(
          strPrintf("attaching to rank %d's shared-memory FIFO (processes that cannot open each other's "
                    "/proc/<pid>/fd, such as another PID namespace, need NCCL_SHM_DISABLE=1)",
                    peer.rank));
    }
    void* base = mapped.take();
    Result<std::function<void()>> pinned = cfg.memory->pinShared(base, b.bytes);
    if (!pinned.isOk()) {
      munmap(base, b.bytes);
      return pinned.status();
    }
    std::shared_ptr<void> mem(base, [bytes = b.bytes, unpin = pinned.take()](void* p) {
      if (unpin) unpin();
      munmap(p, bytes);
    });
    auto* cbase = static_cast<char*>(base);
    return std::make_unique<Connector>(mem, reinterpret_cast<FifoCtrl*>(cbase), cbase + kCtrlBytes, true, peer, true);
  }

 private:
  std::mutex mu_;
  uint64_t nextId_ = 0;
};

}  // namespace

Result<LocalFifo> allocLocalFifo(const PeerInfo& self, size_t slotBytes, size_t llSlotBytes,
                                 std::function<bool()> beforeUnmap) {
  const size_t bytes = segmentBytes(slotBytes, llSlotBytes);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return errnoError(errno, "mmap of %zu bytes for an in-process FIFO", bytes);
  placeOnNumaNode(base, bytes, self);
  return placeLocalFifo(std::shared_ptr<void>(base,
                                              [bytes, beforeUnmap](void* p) {
                                                if (beforeUnmap && !beforeUnmap()) return;  // still in use: left mapped
                                                munmap(p, bytes);
                                              }),
                        slotBytes, llSlotBytes);
}

size_t localFifoBytes(size_t slotBytes, size_t llSlotBytes) {
  return segmentBytes(slotBytes, llSlotBytes);
}

LocalFifo placeLocalFifo(std::shared_ptr<void> mem, size_t slotBytes, size_t llSlotBytes) {
  LocalFifo fifo;
  fifo.ctrl = initCtrl(mem.get(), slotBytes, llSlotBytes);
  fifo.slots = static_cast<char*>(mem.get()) + kCtrlBytes;
  fifo.mem = std::move(mem);
  return fifo;
}

namespace {
class HostFifoMemory final : public FifoMemory {
 public:
  Result<LocalFifo> allocLocal(const PeerInfo& self, size_t slotBytes, size_t llSlotBytes,
                               std::function<bool()> beforeUnmap) const override {
    return allocLocalFifo(self, slotBytes, llSlotBytes, std::move(beforeUnmap));
  }
};
}  // namespace

const FifoMemory& hostFifoMemory() {
  static const HostFifoMemory m;
  return m;
}

Transport* inprocTransport() {
  static InprocTransport t;
  return &t;
}

Transport* shmTransport() {
  static ShmTransport t;
  return &t;
}

}  // namespace braid
