// Host shared-memory transports: "inproc" for ranks that are threads of one process (anonymous memory shared by
// pointer, no system calls on the data path) and "shm" for ranks that are processes on one host (a file in
// /dev/shm, unlinked as soon as the sender has mapped it so a crash leaves nothing behind).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "src/common/logging.h"
#include "src/common/numa.h"
#include "transports/transport.h"

namespace braid {

bool Connector::peerAlive() const {
  if (!crossProcess_ || peer_.pid <= 0) return true;
  return !(kill(peer_.pid, 0) != 0 && errno == ESRCH);
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

std::shared_ptr<void> mapping(void* base, size_t bytes) {
  return std::shared_ptr<void>(base, [bytes](void* p) { munmap(p, bytes); });
}

struct Blob {
  char kind[8];  // "inproc" or "shm"
  uint64_t bytes;
  uint64_t slotBytes;
  uint64_t id;
  char name[200];
};
static_assert(sizeof(Blob) <= kConnectBlobBytes, "blob too large");

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
    {
      std::lock_guard<std::mutex> lock(mu_);
      b.id = ++nextId_;
      pending_[b.id] = fifo.mem;
    }
    memcpy(setup.blob, &b, sizeof(b));
    return setup;
  }

  Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                                 int channel, const char* blob) override {
    Blob b;
    memcpy(&b, blob, sizeof(b));
    if (strcmp(b.kind, "inproc") != 0) return internalError("inproc transport got a \"%.8s\" blob", b.kind);
    std::shared_ptr<void> mem;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(b.id);
      if (it == pending_.end()) return internalError("inproc FIFO %llu not found", (unsigned long long)b.id);
      mem = std::move(it->second);
      pending_.erase(it);
    }
    auto* base = static_cast<char*>(mem.get());
    return std::make_unique<Connector>(mem, reinterpret_cast<FifoCtrl*>(base), base + kCtrlBytes, true, peer, false);
  }

 private:
  std::mutex mu_;
  uint64_t nextId_ = 0;
  std::map<uint64_t, std::shared_ptr<void>> pending_;
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
    int fd = open(b.name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      return errnoError(errno, "cannot create shared-memory segment %s (BRAID_SHM_DIR=%s)", b.name, dir.c_str());
    }
    // Reserve the pages now: a full /dev/shm must fail here with a clear message, not later with SIGBUS.
    int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      close(fd);
      unlink(b.name);
      if (rc == ENOSPC) {
        return systemError(
            "%s is full: a shared-memory segment of %zu bytes for the FIFO from rank %d to rank %d does not fit. "
            "Remedies: enlarge %s (docker run --shm-size=1g, or mount -o remount,size=...), lower NCCL_BUFFSIZE "
            "(now %zu bytes per connector) or NCCL_LL_BUFFSIZE (now %zu), or set NCCL_SHM_DISABLE=1",
            dir.c_str(), bytes, peer.rank, self.rank, dir.c_str(), slotBytes * kFifoSlots, llSlotBytes * kFifoSlots);
      }
      return errnoError(rc, "posix_fallocate of %zu bytes on %s", bytes, b.name);
    }
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
      int err = errno;
      unlink(b.name);
      return errnoError(err, "mmap of shared-memory segment %s (%zu bytes)", b.name, bytes);
    }
    std::string path = b.name;
    // The creator unlinks too, in case the sender never attached (it failed before connecting).
    std::shared_ptr<void> mem(base, [bytes, path](void* p) {
      munmap(p, bytes);
      unlink(path.c_str());
    });
    placeOnNumaNode(base, bytes, self);
    FifoCtrl* ctrl = initCtrl(base, slotBytes, llSlotBytes);
    RecvSetup setup;
    setup.connector = std::make_unique<Connector>(mem, ctrl, static_cast<char*>(base) + kCtrlBytes, false, peer, true);
    memcpy(setup.blob, &b, sizeof(b));
    BRAID_INFO(kLogShm, "shm: rank %d created %s (%zu bytes) for FIFO from rank %d", self.rank, b.name, bytes,
               peer.rank);
    return setup;
  }

  Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                                 int channel, const char* blob) override {
    Blob b;
    memcpy(&b, blob, sizeof(b));
    if (strcmp(b.kind, "shm") != 0) return internalError("shm transport got a \"%.8s\" blob", b.kind);
    int fd = open(b.name, O_RDWR | O_CLOEXEC);
    if (fd < 0) return errnoError(errno, "cannot open shared-memory segment %s of rank %d", b.name, peer.rank);
    void* base = mmap(nullptr, b.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return errnoError(errno, "mmap of shared-memory segment %s of rank %d", b.name, peer.rank);
    // Both ends have it mapped now; the name is no longer needed, so a crash of either leaves nothing in /dev/shm.
    unlink(b.name);
    std::shared_ptr<void> mem = mapping(base, b.bytes);
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
  LocalFifo fifo;
  fifo.mem = std::shared_ptr<void>(base, [bytes, beforeUnmap](void* p) {
    if (beforeUnmap && !beforeUnmap()) return;  // still in use: left mapped
    munmap(p, bytes);
  });
  placeOnNumaNode(base, bytes, self);
  fifo.ctrl = initCtrl(base, slotBytes, llSlotBytes);
  fifo.slots = static_cast<char*>(base) + kCtrlBytes;
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
