// The step engine (src/backends/common/step_engine.h) on a CTA of several threads, the form a GPU kernel and the
// CUDA backend's emulator run: ring all-reduces between ranks that are groups of threads, over in-process FIFOs,
// with every protocol (Simple, LL, LL128), checked exactly. The one-thread CTA is the CPU executor, which every
// collective test runs. Also: the CTA-strided reduction loops (reduce_copy.h) against the CPU backend's SIMD loops,
// bitwise, for every dtype and op.
#include "src/backends/common/step_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "algorithms/ring/ring.h"
#include "src/backends/common/reduce_copy.h"
#include "src/backends/cpu/reduce.h"
#include "transports/transport.h"

namespace braid {
namespace {

// A barrier that also ANDs one flag per thread (__syncthreads_and), with a deadline so a broken engine fails the
// test instead of hanging it.
class CtaBarrier {
 public:
  explicit CtaBarrier(int n) : n_(n) {}
  bool arrive(bool v) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = gen_;
    acc_ = acc_ && v;
    if (++count_ == n_) {
      result_ = acc_;
      acc_ = true;
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return result_;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return gen_ != gen; })) {
      ADD_FAILURE() << "CTA barrier timed out";
      std::abort();
    }
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  uint64_t gen_ = 0;
  bool acc_ = true;
  bool result_ = true;
};

struct ThreadCta {
  static constexpr bool kSerial = false;
  int t, n;
  CtaBarrier* bar;
  int tid() const { return t; }
  int nthreads() const { return n; }
  void sync() const { bar->arrive(true); }
  bool syncAll(bool v) const { return bar->arrive(v); }
};

// The element loops of reduce_copy.h; no network to drive.
struct ElemEnv {
  template <class Cta>
  void reduce(const Cta& cta, const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post) {
    ctaReduce(cta, op, dst, peer, local, n, post);
  }
  template <class Cta>
  void copyLocal(const Cta& cta, const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
    ctaCopyLocal(cta, op, dst, src, n, post);
  }
  template <class Cta>
  void copy(const Cta& cta, void* dst, const void* src, size_t bytes) {
    ctaCopy(cta, dst, src, bytes);
  }
  void drive(const ConnSlot&) {}
  void released(const ConnSlot&) {}
};

struct RankState {
  Program prog;
  WorkDesc desc;
  ItemState state;
  ConnSlot conns[2];  // 0: send to the next rank, 1: receive from the previous one
  FifoCursor cursors[2];
  std::vector<int32_t> sendIdx, recvIdx;
  ChannelWorkDesc ch;
  std::vector<char> llRecv, llSend;
};

