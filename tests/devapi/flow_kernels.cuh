// NCCL 2.32's Flow device API used the way NCCL's own generated ring kernels use it: a ring all-reduce of floats
// written with ncclFlowProcessor over a device communicator's resource buffers (the receive FIFOs and connection
// states). One source: nvcc compiles it for sm_90 (tests/devcode/nccl_device_header_test.sh) and g++ runs it on
// braid's CTA emulator over fake-GPU communicators (tests/devapi/flow_kernels_test.cc).
#pragma once

#include <nccl_device.h>

// The shape of one Flow ring: the launch's channels (CTAs), parts per CTA and FIFO layout.
struct FlowRingShape {
  int nParts;        // 1: one ring forward; 2: part 0 forward, part 1 backward, each on half of every chunk
  int nSlots;        // FIFO depth per connection
  size_t slotBytes;  // FIFO bytes per slot (protocol lines included)
  // Receive-FIFO bytes of one channel (MaxPeers 1; the connection states are nParts per channel).
  __host__ __device__ size_t channelBytes() const { return static_cast<size_t>(nParts) * nSlots * slotBytes; }
};

// Where the resources are: resource buffers of the device communicator (gin: the senders' staging FIFOs toward GIN
// peers, where the kernel may have such peers).
struct FlowRingResources {
  ncclDevResourceHandle fifo, state, gin;
};

// The resource buffers `grid` channels of `shape` take (the FIFOs, then nParts connection states per channel, then
// with `gin` as many staging FIFOs as receive FIFOs), chained in req[0..2]: put &req[0] in
// ncclDevCommRequirements::resourceRequirementsList; ncclDevCommCreate writes their handles into *res. A kernel with
// GIN peers also needs flowRingGinSignals(grid, shape) GIN signals (reqs.ginSignalCount).
__host__ inline void flowRingRequirements(int grid, FlowRingShape shape, FlowRingResources* res,
                                          ncclDevResourceRequirements req[3], bool gin = false) {
  req[0] = ncclDevResourceRequirements{};
  req[1] = ncclDevResourceRequirements{};
  req[2] = ncclDevResourceRequirements{};
  req[0].bufferSize = static_cast<size_t>(grid) * shape.channelBytes();
  req[0].bufferAlign = 128;
  req[0].outBufferHandle = &res->fifo;
  req[0].next = &req[1];
  req[1].bufferSize = static_cast<size_t>(grid) * static_cast<size_t>(shape.nParts) * sizeof(ncclFlowConnState);
  req[1].bufferAlign = 64;
  req[1].outBufferHandle = &res->state;
  if (gin) {
    req[1].next = &req[2];
    req[2].bufferSize = req[0].bufferSize;
    req[2].bufferAlign = 128;
    req[2].outBufferHandle = &res->gin;
  }
}
__host__ __device__ inline int flowRingGinSignals(int grid, FlowRingShape shape) {
  return 2 * grid * shape.nParts;
}

// The Flow configuration over those buffers (with a GIN mask: the world as the GIN team, signals from 0, and this
// channel's own staging FIFOs).
template <unsigned GinMask = 0>
__device__ inline ncclFlowConfig<GinMask> flowRingConfig(ncclDevComm const& comm, FlowRingShape shape,
                                                         FlowRingResources res) {
  ncclFlowConfig<GinMask> config;
  config.recvBuffer = ncclGetResourceBuffer(comm, res.fifo);
  config.connState = ncclGetResourceBuffer(comm, res.state);
  config.channelSize = shape.channelBytes();
  config.nSlots = shape.nSlots;
  config.connStatesPerChannel = shape.nParts;
  if constexpr (GinMask != 0) {
    config.ginTeam = ncclTeamWorld(comm);
    config.ginSignal0 = 0;
    config.ginBuffer = ncclGetResourceBuffer(comm, res.gin) + static_cast<size_t>(blockIdx.x) * shape.channelBytes();
    config.ginContextIndex = static_cast<int>(blockIdx.x);
  }
  return config;
}

