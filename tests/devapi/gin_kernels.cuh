// GIN (nccl_device/gin.h) kernels written the way device-API users write them: puts with signals and counters,
// values, gets, VA signals, shadows, GIN and hybrid barriers. One source: nvcc compiles it for sm_90
// (tests/devcode/nccl_device_probe.cu), and g++ runs it on braid's CTA emulator (tests/devapi/gin_kernels_test.cc).
#pragma once

#include <nccl_device.h>

// Where the kernels below leave what the host checks, per rank.
enum GinOut {
  kGinSignal0,   // signal 0 after the round's arrivals
  kGinCounter0,  // counter 0 after the round's puts
  kGinValue,     // the value the previous rank put
  kGinVaSignal,  // the VA signal the previous rank added to
  kGinBefore,    // waitSignalFollowShadow's before and delta
  kGinDelta,
  kGinCounter1,  // counter 1 after one put, and after its reset
  kGinCounter1Reset,
  kGinTimedSync,  // the hybrid barrier's timed sync (an ncclResult_t)
  kGinOutWords
};

// All-gather by GIN puts, round `round` of several launches: every rank's `count` floats of its send window go to
// offset rank * count of every world rank's receive window (itself included), each put with an increment of signal
// 0 on the receiver and of counter 0 here. CTA b first passes world GIN barrier b (no rank puts into a receive
// window its owner may still be reading from the last round), then sends to the ranks p with p % gridDim.x == b;
// CTA 0 waits until every rank's put of this round has landed here (the shadow of signal 0 counts what the rounds
// so far must bring) and until this rank's own puts have counted.
__global__ void ginAllGather(ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count, int round, int context,
                             ncclDevComm devComm, uint64_t* out) {
  ncclCoopCta cta;
  ncclGin gin(devComm, context);
  const ncclTeam world = ncclTeamWorld(devComm);
  ncclGinBarrier(cta, gin, ncclTeamTagWorld(), blockIdx.x);
  const size_t bytes = count * sizeof(float);
  for (int p = static_cast<int>(blockIdx.x); p < world.nRanks; p += static_cast<int>(gridDim.x)) {
    gin.put(world, p, recvWin, static_cast<size_t>(world.rank) * bytes, sendWin, 0, bytes, ncclGin_SignalInc{0},
            ncclGin_WeakCounterInc{0}, cta);
  }
  if (blockIdx.x != 0) return;
  if (threadIdx.x == 0) gin.increaseSignalShadow(0, static_cast<uint64_t>(world.nRanks));
  __syncthreads();
  gin.waitSignalMeetShadow(cta, 0);
  gin.waitCounter(cta, 0, static_cast<uint64_t>(world.nRanks) * static_cast<uint64_t>(round + 1));
  gin.flush(cta);
  if (threadIdx.x == 0) {
    out[kGinSignal0] = gin.readSignal(0);
    out[kGinCounter0] = gin.readCounter(0);
  }
}

// One CTA, round `round`: through the hybrid world barrier, rank r stores a value into the next rank's receive
// window (offset valueOffset) with an add of 2 to its VA signal at offset 8 * r of the next rank's signal window,
// adds 3 to the next rank's signal 1, and gets the previous rank's first `count` floats of its send window into its
// own receive window at getOffset; then it waits for the previous rank's VA signal and follows signal 1's shadow.
// A put with counter 1 and that counter's reset, then the timed sync, end the round.
__global__ void ginValuesAndGets(ncclWindow_t sendWin, ncclWindow_t recvWin, ncclWindow_t sigWin, size_t valueOffset,
                                 size_t getOffset, size_t count, int round, ncclDevComm devComm, uint64_t* out) {
  ncclCoopCta cta;
  ncclGin gin(devComm, 0);
  const ncclTeam world = ncclTeamWorld(devComm);
  const int next = (world.rank + 1) % world.nRanks, prev = (world.rank + world.nRanks - 1) % world.nRanks;
  ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagWorld(), gin, 0);
  bar.sync(cta, cuda::memory_order_acq_rel);
  const uint64_t stamp = static_cast<uint64_t>(round) * 100u + static_cast<uint64_t>(world.rank);
  gin.putValue(world, next, recvWin, valueOffset, stamp,
               ncclGin_VASignalAdd{sigWin, 8u * static_cast<size_t>(world.rank), 2}, cta);
  gin.signal(world, next, ncclGin_SignalAdd{1, 3}, cta);
  gin.get(world, prev, sendWin, 0, recvWin, getOffset, count * sizeof(float), cta);
  ncclGinRequest_t req;
  gin.flushAsync(world, static_cast<uint32_t>(prev), &req, cta);
  gin.wait(req, cta);
  const size_t prevSlot = 8u * static_cast<size_t>(prev);
  gin.waitSignal(cta, sigWin, prevSlot, 2u * static_cast<uint64_t>(round + 1));
  uint64_t before = 0, delta = 0;
  gin.waitSignalFollowShadow(cta, 1, uint64_t(3), &before, &delta);
  gin.put(world, world.rank, recvWin, getOffset, recvWin, getOffset, sizeof(float), ncclGin_None{},
          ncclGin_WeakCounterInc{1}, cta);
  if (threadIdx.x == 0) {
    out[kGinValue] = *static_cast<const uint64_t*>(ncclGetLocalPointer(recvWin, valueOffset));
    out[kGinVaSignal] = gin.readSignal(sigWin, prevSlot);
    out[kGinBefore] = before;
    out[kGinDelta] = delta;
    out[kGinCounter1] = gin.readCounter(1);
    gin.resetCounter(1);
    out[kGinCounter1Reset] = gin.readCounter(1);
  }
  // Nobody leaves (and the host reads) before every rank's value and get are done.
  const ncclResult_t synced =
      bar.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put | ncclGinFenceLevel::Get, 20000000000ull);
  if (threadIdx.x == 0) out[kGinTimedSync] = static_cast<uint64_t>(synced);
}

