// A ring all-reduce as flattened work (src/backends/common/work.h) for the emulator tests: ranks that are threads of
// this process, one ring program per channel over in-process FIFOs, each rank's KernelArgs ready to launch. The
// same job runs on the CPU backend's one-thread CTA (runHost) and as the kernels on the CTA emulator (runEmu), so
// the two are compared bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/ring/ring.h"
#include "src/backends/common/kernel_main.h"
#include "src/backends/cpu/host_cta.h"
#include "src/backends/cuda/emu/emu_kernels.h"
#include "transports/transport.h"

namespace braid {
namespace emu_test {

struct JobShape {
  int nranks = 2;
  int nchannels = 1;
  size_t count = 1000;
  DType dtype = DType::kFloat32;
  OpKind op = OpKind::kSum;
  ProtoId proto = ProtoId::kSimple;
  size_t chunkBytes = 1024;  // per FIFO slot; at most kSlotBytes
  bool inPlace = false;      // the output is the input (it starts as the input's copy)
};

struct RankWork {
  std::vector<unsigned char> in, out;
  std::vector<Program> progs;
  std::vector<WorkDesc> descs;
  std::vector<ItemState> states;
  std::vector<ChannelWorkDesc> chans;
  std::vector<std::array<ConnSlot, 2>> conns;  // per channel: 0 sends to the next rank, 1 receives from the previous
  std::vector<std::array<FifoCursor, 2>> cursors;
  std::vector<std::vector<int32_t>> sendIdx, recvIdx;
  std::vector<std::vector<char>> llRecv, llSend;
  DevStatus status;
  uint32_t abortFlag = 0;
  KernelArgs args;
};

// PreMulSum's scalar, in the dtype's own format: 1.5 for floating types, 3 for integers.
inline uint64_t scalarOneAndAHalf(DType t) {
  switch (t) {
    case DType::kFloat16:
      return 0x3E00;
    case DType::kBfloat16:
      return 0x3FC0;
    case DType::kFloat32:
      return 0x3FC00000;
    case DType::kFloat64:
      return 0x3FF8000000000000ull;
    case DType::kFp8E4M3:
      return 0x3C;
    case DType::kFp8E5M2:
      return 0x3E;
    default:
      return 3;
  }
}

class RingJob {
 public:
  static constexpr size_t kSlotBytes = 4096, kLlSlotBytes = 8192;  // multiples of 128: LL128 lines stay aligned

  explicit RingJob(const JobShape& s, uint64_t seed = 1) : shape_(s), ranks_(static_cast<size_t>(s.nranks)) {
    const size_t es = dtypeSize(s.dtype);
    std::mt19937_64 rng(seed);
    for (RankWork& r : ranks_) {
      r.in.resize(s.count * es);
      for (auto& b : r.in) b = static_cast<unsigned char>(rng());
      r.out.assign(s.count * es, 0xEE);
      if (s.inPlace) r.out = r.in;
    }
    build();
  }

  RankWork& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  const JobShape& shape() const { return shape_; }

