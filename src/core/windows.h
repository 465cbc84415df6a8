// Memory windows (ncclCommWindowRegister, NCCL 2.27+) and the one-sided operations on them (ncclPutSignal,
// ncclSignal, ncclWaitSignal, NCCL 2.29+), on host and CUDA communicators.
//
// A window is one buffer per rank, registered collectively. Registration maps every peer's buffer that this rank can
// reach by load and store (the LSA set: ranks of this process, and of other processes of this host whose buffer is
// shareable memory: ncclMemAlloc's memfd on host communicators, its cuMem allocation on CUDA ones, mapped through
// the peer's GPU access), so a one-sided put is a copy into the peer's buffer. A peer out of reach (another host,
// private memory, no P2P) is a window without that peer. One-sided operations toward ranks of other hosts go as
// messages instead (rma_net.h); toward other peers out of reach they fail by name. The buffer is
// also registered for collectives (ncclCommRegister), which then read it in place where they can.
//
// One-sided operations: each rank owns a signal area, a communicator window of its own created at the first
// registration (or at init with rmaEagerInit=1), with numRmaCtx x numRmaSig words per sender. A put copies its data
// into the peer's window and then sets this rank's word there to the count of signals it has sent that peer; a wait
// waits until the peer's word here reaches the count it has waited for plus opCnt. A word has one writer, so no atomics
// across ranks are needed, and "the signal arrived" implies "the data before it arrived" because the word is written
// after the data (release) and read with acquire. A host communicator runs them on the calling thread (puts and signals
// toward this host never block, toward other hosts they wait only for room in their connection; a wait inside a group
// runs at ncclGroupEnd, so one thread may drive several ranks); a CUDA communicator in stream order.
//
// Deregistration is local (NCCL's rule since 2.29): this rank unmaps its peers' buffers; peers keep their mapping of
// this rank's buffer until they deregister theirs. Windows left registered go with the communicator.
//
// Thread safety: NCCL's: a communicator is used by one thread at a time.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/backends/backend.h"
#include "src/common/status.h"
#include "src/core/rma_net.h"
#include "src/core/window_directory.h"
#include "src/core/window_table.h"

struct ncclWindow_vidmem;  // include/nccl_device/core.h: a WindowDescriptor (src/api checks the layouts agree)

namespace braid {

class Communicator;

// What ncclWindow_t points to, as device code reads it (nccl_device/core.h's ncclWindow_vidmem, field for field).
struct WindowDescriptor {
  void* winHost = nullptr;
  char* localBase = nullptr;
  char* const* lsaBases = nullptr;
  size_t size = 0;
  int worldRank = 0;
  int lsaRank = 0, lsaSize = 0;
  uint32_t braidMagic = 0;
  char* lsaMultimem = nullptr;
  uint32_t registration = 0;
};

// nccl.h's window flags and alignment (src/api checks that they agree).
constexpr int kWinCollSymmetric = 0x01;
constexpr int kWinStrictOrdering = 0x02;
constexpr int kWinGinOnly = 0x04;
constexpr int kWinCftCounted = 0x08;  // NCCL 2.32: CFT's counted registration (CFT is not built: refused)
constexpr size_t kWinRequiredAlignment = 4096;

struct Window {
  ncclWindow_vidmem* handle = nullptr;  // what ncclWindow_t is: the descriptor device code reads (allocDeviceBlock)
  void* userPtr = nullptr;
  size_t bytes = 0;
  int flags = 0;
  std::vector<WindowPeer> peers;    // [rank]: where this rank reaches each rank's buffer (its own: userPtr)
  std::vector<uint64_t> peerBytes;  // [rank]: each rank's buffer size
  void* registration = nullptr;     // the collectives' registration of the buffer (Communicator::registerBuffer)
  WindowMulticast mc;               // every rank's buffer behind one multicast mapping (NVLS), or none:
  std::string mcWhy;                // why not
  uint32_t index = 0;               // its registration's number, the same on every rank (rma_net.h names it so)
  int inUse = 0;                    // proxies copying into or out of it now (Windows::pinned; under Windows::mu_)
};

// One of a sender's signals: its context and index (ncclPutSignal's ctx and sigIdx, checked by the caller against
// the communicator's numRmaCtx and numRmaSig).
struct SignalId {
  int ctx = 0;
  int sig = 0;
};

// One signal wait: opCnt more signals from peer, on its signal (ctx, sig).
struct SignalWait {
  int peer = -1;
  int opCnt = 0;
  int ctx = 0;
  int sig = 0;
};

class Windows {
 public:
  explicit Windows(Communicator* comm) : comm_(comm) {}
  ~Windows();  // deregisters what is left, then frees the signal area

