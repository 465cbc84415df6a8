#include "tests/devapi/device_shim.h"

#include <array>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace braid_emu {
namespace {

// A barrier among a fixed set of threads of one CTA, reused generation after generation (the OR of the
// arrivals' values is kept for the generation's waiters: none of them can arrive at the next one before reading it,
// since the next one needs them all).
struct Keyed {
  int arrived = 0;
  uint64_t generation = 0;
  bool fold = false;
  bool result = false;
};

struct LaunchState {
  std::mutex mu;
  std::map<std::tuple<unsigned, int, unsigned>, Keyed> barriers;  // (block, kind or barrier id, mask or count)
  Dim3 grid, block;
  std::map<std::pair<unsigned, unsigned>, std::array<unsigned, 32>> shuffles;  // (block, warp): each lane's value
  std::map<unsigned, std::vector<uint64_t>> stashes;                           // by block
};

struct ThreadCtx {
  const braid::EmuCta* cta = nullptr;
  LaunchState* launch = nullptr;
  Dim3 tid, bid;
};

thread_local ThreadCtx* tCtx = nullptr;

ThreadCtx& ctx() {
  if (tCtx == nullptr) throw std::logic_error("device shim: a kernel-side call outside braid_emu::launch");
  return *tCtx;
}

bool keyedBarrier(int kind, unsigned key, int expected, bool v) {
  ThreadCtx& c = ctx();
  LaunchState& s = *c.launch;
  std::unique_lock<std::mutex> lock(s.mu);
  Keyed& b = s.barriers[std::make_tuple(c.bid.x, kind, key)];
  const uint64_t mine = b.generation;
  b.fold = b.fold || v;
  if (++b.arrived == expected) {
    b.result = b.fold;
    b.fold = false;
    b.arrived = 0;
    ++b.generation;
    return b.result;
  }
  while (b.generation == mine) {
    lock.unlock();
    c.cta->relax();  // the launch's failure and deadline end this wait
    lock.lock();
  }
  return b.result;
}

}  // namespace

const Dim3& threadIdx_() {
  return ctx().tid;
}
const Dim3& blockIdx_() {
  return ctx().bid;
}
const Dim3& blockDim_() {
  return ctx().launch->block;
}
const Dim3& gridDim_() {
  return ctx().launch->grid;
}

void syncThreads(const char* file, int line) {
  ctx().cta->sync(file, line);
}
int syncThreadsOr(int v, const char* file, int line) {
  return ctx().cta->syncAll(v == 0, file, line) ? 0 : 1;
}

bool warpBarrier(unsigned mask, bool v) {
  ThreadCtx& c = ctx();
  const unsigned warp0 = c.tid.x & ~31u, n = c.launch->block.x;
  const unsigned lanes = n - warp0 >= 32 ? 32 : n - warp0;
  const unsigned exists = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
  const unsigned lane = c.tid.x & 31u;
  if (((mask >> lane) & 1u) == 0) throw std::logic_error("__syncwarp: the calling lane is not in the mask");
  return keyedBarrier(static_cast<int>(warp0 / 32) * 64 + 64, mask & exists, __builtin_popcount(mask & exists), v);
}

void namedBarrier(int id, int count) {
  (void)keyedBarrier(id, static_cast<unsigned>(count), count, false);
}
bool namedBarrierOr(int id, int count, bool v) {
  return keyedBarrier(id, static_cast<unsigned>(count), count, v);
}

unsigned shfl(unsigned mask, unsigned v, int srcLane) {
  ThreadCtx& c = ctx();
  LaunchState& s = *c.launch;
  const auto key = std::make_pair(c.bid.x, c.tid.x / 32);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.shuffles[key][c.tid.x % 32] = v;
  }
  (void)warpBarrier(mask, false);  // every lane of the mask has deposited
  unsigned out;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    out = s.shuffles[key][static_cast<unsigned>(srcLane) % 32];
  }
  (void)warpBarrier(mask, false);  // and read, before any deposits the next value
  return out;
}

void* blockStash(size_t bytes) {
  ThreadCtx& c = ctx();
  std::lock_guard<std::mutex> lock(c.launch->mu);
  std::vector<uint64_t>& v = c.launch->stashes[c.bid.x];
  if (v.empty()) v.assign((bytes + 7) / 8, 0);  // first use in this CTA: later callers get the same memory
  if (v.size() * sizeof(uint64_t) < bytes) throw std::logic_error("device shim: blockStash asked for more than before");
  return v.data();
}

long long clockNs() {
  return static_cast<long long>(ctx().cta->nowNs());
}
void backOff() {
  ctx().cta->relax();
}

void trap(const char* why) {
  throw std::runtime_error(std::string("trap: ") + why);
}

uint64_t mcLoadSum(const void* p, McSum form) {
  const braid::McOp op = form == McSum::kF32      ? braid::McOp::kAddF32
                         : form == McSum::kF64    ? braid::McOp::kAddF64
                         : form == McSum::kU32    ? braid::McOp::kAddU32
                         : form == McSum::kF16x2  ? braid::McOp::kAddF16x2
                         : form == McSum::kBf16x2 ? braid::McOp::kAddBf16x2
                         : form == McSum::kE4m3x4 ? braid::McOp::kAddE4m3x4
                         : form == McSum::kE5m2x4 ? braid::McOp::kAddE5m2x4
                                                  : braid::McOp::kAddU64;
  const braid::EmuCta& cta = *ctx().cta;
  return cta.mcLoadReduce(cta.mcView(p, braid::mcWordBytes(op)), 0, op);
}

void mcStore(void* p, uint64_t word, int bytes, int order) {
  const braid::EmuCta& cta = *ctx().cta;
  cta.mcStore(cta.mcView(p, static_cast<size_t>(bytes)), 0, word, static_cast<size_t>(bytes), order);
}

braid::Status launch(const braid::EmuLaunchConfig& cfg, const std::function<void()>& kernel) {
  LaunchState state;
  state.grid.x = static_cast<unsigned>(cfg.grid);
  state.block.x = static_cast<unsigned>(cfg.block);
  state.grid.y = state.grid.z = state.block.y = state.block.z = 1;
  return braid::emuLaunch(cfg, [&](const braid::EmuCta& cta) {
    ThreadCtx c;
    c.cta = &cta;
    c.launch = &state;
    c.tid.x = static_cast<unsigned>(cta.tid());
    c.bid.x = static_cast<unsigned>(cta.blockId());
    tCtx = &c;
    struct Reset {
      ~Reset() { tCtx = nullptr; }
    } reset;
    kernel();
  });
}

}  // namespace braid_emu