  // Fresh FIFOs, cursors and status: the job can run again (another backend, or a replay with new inputs).
  void build() {
    const JobShape& s = shape_;
    const size_t es = dtypeSize(s.dtype);
    const size_t chunkElems = s.chunkBytes / es;
    fifos_.clear();
    for (int c = 0; c < s.nchannels; ++c) {
      for (int r = 0; r < s.nranks; ++r) {
        PeerInfo self;
        self.rank = r;
        Result<LocalFifo> f = allocLocalFifo(self, kSlotBytes, kLlSlotBytes);
        EXPECT_TRUE(f.isOk()) << f.status().message();
        fifos_.push_back(f.value());
      }
    }
    std::vector<int> ring(static_cast<size_t>(s.nranks));
    for (int r = 0; r < s.nranks; ++r) ring[static_cast<size_t>(r)] = r;
    const size_t nch = static_cast<size_t>(s.nchannels);
    for (int r = 0; r < s.nranks; ++r) {
      RankWork& w = rank(r);
      w.progs.assign(nch, Program{});
      w.descs.assign(nch, WorkDesc{});
      w.states.assign(nch, ItemState{});
      w.chans.assign(nch, ChannelWorkDesc{});
      w.conns.assign(nch, {});
      w.cursors.assign(nch, {});
      w.sendIdx.assign(nch, {});
      w.recvIdx.assign(nch, {});
      w.llRecv.assign(nch, std::vector<char>(s.chunkBytes, 0));
      w.llSend.assign(nch, std::vector<char>(s.chunkBytes, 0));
      for (size_t c = 0; c < nch; ++c) {
        const size_t begin = s.count * c / nch, end = s.count * (c + 1) / nch;
        RingParams rp{CollKind::kAllReduce, ring, r, 0, s.count, begin, end, chunkElems};
        Result<Program> p = buildRingProgram(rp);
        EXPECT_TRUE(p.isOk()) << p.status().message();
        w.progs[c] = p.value();
        const LocalFifo& next = fifo(c, (r + 1) % s.nranks);
        const LocalFifo& own = fifo(c, r);
        w.conns[c][0].view = FifoView::of(next.ctrl, next.slots, true);
        w.conns[c][1].view = FifoView::of(own.ctrl, own.slots, false);
        w.conns[c][0].cursor = &w.cursors[c][0];
        w.conns[c][1].cursor = &w.cursors[c][1];
        for (const Step& step : w.progs[c].steps) {
          w.sendIdx[c].push_back(step.sendPeer >= 0 ? 0 : -1);
          w.recvIdx[c].push_back(step.recvPeer >= 0 ? 1 : -1);
        }
        WorkDesc& d = w.descs[c];
        d.prog = w.progs[c].desc();
        d.input = reinterpret_cast<const char*>(s.inPlace ? w.out.data() : w.in.data());
        d.output = reinterpret_cast<char*>(w.out.data());
        d.elemSize = static_cast<uint32_t>(es);
        d.op.kind = s.op;
        d.op.dtype = s.dtype;
        d.op.nranks = s.nranks;
        d.op.scalar = scalarOneAndAHalf(s.dtype);
        d.proto = s.proto;
        d.sendConn = w.sendIdx[c].data();
        d.recvConn = w.recvIdx[c].data();
        d.llRecv = w.llRecv[c].data();
        d.llSend = w.llSend[c].data();
        ChannelWorkDesc& ch = w.chans[c];
        ch.items = &w.descs[c];
        ch.states = &w.states[c];
        ch.nitems = 1;
        ch.remaining = 1;
        ch.conns = w.conns[c].data();
        ch.nconns = 2;
      }
      devStatusInit(&w.status);
      w.abortFlag = 0;
      w.args.channels = w.chans.data();
      w.args.nchannels = static_cast<uint32_t>(nch);
      w.args.status = &w.status;
      w.args.abortFlag = &w.abortFlag;
      w.args.timeoutNs = 60ull * 1000 * 1000 * 1000;
    }
  }

  // Every rank on the CPU backend's one-thread CTA and SIMD loops (the reference).
  // streamOutputs: the output stores bypass the caches, as the CPU executor does for large operations.
  void runHost(bool streamOutputs = false) {
    std::vector<std::thread> threads;
    for (int r = 0; r < shape_.nranks; ++r) {
      threads.emplace_back([this, r, streamOutputs] {
        struct Env : HostDataOps {
          void drive(const ConnSlot&) {}
          void released(const ConnSlot&) {}
        } env;
        env.streamOutputs = streamOutputs;
        const HostCta cta;
        RankWork& w = rank(r);
        for (ChannelWorkDesc& ch : w.chans) announceDemand(ch);
        bool left = true;
        while (left) {
          left = false;
          for (ChannelWorkDesc& ch : w.chans) {
            progressChannel(cta, env, ch);
            left |= ch.remaining != 0;
          }
          std::this_thread::yield();
        }
        if (streamOutputs) streamFence();
      });
    }
    for (std::thread& t : threads) t.join();
  }

  // Every rank launches its kernel on the emulator at once, from its own thread; returns each launch's status.
  std::vector<Status> runEmu(int threadsPerCta, EmuLaunchConfig cfg = EmuLaunchConfig{}, int ranksLaunching = -1) {
    const int n = ranksLaunching < 0 ? shape_.nranks : ranksLaunching;
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        st[static_cast<size_t>(r)] = emuRunKernel(kernelName(shape_.proto), rank(r).args, threadsPerCta, cfg);
      });
    }
    for (std::thread& t : threads) t.join();
    return st;
  }

 private:
  const LocalFifo& fifo(size_t channel, int r) const {
    return fifos_[channel * static_cast<size_t>(shape_.nranks) + static_cast<size_t>(r)];
  }

  JobShape shape_;
  std::vector<RankWork> ranks_;
  std::vector<LocalFifo> fifos_;
};

}  // namespace emu_test
}  // namespace braid