  // ncclCommWindowRegister: collective, all or nothing. Null (success) when NCCL_WIN_ENABLE=0 on some rank.
  // `multicast`: also give it a multicast mapping where the communicator can (bindMulticast; every rank must pass the
  // same). Errors: kInvalidArgument naming the argument (a buffer the backend cannot offer, flags, alignment),
  // kInvalidUsage when another rank could not register (naming it), the exchange's errors.
  Result<ncclWindow_vidmem*> add(void* buff, size_t bytes, int flags, bool multicast = true);
  // ncclCommWindowDeregister (null: nothing to do). Errors: kInvalidArgument for a window this communicator does not
  // hold.
  [[nodiscard]] Status remove(ncclWindow_vidmem* win);
  // A window of this communicator, or an error naming `what`.
  Result<const Window*> find(const ncclWindow_vidmem* win, const char* what) const;
  // The table device code finds windows in by address (window_table.h; ncclDevComm::windowTable), allocated on
  // first use. Errors: the backend's allocation.
  Result<const void*> deviceTable();
  // Runs use(p), p this rank's buffer of the window registered `index`-th plus `offset`, with the window pinned (its
  // deregistration waits) but the table free (registrations and other lookups go on); with no `use`, only checks.
  // Errors: kInvalidArgument when no such window is registered here or [offset, offset + bytes) passes its end; use's.
  [[nodiscard]] Status withRegistered(uint32_t index, uint64_t offset, uint64_t bytes,
                                      const std::function<Status(char*)>& use = nullptr);
  // Whether this rank's part of the `index`-th registration has finished (a peer's may finish first).
  bool registeredYet(uint32_t index) const;
  // The messenger toward ranks of other hosts (rma_net.h): null before the first registration or where none.
  RmaNet* messenger() const { return net_.get(); }
  // Magic of braid's window descriptors (ncclWindow_vidmem::braidMagic).
  static constexpr uint32_t kDescriptorMagic = 0x42574e44;  // "BWND"

  // The steps of ncclPutSignal (put false: ncclSignal, which has no data) toward `peer`: the window, offset and size
  // are checked against that peer's buffer; errors name the argument, or the reason the peer is out of reach.
  Result<std::vector<RmaStep>> putSteps(bool put, const void* localbuff, size_t bytes, int peer,
                                        const ncclWindow_vidmem* win, size_t offset, SignalId id);
  // The steps of ncclWaitSignal. Errors name the descriptor and its field.
  Result<std::vector<RmaStep>> waitSteps(const std::vector<SignalWait>& waits);
  // Steps made above count once they were handed to the backend (a call that fails counts nothing).
  void commit(const std::vector<RmaStep>& steps);
  // Collective: the signal area (and, toward ranks of other hosts, its connections), unless made already. The first
  // registration calls it; so does init with rmaEagerInit=1. Errors: the exchange's and the connections'.
  [[nodiscard]] Status ensureSignals();

 private:
  // The all-gathered registration of [base, base + bytes): every rank's size and where this rank reaches it.
  Status exchange(void* base, size_t bytes, Window* w, bool* disabled);
  // Which of a sender's words signal `id` is (RmaStep::slot); where sender `from`'s word `slot` lies in an area; and
  // the count of `peer`'s word `slot` in sent_ / awaited_.
  uint32_t slotOf(SignalId id) const;
  size_t signalOffset(int from, uint32_t slot) const;
  size_t countAt(int peer, uint32_t slot) const;
  // Writes w's descriptor (ncclWindow_vidmem: this rank's buffer and its LSA team's, as this rank reaches them)
  // where device code reads it, and sets w->handle.
  Status publish(Window* w);
  // Collective: w's multicast mapping (w->mc), or why none (w->mcWhy). Errors only when a round of it fails or
  // NCCL_NVLS_ENABLE=1 requires multicast.
  Status bindMulticast(Window* w);
  // What the process-wide window directory keeps of w (window_directory.h).
  WindowView viewOf(const Window& w) const;
  // The world ranks of this rank's LSA team, in LSA-rank order (the team is the same for every window).
  std::vector<int> lsaWorldRanks() const;
  // The bytes a multicast mapping of w covers on every rank: the smallest rank's buffer.
  static uint64_t commonBytes(const Window& w);
  Result<const void*> deviceTableLocked();
  // Calls use(w) for the window registered `index`-th with it pinned (inUse) and mu_ released, so a slow copy (a
  // proxy's, or a GIN VA signal's add waiting for room on the GPU) holds up its own deregistration only. kGone: no
  // such window any more; kNotYet: not registered here yet.
  RmaWindowState pinned(uint32_t index, const std::function<void(const Window&)>& use);
  // Why `peer`, out of reach, gets no one-sided operations, and the remedy, for errors.
  const char* outOfReach(int peer) const;

  Communicator* comm_;
  mutable std::mutex mu_;                                              // the table (lookups come from any API call)
  std::condition_variable unpinned_;                                   // a window's inUse fell to 0 (under mu_)
  std::map<const ncclWindow_vidmem*, std::unique_ptr<Window>> table_;  // by handle
  // The signal area: [sender] signalStride_ bytes (whole 64-byte lines) per rank, holding [ctx][sig] words: the
  // count of signals that sender has sent this rank on each.
  void* signalMem_ = nullptr;
  size_t signalStride_ = 0;
  int numRmaSig_ = 1;       // signals per context (the config's, at the signal area's making)
  size_t signalSlots_ = 1;  // words per sender (numRmaCtx x numRmaSig, at least 1)
  std::unique_ptr<Window> signals_;
  std::unique_ptr<WindowTable> deviceTable_;  // under mu_; made on first use (the backend comes after us)
  std::map<uint32_t, Window*> byIndex_;       // under mu_: table_'s windows by registration number
  uint32_t registered_ = 0;                   // registrations so far (the next one's number)
  // Puts and signals toward ranks of other hosts, made with the signal area; the destructor
  // ends it first (its proxy thread writes into windows and the signal area).
  std::unique_ptr<RmaNet> net_;
  std::vector<uint64_t> sent_;     // [peer][ctx][sig] signals this rank has sent
  std::vector<uint64_t> awaited_;  // [peer][ctx][sig] signals this rank has waited for
};

}  // namespace braid