// Waits for a signal nobody sends, with a timeout: out[0] gets the result (ncclTimeout).
__global__ void ginWaitsInVain(uint64_t timeoutCycles, ncclDevComm devComm, uint64_t* out) {
  ncclCoopCta cta;
  ncclGin gin(devComm, 0);
  const ncclResult_t r =
      gin.waitSignal(cta, 0, gin.readSignal(0) + 1000u, 64, cuda::memory_order_acquire, timeoutCycles);
  if (threadIdx.x == 0) out[0] = static_cast<uint64_t>(r);
}

// What a kernel must not do, each of which traps with a message naming it: a context the device communicator does
// not have (0), a signal id out of range (1), a peer outside the team (2).
__global__ void ginMisuse(int what, ncclDevComm devComm) {
  if (what == 0) {
    ncclGin gin(devComm, devComm.ginContextCount);
    (void)gin;
    return;
  }
  ncclGin gin(devComm, 0);
  if (what == 1) (void)gin.readSignal(devComm.ginSignalCount);
  if (what == 2) gin.signal(ncclTeamWorld(devComm), devComm.nRanks, ncclGin_SignalInc{0});
}

// Every CTA gets `bytes` of the `from` window of the ranks q = blockIdx.x, blockIdx.x + gridDim.x, ... (not this one)
// into slot q of `into` (at q * bytes + `skew`), on context blockIdx.x % ginContextCount, then one flush: every get
// has landed when it returns. From a rank of another host the proxies carry them; from the LSA partner they are
// copies (skipped with `otherHostsOnly`).
__global__ void ginGetEveryPeer(ncclWindow_t from, size_t fromOffset, ncclWindow_t into, size_t bytes, size_t skew,
                                bool otherHostsOnly, ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclGin gin(devComm, static_cast<int>(blockIdx.x % static_cast<unsigned>(devComm.ginContextCount)));
  const ncclTeam world = ncclTeamWorld(devComm);
  for (int q = static_cast<int>(blockIdx.x); q < world.nRanks; q += static_cast<int>(gridDim.x)) {
    const bool partner = q / devComm.lsaSize == world.rank / devComm.lsaSize;
    if (q == world.rank || (otherHostsOnly && partner)) continue;
    gin.get(world, q, from, fromOffset, into, static_cast<size_t>(q) * bytes + skew, bytes, cta);
  }
  gin.flush(cta);
}

// One value with no signal into the next rank's window at `offset`, then a flush (the proxy has sent it).
__global__ void ginValueThenFlush(ncclWindow_t win, size_t offset, ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclGin gin(devComm, 0);
  const ncclTeam world = ncclTeamWorld(devComm);
  gin.putValue(world, (world.rank + 1) % world.nRanks, win, offset, uint64_t{1}, ncclGin_None{}, cta);
  gin.flush(cta);
}

// Rounds of a ring exchange ordered by a GIN barrier of the caller's own (ncclGinBarrierCreateRequirement over the
// world team, handle `bar`): rank r stores `stamp` into slot r of the next rank's window with a bare putValue (no
// signal), syncs the barrier (timed), and reads what the previous rank stored here into *out; a second sync keeps the
// next round's store from overtaking the read. Coop: the whole CTA, or one thread (a launch of one thread), which
// then signals and waits for every peer itself.
template <typename Coop>
__global__ void ginTeamBarrierRing(ncclWindow_t win, uint64_t stamp, ncclGinBarrierHandle bar, ncclDevComm devComm,
                                   uint64_t* out) {
  Coop cta;
  ncclGin gin(devComm, 0);
  const ncclTeam world = ncclTeamWorld(devComm);
  const int next = (world.rank + 1) % world.nRanks, prev = (world.rank + world.nRanks - 1) % world.nRanks;
  ncclGinBarrierSession<Coop> session(cta, gin, world, bar, 0);
  gin.putValue(world, next, win, 8u * static_cast<size_t>(world.rank), stamp, ncclGin_None{}, cta);
  const ncclResult_t first = session.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put, 20000000000ull);
  if (threadIdx.x == 0) {
    out[0] = *static_cast<const uint64_t*>(ncclGetLocalPointer(win, 8u * static_cast<size_t>(prev)));
    out[1] = static_cast<uint64_t>(first);
  }
  session.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
}

// `count` gets of `bytes` each from rank `peer` (of another host), piece k from offset k * bytes of its `from` window
// to offset base + k * bytes of `into`, by one thread, then one flush: more gets than the queue has slots, each
// outstanding while later ones are queued.
__global__ void ginManyGets(ncclWindow_t from, ncclWindow_t into, int peer, size_t base, size_t bytes, int count,
                            ncclDevComm devComm) {
  if (threadIdx.x != 0) return;
  ncclGin gin(devComm, 0);
  const ncclTeam world = ncclTeamWorld(devComm);
  for (int k = 0; k < count; ++k) {
    gin.get(world, peer, from, static_cast<size_t>(k) * bytes, into, base + static_cast<size_t>(k) * bytes, bytes);
  }
  gin.flush(ncclCoopThread{});
}
