// The kernels (src/backends/common/kernel_main.h over the step engine) on the CTA emulator: ranks that are threads
// launch their kernels at once, one CTA per channel, CTAs of 1 to 512 threads; results are compared bit for bit
// with the CPU backend running the same work, for every dtype, op and protocol. Then what a kernel does when things
// go wrong (abort word, dead peer, timeout, work for another entry), graph-style relaunches of the same arguments,
// and the emulator's own checks (divergent barriers, deadlocks, spinning threads, resident slots, chaos).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "src/backends/cuda/emu/cta_emulator.h"
#include "tests/common/elem_compare.h"
#include "tests/emu/ring_job.h"

namespace braid {
namespace {

using emu_test::JobShape;
using emu_test::RingJob;
using testing_elem::firstDifference;

// Runs the job on the CPU backend, then on the emulator, and compares every rank's output.
void expectEmuMatchesHost(const JobShape& shape, int threads, uint64_t chaosSeed = 0, bool hostStreams = false) {
  RingJob host(shape, 7);
  host.runHost(hostStreams);
  RingJob emu(shape, 7);
  EmuLaunchConfig cfg;
  cfg.chaosSeed = chaosSeed;
  for (const Status& st : emu.runEmu(threads, cfg)) ASSERT_TRUE(st.isOk()) << st.message();
  for (int r = 0; r < shape.nranks; ++r) {
    EXPECT_EQ(emu.rank(r).status.code, static_cast<uint32_t>(DevStatusCode::kRunning));
    const size_t bad = firstDifference(shape.dtype, emu.rank(r).out, host.rank(r).out, shape.count);
    ASSERT_EQ(bad, shape.count) << "rank " << r << " element " << bad << " " << dtypeName(shape.dtype) << " op "
                                << static_cast<int>(shape.op) << " " << protoName(shape.proto) << " threads "
                                << threads;
  }
  // Every element was written (the host reference too: not the 0xEE fill).
  const size_t es = dtypeSize(shape.dtype);
  bool allFill = true;
  for (size_t i = 0; i < es; ++i) allFill = allFill && host.rank(0).out[i] == 0xEE;
  EXPECT_FALSE(allFill && es > 1);
}

struct Case {
  int nranks, nchannels, threads;
  size_t count, chunkBytes;
  ProtoId proto;
};

class EmuRing : public ::testing::TestWithParam<Case> {};

TEST_P(EmuRing, MatchesHostBitwise) {
  const Case c = GetParam();
  JobShape s;
  s.nranks = c.nranks;
  s.nchannels = c.nchannels;
  s.count = c.count;
  s.proto = c.proto;
  s.chunkBytes = c.chunkBytes;
  expectEmuMatchesHost(s, c.threads);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmuRing,
    ::testing::Values(Case{2, 1, 1, 1000, 256, ProtoId::kSimple}, Case{3, 2, 3, 1001, 512, ProtoId::kSimple},
                      Case{4, 2, 4, 5000, 4096, ProtoId::kSimple}, Case{5, 1, 32, 3333, 1024, ProtoId::kSimple},
                      Case{3, 2, 3, 1001, 256, ProtoId::kLL}, Case{4, 1, 32, 4099, 2048, ProtoId::kLL},
                      Case{3, 2, 3, 1001, 1920, ProtoId::kLL128}, Case{2, 3, 4, 3000, 3840, ProtoId::kLL128},
                      Case{9, 1, 3, 999, 512, ProtoId::kSimple}, Case{1, 1, 3, 100, 256, ProtoId::kSimple},
                      Case{3, 1, 2, 5, 256, ProtoId::kLL},
                      // Channels without data (items of zero tiles): thread 0 marks such an item done with no
                      // barrier inside it; the regression for the divergent barriers a CUDA communicator's first
                      // run met.
                      Case{3, 2, 32, 1, 256, ProtoId::kSimple}, Case{4, 3, 8, 2, 256, ProtoId::kLL}));

TEST(EmuRingInPlace, HostAndKernelAgreeWithPlainAndStreamingHostStores) {
  // The host computes a step with two destinations into the send slot and then copies it to the output (so a
  // non-temporal output store is never read back); the kernel computes into the output first. In place, the
  // output is also the step's own operand: both orders, and the host's streaming stores, must give the same bits.
  for (ProtoId proto : {ProtoId::kSimple, ProtoId::kLL}) {
    for (OpKind op : {OpKind::kSum, OpKind::kAvg, OpKind::kPreMulSum}) {
      for (int nranks : {2, 3}) {
        for (bool inPlace : {false, true}) {
          for (bool streams : {false, true}) {
            JobShape s;
            s.nranks = nranks;
            s.nchannels = 2;
            s.count = 3001;
            s.op = op;
            s.proto = proto;
            s.chunkBytes = 1024;
            s.inPlace = inPlace;
            SCOPED_TRACE(testing::Message() << protoName(proto) << " op " << static_cast<int>(op) << " nranks "
                                            << nranks << " inPlace " << inPlace << " streams " << streams);
            expectEmuMatchesHost(s, 4, 0, streams);
          }
        }
      }
    }
  }
}

// The host engine runs the next tile's steps while the current tile waits (step_engine.h's runAhead). Driven by
// hand on one thread, so the interleaving is fixed: rank 1 has sent tile 0's reduced block and waits for rank 0's;
// meanwhile tile 1's first send goes out, and no further (its next step receives on the connector tile 0 still
// waits on). Then the ranks finish in turns and match the kernel, which never runs ahead, bit for bit.
TEST(StepEngineRunAhead, NextTilesSendGoesOutWhileTheLastReceiveWaits) {
  struct Env : HostDataOps {
    void drive(const ConnSlot&) {}
    void released(const ConnSlot&) {}
  };
  static_assert(Env::kRunAhead && !KernelEnv::kRunAhead, "the host runs ahead, kernels do not (yet)");
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(testing::Message() << "inPlace " << inPlace);
    JobShape s;
    s.nranks = 2;
    s.count = 5000;  // 2 blocks of 256 floats a tile: 10 tiles
    s.chunkBytes = 1024;
    s.inPlace = inPlace;
    s.op = OpKind::kAvg;  // the post-op at the final step shows a step run twice or on the wrong tile
    RingJob host(s, 11);
    const HostCta cta;
    Env env;
    ChannelWorkDesc& ch0 = host.rank(0).chans[0];
    ChannelWorkDesc& ch1 = host.rank(1).chans[0];
    const uint32_t nsteps = host.rank(0).descs[0].prog.nsteps;
    ASSERT_EQ(nsteps, 3u);  // send, receive-reduce-copy-send, receive
    ASSERT_EQ(host.rank(0).descs[0].prog.numTiles(), 10u);

    // Rank 0 sends tile 0 and waits to receive: its next tile's send shares the connector of the step that waits.
    EXPECT_TRUE(progressChannel(cta, env, ch0));
    EXPECT_EQ(ch0.states[0].tile, 0u);
    EXPECT_EQ(ch0.states[0].step, 1u);
    EXPECT_EQ(ch0.states[0].ahead, 0u);
    // Rank 1 sends, reduces rank 0's block and sends the result, then waits for rank 0's; tile 1's send goes ahead.
    EXPECT_TRUE(progressChannel(cta, env, ch1));
    EXPECT_EQ(ch1.states[0].tile, 0u);
    EXPECT_EQ(ch1.states[0].step, 2u);
    EXPECT_EQ(ch1.states[0].ahead, 1u);
    EXPECT_EQ(host.rank(1).cursors[0][0].step, 3u);  // three slots sent: tile 0's two and tile 1's first
    // Nothing more moves on rank 1 until rank 0 does.
    EXPECT_FALSE(progressChannel(cta, env, ch1));
    EXPECT_EQ(ch1.states[0].ahead, 1u);

    int rounds = 0;
    while ((ch0.remaining != 0 || ch1.remaining != 0) && rounds++ < 1000) {
      progressChannel(cta, env, ch0);
      progressChannel(cta, env, ch1);
    }
    ASSERT_EQ(ch0.remaining + ch1.remaining, 0u);
    // Every slot each rank sent was received: 2 sends a tile, 10 tiles.
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(host.rank(r).cursors[0][0].step, 20u);
      EXPECT_EQ(host.rank(r).cursors[0][1].step, 20u);
    }