// One ring all-reduce of `count` floats, out of place from sendWin's buffer into recvWin's (both registered windows).
// Each CTA (channel) takes chunks of the buffer in turn; a chunk is cut into nRanks blocks, each at most what
// SlotsPerProcess slots carry, and goes around the ring as a reduce-scatter (the partial sums forwarded through the
// FIFOs) and an all-gather. With `directGather` the all-gather writes straight into the next rank's output window
// (ncclFlowDirectSend / ncclFlowDirectRecv: the connection still orders the steps) instead of the FIFO.
template <unsigned GinMask, int SlotsPerProcess, ncclFlowProtocol Protocol>
__device__ void flowRingAllReduce(ncclDevComm const& comm, FlowRingShape shape, FlowRingResources res,
                                  ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count, int nWorkerWarps,
                                  bool directGather, ncclFlowShmem& shmem) {
  const int n = comm.nRanks, r = comm.rank;
  const int part = ncclFlowThreadPart(nWorkerWarps, shape.nParts, nullptr, ncclFlowGetSignalWarpsPerPart(Protocol));
  const int next = shape.nParts == 2 && part == 1 ? (r + n - 1) % n : (r + 1) % n;
  const int prev = shape.nParts == 2 && part == 1 ? (r + 1) % n : (r + n - 1) % n;
  const int nPeers = n == 1 ? 0 : 1;
  const ncclFlowConfig<GinMask> config = flowRingConfig<GinMask>(comm, shape, res);
  ncclFlowProcessor<GinMask, SlotsPerProcess, 1, Protocol> flow(comm, config, &next, nPeers, &prev, nPeers,
                                                                static_cast<int>(blockIdx.x), nWorkerWarps, shmem,
                                                                shape.nParts, part, part);
  // A block's elements: what SlotsPerProcess slots carry (LL 8 of every 16 bytes, LL128 120 of every 128).
  const size_t payload = Protocol == ncclFlowProtocolLL      ? shape.slotBytes / 2
                         : Protocol == ncclFlowProtocolLL128 ? shape.slotBytes / 128 * 120
                                                             : shape.slotBytes;
  const size_t blockElts = payload / sizeof(float) * SlotsPerProcess;
  const size_t chunkElts = blockElts * static_cast<size_t>(n);
  const ncclSymPtr<float> none;
  nccl::utility::OpSum<float> sum;
  const float* in = static_cast<const float*>(ncclGetLocalPointer(sendWin, 0));
  float* out = static_cast<float*>(ncclGetLocalPointer(recvWin, 0));
  float* nextOut = static_cast<float*>(ncclGetPeerPointer(recvWin, 0, next));
  for (size_t chunk = blockIdx.x * chunkElts; chunk < count; chunk += gridDim.x * chunkElts) {
    // This part's share of the chunk: all of it, or one half each.
    const size_t chunkEnd = chunk + chunkElts < count ? chunk + chunkElts : count;
    const size_t half = (chunkEnd - chunk + 1) / 2;
    const size_t lo = shape.nParts == 2 && part == 1 ? chunk + half : chunk;
    const size_t hi = shape.nParts == 2 && part == 0 ? chunk + half : chunkEnd;
    const size_t share = (hi - lo + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
    auto blockLo = [&](int b) { return lo + share * static_cast<size_t>(b) < hi ? lo + share * b : hi; };
    auto blockN = [&](int b) { return (blockLo(b) + share < hi ? blockLo(b) + share : hi) - blockLo(b); };
    // Step s handles the block s places behind this rank along the ring (what the previous rank handled a step
    // earlier); the last reduce-scatter step completes this rank's block.
    const int dir = next == (r + 1) % n ? 1 : -1;
    auto blockAt = [&](int step) { return ((r - dir * step) % n + n) % n; };
    if (n == 1) {
      const float* src = in + lo;
      float* dst = out + lo;
      flow.process(
          ncclFlowNoSend(), ncclFlowNoRecv(), none, none, [&](int) { return src; }, 1, [&](int) { return dst; }, 1, sum,
          hi - lo);
      continue;
    }
    // Reduce-scatter: send this rank's block, then add each received partial sum to this rank's and pass it on; the
    // last addition completes this rank's block, which is stored and sent on as the all-gather's first step.
    for (int s = 0; s < n; ++s) {
      const int b = blockAt(s);
      const float* src = in + blockLo(b);
      float* dst = out + blockLo(b);
      const int nDst = s == n - 1 ? 1 : 0;
      if (s == 0) {
        flow.process(
            ncclFlowSend(), ncclFlowNoRecv(), none, none, [&](int) { return src; }, 1, ncclFlowNullPtrFn<float>(), 0,
            sum, blockN(b));
      } else if (s == n - 1 && directGather) {
        float* remote = nextOut + blockLo(b);
        flow.process(
            ncclFlowDirectSend(), ncclFlowRecv(), none, none, [&](int) { return src; }, 1,
            [&](int k) { return k == 0 ? dst : remote; }, 2, sum, blockN(b));
      } else {
        flow.process(
            ncclFlowSend(), ncclFlowRecv(), none, none, [&](int) { return src; }, 1, [&](int) { return dst; }, nDst,
            sum, blockN(b));
      }
    }
    // All-gather: store each completed block as it passes, forwarding all but the last.
    for (int t = 1; t < n; ++t) {
      const int b = blockAt(n - 1 + t);
      float* dst = out + blockLo(b);
      if (directGather) {
        // The block is already in this rank's output (the previous rank wrote it); forward it straight into the next
        // rank's output, and only synchronise on the last step.
        float* remote = nextOut + blockLo(b);
        if (t < n - 1) {
          flow.process(
              ncclFlowDirectSend(), ncclFlowDirectRecv(), none, none, [&](int) { return dst; }, 1,
              [&](int) { return remote; }, 1, sum, blockN(b));
        } else {
          flow.process(ncclFlowNoSend(), ncclFlowDirectRecv(), none, none, ncclFlowNullPtrFn<float>(), 0,
                       ncclFlowNullPtrFn<float>(), 0, sum, blockN(b));
        }
      } else if (t < n - 1) {
        flow.process(
            ncclFlowSend(), ncclFlowRecv(), none, none, ncclFlowNullPtrFn<float>(), 0, [&](int) { return dst; }, 1, sum,
            blockN(b));
      } else {
        flow.process(
            ncclFlowNoSend(), ncclFlowRecv(), none, none, ncclFlowNullPtrFn<float>(), 0, [&](int) { return dst; }, 1,
            sum, blockN(b));
      }
    }
  }
  flow.close();
}

// The kernel: SlotsPerProcess, the protocol and the GIN mask as a run-time choice among the forms the tests use (the
// Gin forms reach peers out of load/store reach over GIN, the others only LSA peers).
enum FlowVariant { kFlowSimple, kFlowSimple2Slots, kFlowLL, kFlowLL128, kFlowGinSimple, kFlowGinLL128, kFlowVariants };
__global__ void flowRingKernel(int variant, ncclDevComm comm, FlowRingShape shape, FlowRingResources res,
                               ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count, int nWorkerWarps,
                               bool directGather, ncclFlowShmem* shmem) {
  constexpr unsigned kGin = NCCL_GIN_BACKEND_MASK_ALL;
  switch (variant) {
    case kFlowSimple2Slots:
      flowRingAllReduce<0, 2, ncclFlowProtocolSimple>(comm, shape, res, sendWin, recvWin, count, nWorkerWarps,
                                                      directGather, *shmem);
      break;
    case kFlowLL:
      flowRingAllReduce<0, 1, ncclFlowProtocolLL>(comm, shape, res, sendWin, recvWin, count, nWorkerWarps, directGather,
                                                  *shmem);
      break;
    case kFlowLL128:
      flowRingAllReduce<0, 1, ncclFlowProtocolLL128>(comm, shape, res, sendWin, recvWin, count, nWorkerWarps,
                                                     directGather, *shmem);
      break;
    case kFlowGinSimple:
      flowRingAllReduce<kGin, 2, ncclFlowProtocolSimple>(comm, shape, res, sendWin, recvWin, count, nWorkerWarps,
                                                         directGather, *shmem);
      break;
    case kFlowGinLL128:
      flowRingAllReduce<kGin, 1, ncclFlowProtocolLL128>(comm, shape, res, sendWin, recvWin, count, nWorkerWarps,
                                                        directGather, *shmem);
      break;
    default:
      flowRingAllReduce<0, 1, ncclFlowProtocolSimple>(comm, shape, res, sendWin, recvWin, count, nWorkerWarps,
                                                      directGather, *shmem);
  }
}

// Misuse: a transfer larger than one slot holds (and whatever the launch or partWorkerWarps get wrong first).
__global__ void flowTooLarge(ncclDevComm comm, FlowRingShape shape, FlowRingResources res, ncclWindow_t sendWin,
                             int nWorkerWarps, ncclFlowShmem* shmem, const int* partWorkerWarps) {
  const ncclFlowConfig<0> config = flowRingConfig<0>(comm, shape, res);
  const int next = (comm.rank + 1) % comm.nRanks;
  ncclLsaFlowProcessor<> flow(comm, config, &next, 1, &next, 0, 0, nWorkerWarps, *shmem, 1, 0, 0, nullptr, nullptr,
                              partWorkerWarps);
  const float* in = static_cast<const float*>(ncclGetLocalPointer(sendWin, 0));
  flow.process(
      ncclFlowSend(), ncclFlowNoRecv(), ncclSymPtr<float>(), ncclSymPtr<float>(), [&](int) { return in; }, 1,
      ncclFlowNullPtrFn<float>(), 0, nccl::utility::OpSum<float>(), shape.slotBytes / sizeof(float) + 1);
  flow.close();
}

// ncclLsaFlowConn driven the way NCCL's Flow splits its roles: thread 0 waits for the send slot and fills it, thread 1
// (which did not wait) mirrors the step with advanceStep() and posts it, thread 32 waits for each receive slot, reads
// it and posts it drained. Each rank passes nSteps stamps to the next rank of the ring; out[s] is what it received at
// step s. The connections resume across launches (close()).
// The stamps' passage, for either kind of connection (constructed by every thread alike).
template <typename SendConn, typename RecvConn>
__device__ void passStamps(SendConn& send, RecvConn& recv, int launch, int rank, int nSteps, int* out) {
  const int tid = static_cast<int>(threadIdx.x);
  __syncthreads();  // every thread has read the saved steps
  for (int s = 0; s < nSteps; ++s) {
    if (tid == 0) *static_cast<int*>(send.waitSend()) = launch * 1000 + rank * 100 + s;
    __syncthreads();
    if (tid == 1) {
      send.advanceStep();
      send.postSend(sizeof(int));
    }
    if (tid == 32) {
      out[s] = *static_cast<const int*>(recv.waitRecv());
      recv.postRecv();
    }
  }
  if (tid == 1) send.close();
  if (tid == 32) recv.close();
}

// With `gin`, the connections are ncclGinFlowConn: the stamps go as GIN puts with their signals and the credits as
// GIN signals (between ranks of one process, GIN by load/store; across hosts, by the proxy), through GIN signals 0 and
// 1 (connection state 0 carries this rank's send and receive directions) and staging FIFOs in res.gin.
__global__ void flowConnPass(ncclDevComm comm, FlowRingShape shape, FlowRingResources res, bool gin, int launch,
                             int nSteps, int* out) {
  const int n = comm.nRanks, r = comm.rank;
  const ncclSymPtr<char> fifo = ncclGetResourceBuffer(comm, res.fifo);
  const ncclSymPtr<ncclFlowConnState> state = ncclGetResourceBuffer(comm, res.state);
  if (gin) {
    const ncclSymPtr<char> staging = ncclGetResourceBuffer(comm, res.gin);
    const ncclTeam world = ncclTeamWorld(comm);
    ncclGinFlowConn<> send(comm, 0, world, (r + 1) % n, fifo, staging, state, 0, 0, shape.nSlots, shape.slotBytes,
                           ncclFlowTypeSend, true, false);
    ncclGinFlowConn<> recv(comm, 0, world, (r + n - 1) % n, fifo, ncclSymPtr<char>(), state, 0, 0, shape.nSlots,
                           shape.slotBytes, ncclFlowTypeRecv, true, true);
    passStamps(send, recv, launch, r, nSteps, out);
  } else {
    ncclLsaFlowConn<> send(comm, fifo, state, (r + 1) % n, shape.nSlots, shape.slotBytes, ncclFlowTypeSend, false);
    ncclLsaFlowConn<> recv(comm, fifo, state, (r + n - 1) % n, shape.nSlots, shape.slotBytes, ncclFlowTypeRecv, true);
    passStamps(send, recv, launch, r, nSteps, out);
  }
}
