// The step engine's shared pieces (src/backends/common): the CTA-strided reduction loops (reduce_copy.h) against the
// CPU backend's SIMD loops, bitwise, for every dtype and op, and the step shape table. The engine itself runs on
// a one-thread CTA in every collective test (the CPU executor) and on CTAs of many threads in tests/emu (the CUDA
// backend's emulator, against the CPU executor bitwise).
#include "src/backends/common/step_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/backends/common/reduce_copy.h"
#include "src/backends/cpu/narrow_convert.h"
#include "src/backends/cpu/reduce.h"
#include "tests/common/elem_compare.h"

namespace braid {
namespace {

// A CTA whose threads run one after another: enough for the element loops, which never synchronise.
struct StridedCta {
  static constexpr bool kSerial = false;
  int t, n;
  int tid() const { return t; }
  int nthreads() const { return n; }
};

using testing_elem::firstDifference;

const DType kTypes[] = {DType::kInt8,    DType::kUint8,    DType::kInt32,   DType::kUint32,
                        DType::kInt64,   DType::kUint64,   DType::kFloat16, DType::kFloat32,
                        DType::kFloat64, DType::kBfloat16, DType::kFp8E4M3, DType::kFp8E5M2};
const OpKind kKinds[] = {OpKind::kSum, OpKind::kProd, OpKind::kMax, OpKind::kMin, OpKind::kAvg, OpKind::kPreMulSum};

// The CTA-strided element loops give the same bits as the CPU backend's SIMD loops, for every dtype and op, at
// 1 and 3 threads (sequentially: each thread's share is independent).
TEST(StepEngineReduce, CtaLoopsMatchHostLoopsBitwise) {
  std::mt19937_64 rng(42);
  for (DType t : kTypes) {
    const size_t es = dtypeSize(t);
    const size_t n = 1037;
    std::vector<unsigned char> peer(n * es), local(n * es);
    for (auto& b : peer) b = static_cast<unsigned char>(rng());
    for (auto& b : local) b = static_cast<unsigned char>(rng());
    for (OpKind k : kKinds) {
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
            StridedCta cta{tid, nt};
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

// The direct path's one-pass reduction over several sources: the CTA form and the CPU backend's give the same bits
// for every dtype, op, source count and thread count; for types that do not widen, and for max/min, they are the
// chain of binary steps exactly (the definition those types keep).
TEST(StepEngineReduce, ReduceManyCtaMatchesHostBitwise) {
  std::mt19937_64 rng(7);
  const size_t n = 1100, at = 24;  // past one 512-element block of the CPU's narrow path
  for (DType t : kTypes) {
    const size_t es = dtypeSize(t);
    std::vector<std::vector<char>> bufs(4, std::vector<char>(at + n * es));
    for (auto& b : bufs) {
      for (auto& c : b) c = static_cast<char>(rng());
    }
    const char* srcs[4] = {bufs[0].data(), bufs[1].data(), bufs[2].data(), bufs[3].data()};
    for (OpKind k : kKinds) {
      for (int nsrc = 1; nsrc <= 4; ++nsrc) {
        for (bool post : {false, true}) {
          ReduceOp ops[4];
          for (auto& op : ops) {
            op.kind = k;
            op.dtype = t;
            op.nranks = nsrc;
            op.scalar = rng() & ((es == 8 ? ~0ull : (1ull << (8 * es)) - 1));
          }
          std::vector<unsigned char> want(n * es, 0xCD);
          reduceMany(ops, want.data(), srcs, at, nsrc, n, post);
          const std::string what = std::string(dtypeName(t)) + " op " + std::to_string(static_cast<int>(k)) +
                                   " sources " + std::to_string(nsrc) + " post " + std::to_string(post);
          std::vector<unsigned char> got(n * es);
          for (int nt : {1, 3}) {
            std::fill(got.begin(), got.end(), 0xAB);
            for (int tid = 0; tid < nt; ++tid)
              ctaReduceMany(StridedCta{tid, nt}, ops, got.data(), srcs, at, nsrc, n, post);
            ASSERT_EQ(firstDifference(t, got, want, n), n) << what << " threads " << nt;
          }
          if (isNarrowFloatType(t) && k != OpKind::kMax && k != OpKind::kMin) continue;
          std::vector<unsigned char> chain(n * es);
          copyLocal(ops[0], chain.data(), srcs[0] + at, n, post && nsrc == 1);
          for (int p = 1; p < nsrc; ++p) {
            reduceInto(ops[p], chain.data(), chain.data(), srcs[p] + at, n, post && p == nsrc - 1);
          }
          // The CTA form's one pass (the CPU form runs this very chain for these types).
          ASSERT_EQ(firstDifference(t, chain, got, n), n) << what << ": not the chain of binary steps";
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