// A ring all-reduce of `count` floats over `nranks` ranks of `nthreads` threads each; returns the outputs.
std::vector<std::vector<float>> ringAllReduce(int nranks, int nthreads, size_t count, ProtoId proto, size_t chunkElems,
                                              OpKind kind) {
  constexpr size_t kSlotBytes = 4096, kLlSlotBytes = 8192;  // multiples of 128: LL128 lines stay aligned
  std::vector<LocalFifo> fifos;
  for (int r = 0; r < nranks; ++r) {
    PeerInfo self;
    self.rank = r;
    Result<LocalFifo> f = allocLocalFifo(self, kSlotBytes, kLlSlotBytes);
    EXPECT_TRUE(f.isOk()) << f.status().message();
    fifos.push_back(f.value());
  }
  std::vector<int> ring(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) ring[static_cast<size_t>(r)] = r;
  std::vector<std::vector<float>> in(static_cast<size_t>(nranks)), out(static_cast<size_t>(nranks));
  std::vector<RankState> st(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    RankState& s = st[static_cast<size_t>(r)];
    auto& x = in[static_cast<size_t>(r)];
    x.resize(count);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i * 7 + static_cast<size_t>(r) * 3) % 11 + 1);
    out[static_cast<size_t>(r)].assign(count, -1.0f);
    RingParams rp{CollKind::kAllReduce, ring, r, 0, count, 0, count, chunkElems};
    Result<Program> p = buildRingProgram(rp);
    EXPECT_TRUE(p.isOk()) << p.status().message();
    s.prog = p.value();
    const int next = (r + 1) % nranks;
    s.conns[0].view = FifoView::of(fifos[static_cast<size_t>(next)].ctrl, fifos[static_cast<size_t>(next)].slots, true);
    s.conns[1].view = FifoView::of(fifos[static_cast<size_t>(r)].ctrl, fifos[static_cast<size_t>(r)].slots, false);
    s.conns[0].cursor = &s.cursors[0];
    s.conns[1].cursor = &s.cursors[1];
    for (const Step& step : s.prog.steps) {
      s.sendIdx.push_back(step.sendPeer >= 0 ? 0 : -1);
      s.recvIdx.push_back(step.recvPeer >= 0 ? 1 : -1);
    }
    s.llRecv.assign(chunkElems * sizeof(float), 0);
    s.llSend.assign(chunkElems * sizeof(float), 0);
    s.desc.prog = s.prog.desc();
    s.desc.input = reinterpret_cast<const char*>(x.data());
    s.desc.output = reinterpret_cast<char*>(out[static_cast<size_t>(r)].data());
    s.desc.elemSize = sizeof(float);
    s.desc.op.kind = kind;
    s.desc.op.dtype = DType::kFloat32;
    s.desc.op.nranks = nranks;
    const float two = 2.0f;
    std::memcpy(&s.desc.op.scalar, &two, sizeof(two));
    s.desc.proto = proto;
    s.desc.sendConn = s.sendIdx.data();
    s.desc.recvConn = s.recvIdx.data();
    s.desc.llRecv = s.llRecv.data();
    s.desc.llSend = s.llSend.data();
    s.ch.items = &s.desc;
    s.ch.states = &s.state;
    s.ch.nitems = 1;
    s.ch.remaining = 1;
    s.ch.conns = s.conns;
    s.ch.nconns = 2;
  }
  std::vector<std::unique_ptr<CtaBarrier>> bars;
  for (int r = 0; r < nranks; ++r) bars.push_back(std::make_unique<CtaBarrier>(nthreads));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    for (int t = 0; t < nthreads; ++t) {
      threads.emplace_back([&, r, t] {
        ThreadCta cta{t, nthreads, bars[static_cast<size_t>(r)].get()};
        ElemEnv env;
        ChannelWorkDesc& ch = st[static_cast<size_t>(r)].ch;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        // Every thread reads `remaining` after the engine's last barrier, so all leave the loop together.
        while (cta.syncAll(ch.remaining != 0)) {
          if (!progressChannel(cta, env, ch)) std::this_thread::yield();
          if (std::chrono::steady_clock::now() > deadline) {
            ADD_FAILURE() << "rank " << r << " made no progress";
            std::abort();
          }
        }
      });
    }
  }
  for (std::thread& th : threads) th.join();
  // The expected result, computed the same way (every partial sum of small integers is exact).
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) {
      const float v = in[static_cast<size_t>(r)][i];
      want = kind == OpKind::kMax ? (r == 0 ? v : std::max(want, v)) : want + (kind == OpKind::kPreMulSum ? v * 2 : v);
    }
    for (int r = 0; r < nranks; ++r) {
      EXPECT_EQ(out[static_cast<size_t>(r)][i], want) << "rank " << r << " element " << i;
      if (out[static_cast<size_t>(r)][i] != want) return out;
    }
  }
  return out;
}

struct EngineCase {
  int nranks, nthreads;
  size_t count, chunk;
  ProtoId proto;
  OpKind kind;
};

class StepEngineCta : public ::testing::TestWithParam<EngineCase> {};

TEST_P(StepEngineCta, RingAllReduceIsExact) {
  const EngineCase c = GetParam();
  ringAllReduce(c.nranks, c.nthreads, c.count, c.proto, c.chunk, c.kind);
}

INSTANTIATE_TEST_SUITE_P(Protocols, StepEngineCta,
                         ::testing::Values(EngineCase{2, 1, 1000, 64, ProtoId::kSimple, OpKind::kSum},
                                           EngineCase{3, 3, 1001, 64, ProtoId::kSimple, OpKind::kSum},
                                           EngineCase{3, 4, 5000, 1000, ProtoId::kSimple, OpKind::kPreMulSum},
                                           EngineCase{4, 3, 777, 50, ProtoId::kLL, OpKind::kSum},
                                           EngineCase{3, 32, 4099, 512, ProtoId::kLL, OpKind::kMax},
                                           EngineCase{3, 3, 1001, 64, ProtoId::kLL128, OpKind::kSum},
                                           EngineCase{2, 4, 3000, 900, ProtoId::kLL128, OpKind::kPreMulSum},
                                           EngineCase{3, 2, 5, 64, ProtoId::kLL, OpKind::kSum}));

