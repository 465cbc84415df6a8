// The NVLS-style (direct load/store) executor's portable core: the generation protocol every rank's counters
// follow, and the rank-order tile reduction. The CPU backend (src/backends/cpu/direct_exec.cc) runs them over a
// shared-memory segment and peers' mapped buffers; a CUDA backend runs the same over peer or multicast pointers.
//
// Generations. Each operation has a generation number g (wrapping uint32). A rank publishes "posted g" (its
// buffers or staged inputs are there) and "done g" (it no longer reads peers' memory for g) by storing g with
// release; a peer has reached g when its counter is g or later, compared modulo 2^32.
//
// Rank order. A reduced element is always ((src0 (+) src1) (+) src2) ... in rank order, whichever rank computes it
// and however the range is tiled, so every rank's copy of a result is bitwise the same. Half, bf16 and fp8 sums
// accumulate in float and round once, so they may differ from the ring's, which rounds at every hop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/mem_order.h"
#include "src/common/coll_types.h"
#include "src/common/host_device.h"

namespace braid {

BRAID_HOST_DEVICE constexpr bool genReached(uint32_t value, uint32_t gen) {
  return static_cast<int32_t>(value - gen) >= 0;
}

// Per-rank generation counters laid out at a fixed stride (one rank's control slot each).
struct GenCounters {
  char* base = nullptr;
  size_t stride = 0;  // bytes between two ranks' counters
  int nranks = 0;
  BRAID_HOST_DEVICE uint32_t* at(int r) const {
    return reinterpret_cast<uint32_t*>(base + stride * static_cast<size_t>(r));
  }
  // This rank reached `gen`.
  BRAID_HOST_DEVICE void publish(int r, uint32_t gen) const { storeRelease(at(r), gen); }
  // The first rank that has not reached `gen`, or -1 when all have (what they published before is visible then).
  BRAID_HOST_DEVICE int firstBehind(uint32_t gen) const {
    for (int r = 0; r < nranks; ++r) {
      if (!genReached(loadAcquire(at(r)), gen)) return r;
    }
    return -1;
  }
};

// One tile of a reducing direct step: acc = src[0] (+) src[1] (+) ... (+) src[n-1] over `len` elements at byte
// offset `at` of each source, pre-multiplied per rank (ops[p] carries rank p's scalar) and post-divided at the end;
// one pass, narrow floats accumulated in float and rounded once (reduce_copy.h's ctaReduceMany).
struct DirectTileArgs {
  const char* const* srcs = nullptr;
  const ReduceOp* ops = nullptr;
  int nranks = 0;
  size_t at = 0;
  size_t len = 0;
  char* acc = nullptr;
};

template <class Cta, class Env>
BRAID_HOST_DEVICE void directReduceTile(const Cta& cta, Env& env, const DirectTileArgs& a) {
  env.reduceMany(cta, a.ops, a.acc, a.srcs, a.at, a.nranks, a.len, true);
}

}  // namespace braid