    RingJob emu(s, 11);
    for (const Status& st : emu.runEmu(4)) ASSERT_TRUE(st.isOk()) << st.message();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(firstDifference(s.dtype, emu.rank(r).out, host.rank(r).out, s.count), s.count) << "rank " << r;
    }
  }
}

// One wide CTA, as a GPU launches it.
TEST(EmuRingWide, FiveHundredTwelveThreads) {
  JobShape s;
  s.nranks = 2;
  s.count = 20000;
  s.chunkBytes = 4096;
  expectEmuMatchesHost(s, 512);
}

// Every dtype and op through every protocol's kernel, three ranks, bitwise against the CPU backend.
TEST(EmuRingDtypes, EveryDtypeOpAndProtocol) {
  const DType types[] = {DType::kInt8,    DType::kUint8,    DType::kInt32,   DType::kUint32,
                         DType::kInt64,   DType::kUint64,   DType::kFloat16, DType::kFloat32,
                         DType::kFloat64, DType::kBfloat16, DType::kFp8E4M3, DType::kFp8E5M2};
  const OpKind ops[] = {OpKind::kSum, OpKind::kProd, OpKind::kMax, OpKind::kMin, OpKind::kAvg, OpKind::kPreMulSum};
  for (ProtoId p : {ProtoId::kSimple, ProtoId::kLL, ProtoId::kLL128}) {
    for (DType t : types) {
      for (OpKind k : ops) {
        JobShape s;
        s.nranks = 3;
        s.count = 301;
        s.dtype = t;
        s.op = k;
        s.proto = p;
        s.chunkBytes = 384;
        expectEmuMatchesHost(s, 3);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// Chaos: random yields and sleeps at every barrier and back-off; the result is still the host's.
TEST(EmuRingChaos, SeededInterleavingsStayExact) {
  for (ProtoId p : {ProtoId::kSimple, ProtoId::kLL, ProtoId::kLL128}) {
    JobShape s;
    s.nranks = 3;
    s.nchannels = 2;
    s.count = 2000;
    s.proto = p;
    s.chunkBytes = 384;
    expectEmuMatchesHost(s, 4, 12345);
  }
}

// The same arguments launched again and again (what a replayed CUDA graph does), with new inputs each time: the
// prologue resets the item states, the cursors carry on in their own memory.
TEST(EmuKernel, RelaunchesOfTheSameArgumentsStayCorrect) {
  JobShape s;
  s.nranks = 3;
  s.nchannels = 2;
  s.count = 1500;
  s.chunkBytes = 512;
  for (ProtoId p : {ProtoId::kSimple, ProtoId::kLL}) {
    s.proto = p;
    RingJob emu(s, 1);
    for (int replay = 0; replay < 3; ++replay) {
      RingJob host(s, 100 + static_cast<uint64_t>(replay));
      host.runHost();
      for (int r = 0; r < s.nranks; ++r) emu.rank(r).in = host.rank(r).in;  // same size: pointers stay valid
      for (const Status& st : emu.runEmu(3)) ASSERT_TRUE(st.isOk()) << st.message();
      for (int r = 0; r < s.nranks; ++r) {
        ASSERT_EQ(firstDifference(s.dtype, emu.rank(r).out, host.rank(r).out, s.count), s.count)
            << "replay " << replay << " rank " << r << " " << protoName(p);
      }
      EXPECT_GT(emu.rank(0).cursors[0][0].step, 0u);
    }
  }
}

// A rank whose peer never launches: the abort word stops its kernel, which says so and marks its connectors.
TEST(EmuKernel, AbortWordStopsAKernelWaitingForADeadPeer) {
  JobShape s;
  s.nranks = 2;
  s.count = 4000;
  RingJob job(s);
  job.rank(0).args.timeoutNs = 0;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    storeRelease(&job.rank(0).abortFlag, 1u);
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Status> st = job.runEmu(4, EmuLaunchConfig{}, 1);
  setter.join();
  ASSERT_TRUE(st[0].isOk()) << st[0].message();  // the kernel ended on its own; the status says why
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  const DevStatus& ds = job.rank(0).status;
  EXPECT_EQ(ds.code, static_cast<uint32_t>(DevStatusCode::kAborted));
  EXPECT_EQ(ds.channel, 0);
  EXPECT_EQ(ds.item, 0);
  // Its peer (rank 1) sees the abort on the FIFO rank 0 sends into, and on the one it receives from.
  EXPECT_TRUE(job.rank(1).conns[0][1].view.peerAborted());
  EXPECT_TRUE(job.rank(1).conns[0][0].view.peerAborted());
}

TEST(EmuKernel, TimeoutNamesTheConnectorWaitedOn) {
  JobShape s;
  s.nranks = 2;
  s.count = 4000;
  RingJob job(s);
  job.rank(0).args.timeoutNs = 200ull * 1000 * 1000;
  std::vector<Status> st = job.runEmu(3, EmuLaunchConfig{}, 1);
  ASSERT_TRUE(st[0].isOk()) << st[0].message();
  const DevStatus& ds = job.rank(0).status;
  EXPECT_EQ(ds.code, static_cast<uint32_t>(DevStatusCode::kTimeout));
  EXPECT_EQ(ds.conn, 1);  // the receive from rank 1, which never sends
  EXPECT_EQ(ds.item, 0);
}

TEST(EmuKernel, PeerAbortEndsTheKernelAndNamesTheConnector) {
  JobShape s;
  s.nranks = 2;
  s.count = 4000;
  RingJob job(s);
  job.rank(1).conns[0][0].view.markAborted();  // rank 1 failed: its send end into rank 0's FIFO says so
  std::vector<Status> st = job.runEmu(2, EmuLaunchConfig{}, 1);
  ASSERT_TRUE(st[0].isOk()) << st[0].message();
  const DevStatus& ds = job.rank(0).status;
  EXPECT_EQ(ds.code, static_cast<uint32_t>(DevStatusCode::kPeerAborted));
  EXPECT_EQ(ds.conn, 1);
}

TEST(EmuKernel, WorkOfAnotherProtocolIsRefused) {
  JobShape s;
  s.nranks = 1;
  s.count = 100;
  s.proto = ProtoId::kLL;
  RingJob job(s);
  ASSERT_TRUE(emuRunKernel(kernelName(ProtoId::kSimple), job.rank(0).args, 2, EmuLaunchConfig{}).isOk());
  EXPECT_EQ(job.rank(0).status.code, static_cast<uint32_t>(DevStatusCode::kBadWork));
  Status unknown = emuRunKernel("braidKernelNope", job.rank(0).args, 2, EmuLaunchConfig{});
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.message().find("braidKernelNope"), std::string::npos) << unknown.message();
}

// ---- The emulator's own checks ----

EmuLaunchConfig quick(int grid, int block, double deadline = 0.5) {
  EmuLaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.deadlineSec = deadline;
  c.name = "test";
  return c;
}

TEST(CtaEmulator, DivergentBarriersAreNamed) {
  Status st = emuLaunch(quick(1, 4), [](const EmuCta& cta) {
    if (cta.tid() == 0) {
      cta.sync();  // line A
    } else {
      cta.sync();  // line B
    }
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("divergent barriers in CTA 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("emu_kernel_test.cc:"), std::string::npos) << st.message();
}

TEST(CtaEmulator, AMissingThreadIsReportedNotHung) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = emuLaunch(quick(2, 4), [](const EmuCta& cta) {
    if (cta.blockId() == 1 && cta.tid() == 2) return;  // skips the barrier
    cta.sync();
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(st.message().find("deadlock in CTA 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("thread 2 finished"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("threads 0-1,3 at the barrier"), std::string::npos) << st.message();
}

TEST(CtaEmulator, ASpinningLaunchIsReportedAndUnwound) {
  Status st = emuLaunch(quick(1, 3), [](const EmuCta& cta) {
    for (;;) cta.relax();
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("still running after"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("threads 0-2 spinning (back-off at emu_kernel_test.cc:"), std::string::npos)
      << st.message();
}

TEST(CtaEmulator, ExceptionsAndBadShapesAreErrors) {
  Status st = emuLaunch(quick(1, 2), [](const EmuCta& cta) {
    if (cta.tid() == 1) throw std::runtime_error("boom");
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("thread 1 of CTA 0 threw: boom"), std::string::npos) << st.message();
  Status bad = emuLaunch(quick(0, 2), [](const EmuCta&) {});
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
}

// syncAll is __syncthreads_and: true only when every thread's value was.
TEST(CtaEmulator, SyncAllFoldsEveryThread) {
  std::atomic<int> trues{0}, falses{0};
  Status st = emuLaunch(quick(2, 5, 10), [&](const EmuCta& cta) {
    for (int round = 0; round < 50; ++round) {
      const bool all = cta.syncAll(cta.tid() != round % 7);
      (all ? trues : falses).fetch_add(1);
    }
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  // Rounds where round % 7 >= 5 name no thread: all true. 50 rounds: r%7 in {5,6} for 14 of them.
  EXPECT_EQ(trues.load(), 2 * 5 * 14);
  EXPECT_EQ(falses.load(), 2 * 5 * 36);
}

// Two kernels that wait for each other deadlock when the device holds only one of them at a time, as on a GPU,
// and are reported; with room for both they finish.
TEST(CtaEmulator, CoResidencyDeadlockReproducesAndIsReported) {
  for (int slots : {1, 2}) {
    EmuDevice dev(slots);
    uint32_t flags[2] = {0, 0};
    Status st[2];
    std::thread launches[2];
    for (int k = 0; k < 2; ++k) {
      launches[k] = std::thread([&, k] {
        // The first waits longer than the second may wait for a slot, so with one slot the second's wait fails
        // first (and is the one reported as a residency problem).
        EmuLaunchConfig c = quick(1, 2, k == 0 ? 1.0 : 0.3);
        c.device = &dev;
        st[k] = emuLaunch(c, [&](const EmuCta& cta) {
          if (cta.tid() == 0) storeRelease(&flags[k], 1u);
          while (loadAcquire(&flags[1 - k]) == 0) cta.relax();
        });
      });
      if (k == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& t : launches) t.join();
    if (slots == 2) {
      EXPECT_TRUE(st[0].isOk()) << st[0].message();
      EXPECT_TRUE(st[1].isOk()) << st[1].message();
    } else {
      EXPECT_FALSE(st[0].isOk());
      ASSERT_FALSE(st[1].isOk());
      EXPECT_NE(st[1].message().find("resident slot"), std::string::npos) << st[1].message();
    }
  }
}

}  // namespace
}  // namespace braid