// The first element whose bits differ, where two NaNs count as equal: which NaN a NaN operand produces is not part
// of the contract (x86 propagates one operand's payload and the compiler may order the operands either way; GPUs
// return a canonical NaN).
double asDouble(DType t, const unsigned char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, dtypeSize(t));
  switch (t) {
    case DType::kFloat16:
      return halfToFloat(static_cast<uint16_t>(v));
    case DType::kBfloat16:
      return bf16ToFloat(static_cast<uint16_t>(v));
    case DType::kFp8E4M3:
      return fp8e4m3ToFloat(static_cast<uint8_t>(v));
    case DType::kFp8E5M2:
      return fp8e5m2ToFloat(static_cast<uint8_t>(v));
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    default:
      return 0;  // integers: compared by bits only
  }
}
size_t firstDifference(DType t, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, size_t n) {
  const size_t es = dtypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(a.data() + i * es, b.data() + i * es, es) == 0) continue;
    if (std::isnan(asDouble(t, a.data() + i * es)) && std::isnan(asDouble(t, b.data() + i * es))) continue;
    return i;
  }
  return n;
}

// The CTA-strided element loops give the same bits as the CPU backend's SIMD loops, for every dtype and op, at
// 1 and 3 threads (sequentially: each thread's share is independent).
TEST(StepEngineReduce, CtaLoopsMatchHostLoopsBitwise) {
  const DType types[] = {DType::kInt8,    DType::kUint8,    DType::kInt32,   DType::kUint32,
                         DType::kInt64,   DType::kUint64,   DType::kFloat16, DType::kFloat32,
                         DType::kFloat64, DType::kBfloat16, DType::kFp8E4M3, DType::kFp8E5M2};
  const OpKind ops[] = {OpKind::kSum, OpKind::kProd, OpKind::kMax, OpKind::kMin, OpKind::kAvg, OpKind::kPreMulSum};
  std::mt19937_64 rng(42);
  for (DType t : types) {
    const size_t es = dtypeSize(t);
    const size_t n = 1037;
    std::vector<unsigned char> peer(n * es), local(n * es);
    for (auto& b : peer) b = static_cast<unsigned char>(rng());
    for (auto& b : local) b = static_cast<unsigned char>(rng());
    for (OpKind k : ops) {
      for (bool post : {false, true}) {
        ReduceOp op;
        op.kind = k;
        op.dtype = t;
        op.nranks = 3;
        op.scalar = rng() & ((es == 8 ? ~0ull : (1ull << (8 * es)) - 1));
        std::vector<unsigned char> want(n * es), wantCopy(n * es);
        reduceInto(op, want.data(), peer.data(), local.data(), n, post);
        copyLocal(op, wantCopy.data(), local.data(), n, post);
        for (int nt : {1, 3}) {
          std::vector<unsigned char> got(n * es, 0xAB), gotCopy(n * es, 0xAB);
          for (int tid = 0; tid < nt; ++tid) {
            ThreadCta cta{tid, nt, nullptr};
            ctaReduce(cta, op, got.data(), peer.data(), local.data(), n, post);
            ctaCopyLocal(cta, op, gotCopy.data(), local.data(), n, post);
          }
          size_t bad = firstDifference(t, got, want, n);
          auto elem = [&](const std::vector<unsigned char>& v) {
            uint64_t x = 0;
            std::memcpy(&x, v.data() + bad * es, es);
            return x;
          };
          ASSERT_EQ(bad, n) << "element " << bad << std::hex << " got 0x" << elem(got) << " want 0x" << elem(want)
                            << " peer 0x" << elem(peer) << " local 0x" << elem(local) << std::dec << " " << dtypeName(t)
                            << " op " << static_cast<int>(k) << " post " << post << " threads " << nt;
          ASSERT_EQ(firstDifference(t, gotCopy, wantCopy, n), n)
              << "copyLocal " << dtypeName(t) << " op " << static_cast<int>(k) << " post " << post;
        }
      }
    }
  }
}

// The step shape table agrees with the executor's long-standing classification of each step.
TEST(StepShape, TableMatchesStepNames) {
  for (int i = 0; i < kStepOps; ++i) {
    const StepOp op = static_cast<StepOp>(i);
    const std::string name = stepOpName(op);
    const StepShape sh = stepShape(op);
    EXPECT_EQ(sh.recv, name.rfind("recv", 0) == 0) << name;
    EXPECT_EQ(sh.send, name.size() >= 4 && (name.find("Send") != std::string::npos || name.rfind("send", 0) == 0))
        << name;
    EXPECT_EQ(sh.local == Local::kOutput, name.find("Accumulate") != std::string::npos || name == "sendFromOutput")
        << name;
    EXPECT_EQ(sh.packed, name.find("Pack") != std::string::npos) << name;
  }
}

}  // namespace
}  // namespace braid
