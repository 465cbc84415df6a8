// GIN kernels toward ranks of other hosts (the proxy), what its fences and VA signals add: the hybrid world barrier
// ordering signal-less puts, a barrier's Put fence alone, VA signals with their data. One source: nvcc compiles it
// for sm_90 (tests/devcode/nccl_device_probe.cu), and g++ runs it on braid's CTA emulator
// (tests/devapi/gin_hosts_test.cc).
#pragma once

#include <nccl_device.h>

// Round `round` of puts ordered only by the hybrid world barrier's fence: rank r puts `bytes` of its send window into
// rank n-1-r's receive window with no signal (with 4 ranks on two hosts: a rank of the other host outside r's rail
// team, so no arrival of the barrier travels its connection), syncs ncclBarrierSession's world form with `fence`,
// and each thread counts the 4-byte words of its share of the receive window that differ from `want` (what rank
// n-1-r sent) into out[threadIdx.x]. A second sync keeps the next round's put from overtaking the count.
__global__ void ginHybridFence(ncclWindow_t sendWin, ncclWindow_t recvWin, size_t bytes, uint32_t want,
                               ncclGinFenceLevel fence, ncclDevComm devComm, uint64_t* out) {
  ncclCoopCta cta;
  ncclGin gin(devComm, 0);
  const ncclTeam world = ncclTeamWorld(devComm);
  gin.put(world, world.nRanks - 1 - world.rank, recvWin, 0, sendWin, 0, bytes, ncclGin_None{}, ncclGin_None{}, cta);
  ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagWorld(), gin, 0);
  bar.sync(cta, cuda::memory_order_acq_rel, fence);
  const uint32_t* got = static_cast<const uint32_t*>(ncclGetLocalPointer(recvWin, 0));
  uint64_t wrong = 0;
  for (size_t i = threadIdx.x; i < bytes / sizeof(uint32_t); i += blockDim.x) wrong += got[i] != want ? 1u : 0u;
  out[threadIdx.x] = wrong;
  bar.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::None);
}

// What a fence waits for: rank-of-another-host `peer` gets `bytes` of the send window with no signal, then this rank
// syncs a barrier over its LSA team, which on two one-rank hosts is this rank alone (no arrivals), with `fence`,
// timed: a GIN barrier (`bar`), or with `hybrid` an ncclBarrierSession whose inner team is the LSA team (its LSA
// barrier) and whose outer GIN team is that team again (`bar`). out[0] gets the sync's result.
__global__ void ginPutThenFence(ncclWindow_t sendWin, ncclWindow_t recvWin, size_t bytes, int peer,
                                ncclGinBarrierHandle bar, ncclGinFenceLevel fence, bool hybrid, ncclDevComm devComm,
                                uint64_t* out) {
  ncclCoopCta cta;
  ncclGin gin(devComm, 0);
  gin.put(ncclTeamWorld(devComm), peer, recvWin, 0, sendWin, 0, bytes, ncclGin_None{}, ncclGin_None{}, cta);
  ncclResult_t r;
  if (hybrid) {
    ncclBarrierSession<ncclCoopCta> session(cta, ncclTeamLsa(devComm), ncclTeamLsa(devComm), gin, devComm.lsaBarrier,
                                            bar, 0);
    r = session.sync(cta, cuda::memory_order_acq_rel, fence, 20000000000ull);
  } else {
    ncclGinBarrierSession<ncclCoopCta> session(cta, gin, ncclTeamLsa(devComm), bar, 0);
    r = session.sync(cta, cuda::memory_order_acq_rel, fence, 20000000000ull);
  }
  if (threadIdx.x == 0) out[0] = static_cast<uint64_t>(r);
}

// VA signals from every rank to every other, round `round` of several launches: rank r puts its `bytes` of `sendWin`
// into slot r of every other rank's `recvWin` with an increment of VA word 0 of that rank's `sigWin`, adds 5 to its
// VA word 1 by a signal, and stores `stamp` at offset n * bytes + 8 * r with an add of 3 to its VA word 2. The LSA
// partner gets them by atomics, ranks of the other host by proxy. Then this rank waits until each of its three words
// has counted every other rank's rounds so far and leaves them in out[0..2]. Right after the waits each thread counts
// the bytes of the other ranks' slots, and the other ranks' values, that are not what they sent this round (a byte of
// rank q is 16 * q + round + 1, its value 1000 * round + q) into out[3 + threadIdx.x]: a VA signal implies its data.
__global__ void ginVaSignalsEveryPeer(ncclWindow_t sendWin, ncclWindow_t recvWin, ncclWindow_t sigWin, size_t bytes,
                                      uint64_t stamp, int round, ncclDevComm devComm, uint64_t* out) {
  ncclCoopCta cta;
  ncclGin gin(devComm, 0);
  const ncclTeam world = ncclTeamWorld(devComm);
  const size_t values = static_cast<size_t>(world.nRanks) * bytes;
  for (int p = 0; p < world.nRanks; ++p) {
    if (p == world.rank) continue;
    gin.put(world, p, recvWin, static_cast<size_t>(world.rank) * bytes, sendWin, 0, bytes,
            ncclGin_VASignalInc{sigWin, 0}, ncclGin_None{}, cta);
    gin.signal(world, p, ncclGin_VASignalAdd{sigWin, 8, 5}, cta);
    gin.putValue(world, p, recvWin, values + 8u * static_cast<size_t>(world.rank), stamp,
                 ncclGin_VASignalAdd{sigWin, 16, 3}, cta);
  }
  const uint64_t rounds = static_cast<uint64_t>(world.nRanks - 1) * static_cast<uint64_t>(round + 1);
  const unsigned char* got = static_cast<const unsigned char*>(ncclGetLocalPointer(recvWin, 0));
  uint64_t wrong = 0;
  /* The puts' data as soon as their VA word says so (later operations' messages must not be what brought it). */
  gin.waitSignal(cta, sigWin, 0, rounds);
  for (int q = 0; q < world.nRanks; ++q) {
    if (q == world.rank) continue;
    const unsigned char want = static_cast<unsigned char>(16 * q + round + 1);
    const unsigned char* slot = got + static_cast<size_t>(q) * bytes;
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) wrong += slot[i] != want ? 1u : 0u;
  }
  gin.waitSignal(cta, sigWin, 8, 5 * rounds);
  gin.waitSignal(cta, sigWin, 16, 3 * rounds);
  for (int q = 0; q < world.nRanks && threadIdx.x == 0; ++q) {
    uint64_t value;
    memcpy(&value, got + values + 8u * static_cast<size_t>(q), sizeof(value));
    if (q != world.rank && value != 1000u * static_cast<uint64_t>(round) + static_cast<uint64_t>(q)) ++wrong;
  }
  out[3 + threadIdx.x] = wrong;
  gin.flush(cta);
  if (threadIdx.x == 0) {
    for (int w = 0; w < 3; ++w) out[w] = gin.readSignal(sigWin, 8u * static_cast<size_t>(w));
  }
}
