#include "src/backends/cuda/p2p_selftest.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "src/common/fd_share.h"
#include "src/common/logging.h"

namespace braid {
namespace {

// What each rank tells the others: where its test region is and the nonce its tokens are built from.
struct Entry {
  int32_t pid = 0;
  int32_t hasRegion = 0;
  uint64_t devPtr = 0;  // same process: the region's address
  uint64_t bytes = 0;
  FdTicket ticket;  // another process: the region's exported memory
  uint64_t nonce = 0;
};

// The token rank `writer` leaves in the region of a rank whose nonce is `nonce`.
uint64_t tokenFor(uint64_t nonce, int writer) {
  return nonce ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(writer + 1));
}

using Clock = std::chrono::steady_clock;

}  // namespace

Status selfTestP2p(const P2pTestContext& c, std::vector<uint8_t>* p2p) {
  const CuApi* api = c.api;
  const std::vector<PeerInfo>& peers = *c.peers;
  const size_t n = peers.size();
  const PeerInfo& self = peers[static_cast<size_t>(c.rank)];
  ScopedContext scope(api, c.ctx);
  RelaxedCaptureMode relaxed(api);
  std::vector<int> testees;
  std::vector<int> localDevices;
  int remote = 0;
  for (size_t r = 0; r < n; ++r) {
    if (static_cast<int>(r) == c.rank || (*p2p)[r] == 0) continue;
    testees.push_back(static_cast<int>(r));
    if (peers[r].pid == self.pid) {
      localDevices.push_back(peers[r].cudaDev);
    } else {
      ++remote;
    }
  }
  const auto start = Clock::now();
  // The region: a slot per rank for the tokens written here, and a scratch word a write is copied from.
  const size_t regionBytes = 8 * n + 64;
  std::vector<Entry> all(n);
  Entry& mine = all[static_cast<size_t>(c.rank)];
  mine = Entry{};
  mine.pid = static_cast<int32_t>(getpid());
  if (getrandom(&mine.nonce, sizeof(mine.nonce), 0) != static_cast<ssize_t>(sizeof(mine.nonce))) {
    mine.nonce = static_cast<uint64_t>(start.time_since_epoch().count());
  }
  // What the copies use. Copies that never finish (a hung path) must not write into memory freed under them: then
  // all of it is left allocated, and later copies go on a fresh stream (Settle below).
  struct InFlight {
    DeviceFifoMem region;
    std::vector<std::shared_ptr<void>> imports;  // peers' regions mapped here
    std::vector<uint64_t> tokens;                // the host words copied from
    std::vector<uint64_t> slots;                 // the host copy of this rank's region
  };
  auto held = std::make_unique<InFlight>();
  DeviceFifoMem& region = held->region;
  if (!testees.empty()) {
    BRAID_ASSIGN_OR_RETURN(region, c.memory->alloc(regionBytes, nullptr, 0, localDevices, remote > 0));
    mine.hasRegion = 1;
    mine.devPtr = reinterpret_cast<uint64_t>(region.base);
    mine.bytes = region.bytes;
    if (remote > 0) {
      Result<FdTicket> t = offerFd(region.exportFd, remote);
      close(region.exportFd);
      BRAID_RETURN_IF_ERROR(t.status().withContext("the P2P self-test"));
      mine.ticket = t.value();
    }
  }
  struct Withdraw {
    FdTicket t;
    ~Withdraw() { withdrawFd(t); }
  } withdraw{mine.ticket};
  BRAID_RETURN_IF_ERROR(c.allGather(all.data(), sizeof(Entry)).withContext("P2P self-test allgather"));

  CUstream stream = c.memory->stream();
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.timeoutSec));
  const auto deadline = start + timeout;  // for the tokens to arrive
  bool stuck = false;
  std::vector<uint64_t>& tokens = held->tokens;
  std::vector<uint64_t>& slots = held->slots;
  tokens.assign(testees.size(), 0);
  slots.assign(n, 0);
  struct Settle {
    CudaDeviceMemory* memory;
    const bool& stuck;
    std::unique_ptr<InFlight>& held;
    ~Settle() {
      if (!stuck) return;
      BRAID_WARN("P2P self-test: copies did not finish within BRAID_TIMEOUT; their memory is left allocated");
      (void)held.release();
      Status s = memory->replaceStream();  // later initialising copies must not queue behind the stuck ones
      if (!s.isOk()) BRAID_WARN("P2P self-test: %s", s.message().c_str());
    }
  } settle{c.memory, stuck, held};
  // Write a token into each testee's region: staged in this GPU's scratch word, then copied across.
  char* scratch = testees.empty() ? nullptr : region.base + 8 * n;
  for (size_t i = 0; i < testees.size(); ++i) {
    const int p = testees[i];
    const Entry& e = all[static_cast<size_t>(p)];
    if (e.hasRegion == 0) continue;  // cannot happen for a symmetric decision; the check below fails the pair
    char* base = nullptr;
    if (peers[static_cast<size_t>(p)].pid == self.pid) {
      base = reinterpret_cast<char*>(e.devPtr);
    } else {
      Result<int> fd = fetchFd(e.ticket, c.timeoutSec);
      BRAID_RETURN_IF_ERROR(fd.status().withContext(strPrintf("P2P self-test with rank %d", p)));
      Result<DeviceFifoMem> m = c.memory->import(fd.value(), e.bytes);
      close(fd.value());
      BRAID_RETURN_IF_ERROR(m.status().withContext(strPrintf("P2P self-test with rank %d", p)));
      held->imports.push_back(m.value().owner);
      base = m.value().base;
    }
    tokens[i] = tokenFor(e.nonce, c.rank);
    const auto at = reinterpret_cast<CUdeviceptr>(scratch + 8 * (i % 8));
    BRAID_RETURN_IF_ERROR(
        api->check(api->memcpyAsync(at, reinterpret_cast<CUdeviceptr>(&tokens[i]), 8, stream), "cuMemcpyAsync(token)"));
    BRAID_RETURN_IF_ERROR(api->check(
        api->memcpyAsync(reinterpret_cast<CUdeviceptr>(base + 8 * static_cast<size_t>(c.rank)), at, 8, stream),
        "cuMemcpyAsync(to the peer's GPU)"));
    BRAID_ASSIGN_OR_RETURN(bool sent, waitStreamUntil(api, stream, Clock::now() + timeout));  // the scratch is reused
    if (!sent) {
      stuck = true;
      break;
    }
  }
  // Every rank has written (or given up) before anyone reads.
  std::vector<uint8_t> barrier(n, 1);
  BRAID_RETURN_IF_ERROR(c.allGather(barrier.data(), 1).withContext("P2P self-test allgather"));
  // Which testees' tokens arrived here, polled until the deadline.
  std::vector<uint8_t> got(n * n, 0);
  uint8_t* row = &got[static_cast<size_t>(c.rank) * n];
  while (!testees.empty() && !stuck) {
    BRAID_RETURN_IF_ERROR(api->check(api->memcpyAsync(reinterpret_cast<CUdeviceptr>(slots.data()),
                                                      reinterpret_cast<CUdeviceptr>(region.base), 8 * n, stream),
                                     "cuMemcpyAsync(read back)"));
    BRAID_ASSIGN_OR_RETURN(bool read, waitStreamUntil(api, stream, Clock::now() + timeout));
    if (!read) {
      stuck = true;
      break;
    }
    bool allIn = true;
    for (int p : testees) {
      row[p] = slots[static_cast<size_t>(p)] == tokenFor(mine.nonce, p) ? 1 : 0;
      allIn = allIn && row[p] != 0;
    }
    if (allIn || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  BRAID_RETURN_IF_ERROR(c.allGather(got.data(), n).withContext("P2P self-test allgather"));
  int verified = 0;
  for (int p : testees) {
    const bool here = got[static_cast<size_t>(c.rank) * n + static_cast<size_t>(p)] != 0;
    const bool there = got[static_cast<size_t>(p) * n + static_cast<size_t>(c.rank)] != 0;
    if (here && there) {
      ++verified;
      continue;
    }
    (*p2p)[static_cast<size_t>(p)] = 0;
    const PeerInfo& q = peers[static_cast<size_t>(p)];
    BRAID_WARN(
        "rank %d (GPU %d) and rank %d (GPU %d): P2P writes from GPU %d to GPU %d did not arrive within %.0f s "
        "(BRAID_TIMEOUT): the pair goes through host memory",
        c.rank, self.cudaDev, p, q.cudaDev, here ? self.cudaDev : q.cudaDev, here ? q.cudaDev : self.cudaDev,
        c.timeoutSec);
  }
  if (!testees.empty()) {
    BRAID_INFO(kLogInit, "rank %d: P2P self-test: %d of %zu peers verified in %.1f ms", c.rank, verified,
               testees.size(), std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return Status::ok();
}

}  // namespace braid
