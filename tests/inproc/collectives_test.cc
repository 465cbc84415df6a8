// Every collective x datatype x op x count x in-place, with ranks as threads of this process.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "src/common/dtype.h"
#include "tests/common/coll_check.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const ncclRedOp_t kAllOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, ncclNumOps /* premulsum */};
const Coll kAllColls[] = {Coll::kAllReduce,     Coll::kBroadcast, Coll::kBcast,  Coll::kReduce,  Coll::kAllGather,
                          Coll::kReduceScatter, Coll::kAlltoAll,  Coll::kGather, Coll::kScatter, Coll::kSendRecv};

std::vector<CollCase> sweep(int n, const std::vector<size_t>& counts) {
  std::vector<CollCase> cases;
  for (Coll coll : kAllColls) {
    for (ncclDataType_t t : kAllTypes) {
      for (ncclRedOp_t op : kAllOps) {
        if (!collHasOp(coll) && op != ncclSum) continue;
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) {
            if (coll == Coll::kSendRecv && inPlace) continue;
            int root = static_cast<int>((count + static_cast<size_t>(op)) % static_cast<size_t>(n));
            cases.push_back(CollCase{coll, t, op, count, inPlace, root});
          }
        }
      }
    }
  }
  return cases;
}

void runSweep(int n, const std::vector<CollCase>& cases) {
  std::mutex mu;
  std::vector<std::string> failures;
  auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
    for (const CollCase& c : cases) {
      std::string err = runCase(c, rank, n, comm);
      if (!err.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(err);
        if (err.rfind("call failed", 0) == 0) return ncclInternalError;
      }
    }
    return ncclSuccess;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  for (size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures";
}

class ThreadRanks : public ::testing::TestWithParam<int> {};

TEST_P(ThreadRanks, EveryCollectiveTypeOpCountInPlace) {
  runSweep(GetParam(), sweep(GetParam(), {0, 1, 7, 1023}));
}

TEST_P(ThreadRanks, LargeCount) {
  // 1M+3 elements: several tiles, several channels, a ragged last tile; every collective, the widest and the
  // narrowest types, and every op on float. Two channels are pinned: by default a small machine gets one channel
  // per rank, and the multi-channel paths must be covered there too.
  setenv("BRAID_CPU_NCHANNELS", "2", 1);
  const int n = GetParam();
  std::vector<CollCase> cases;
  const size_t big = (1u << 20) + 3;
  for (Coll coll : kAllColls) {
    for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclBfloat16, ncclFloat8e4m3, ncclFloat64}) {
      for (ncclRedOp_t op : kAllOps) {
        if (!collHasOp(coll) && op != ncclSum) continue;
        if (t != ncclFloat32 && op != ncclSum && op != ncclAvg) continue;
        cases.push_back(CollCase{coll, t, op, big, false, n - 1});
        if (coll != Coll::kSendRecv && t == ncclFloat32) cases.push_back(CollCase{coll, t, op, big, true, 0});
      }
    }
  }
  runSweep(n, cases);
  unsetenv("BRAID_CPU_NCHANNELS");
}

TEST_P(ThreadRanks, TreeAllReduceEveryTypeAndOp) {
  // The double binary tree (forced): every datatype and op, odd and ragged counts, in and out of place.
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  const int n = GetParam();
  std::vector<CollCase> cases;
  for (ncclDataType_t t : kAllTypes) {
    for (ncclRedOp_t op : kAllOps) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        if (count > 1023 && t != ncclFloat32 && t != ncclBfloat16) continue;
        for (bool inPlace : {false, true}) cases.push_back(CollCase{Coll::kAllReduce, t, op, count, inPlace, 0});
      }
    }
  }
  runSweep(n, cases);
  unsetenv("NCCL_ALGO");
}

TEST_P(ThreadRanks, RingAllReduceInStepPiecesIsExact) {
  // The host runs a ring step that reduces into both its send slot and the output 8 KB at a time
  // (HostDataOps::kTwoDestinationPieceBytes, step_engine.h). Counts whose steps hold several pieces and a ragged
  // last one, for each element size, in and out of place, with the ops that pre-process (PreMulSum) and
  // post-process (avg).
  setenv("NCCL_ALGO", "allreduce:ring", 1);
  setenv("NCCL_PROTO", "simple", 1);
  const int n = GetParam();
  std::vector<CollCase> cases;
  for (ncclDataType_t t : {ncclInt8, ncclBfloat16, ncclFloat32, ncclFloat64}) {
    for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclMax, ncclNumOps /* premulsum */}) {
      for (size_t count : {size_t{(3 << 13) + 5}, size_t{(1 << 18) + 777}}) {
        for (bool inPlace : {false, true}) cases.push_back(CollCase{Coll::kAllReduce, t, op, count, inPlace, 0});
      }
    }
  }
  runSweep(n, cases);
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_ALGO");
}

TEST_P(ThreadRanks, TreeReduceAndBroadcast) {
  setenv("NCCL_ALGO", "reduce:tree;broadcast:tree", 1);
  const int n = GetParam();
  std::vector<CollCase> cases;
  for (ncclDataType_t t : kAllTypes) {
    for (ncclRedOp_t op : kAllOps) {
      for (size_t count : {size_t{1}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        if (count > 1023 && t != ncclFloat32) continue;
        for (bool inPlace : {false, true}) {
          for (int root : {0, n - 1, n / 2}) {
            cases.push_back(CollCase{Coll::kReduce, t, op, count, inPlace, root});
            if (op == ncclSum) cases.push_back(CollCase{Coll::kBroadcast, t, op, count, inPlace, root});
          }
        }
      }
    }
  }
  runSweep(n, cases);
  unsetenv("NCCL_ALGO");
}

TEST_P(ThreadRanks, LlProtocolEveryCollective) {
  // NCCL_PROTO=LL forces LL on the ring and tree paths (NVLS is Simple only, so it drops out). Counts include
  // several LL slots (70001 floats: 280 KB over 32 KB slots per step) and the empty and 1-element cases whose
  // steps carry a flag-only line.
  const int n = GetParam();
  setenv("NCCL_PROTO", "LL", 1);
  for (const char* algo : {"ring", "ring;allreduce:tree;reduce:tree;broadcast:tree"}) {
    setenv("NCCL_ALGO", algo, 1);
    std::vector<CollCase> cases = sweep(n, {0, 1, 7, 1023});
    for (Coll coll : kAllColls) {
      for (ncclDataType_t t : {ncclFloat32, ncclBfloat16, ncclInt8}) {
        cases.push_back(CollCase{coll, t, ncclSum, 70001, false, n / 2});
        if (coll != Coll::kSendRecv) cases.push_back(CollCase{coll, t, ncclAvg, 70001, true, 0});
      }
    }
    // Several MB through 32 KB LL slots.
    for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather}) {
      cases.push_back(CollCase{coll, ncclFloat32, ncclSum, (1u << 20) + 3, false, 0});
    }
    runSweep(n, cases);
  }
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
}

TEST_P(ThreadRanks, ProtocolsAlternateOnOneConnector) {
  // The selector picks LL for small and Simple for large operations, so consecutive operations on the same
  // connectors switch protocol; their shared step counters must stay in lockstep. Grouped too.
  const int n = GetParam();
  std::vector<CollCase> cases;
  for (size_t count : {size_t{3}, size_t{300000}, size_t{5}, size_t{1}, size_t{200001}, size_t{64}}) {
    cases.push_back(CollCase{Coll::kAllReduce, ncclFloat32, ncclSum, count, false, 0});
    cases.push_back(CollCase{Coll::kSendRecv, ncclFloat32, ncclSum, count, false, 0});
    cases.push_back(CollCase{Coll::kAllGather, ncclInt32, ncclSum, count, count % 2 == 0, 0});
  }
  // Pins make the alternation certain whatever the cost model thinks of this machine; send/recv switch at
  // NCCL_P2P_LL_THRESHOLD (16 KB).
  char path[] = "/tmp/braid-alternate-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char pins[] =
      "pin allreduce 0 4096 ring LL\npin allreduce 4097 100000000 ring simple\n"
      "pin allgather 0 4096 ring LL\npin allgather 4097 100000000 ring simple\n";
  ASSERT_EQ(write(fd, pins, sizeof(pins) - 1), static_cast<ssize_t>(sizeof(pins) - 1));
  close(fd);
  setenv("BRAID_TUNING_FILE", path, 1);
  setenv("NCCL_ALGO", "ring,tree", 1);
  runSweep(n, cases);
  unsetenv("NCCL_ALGO");
  unsetenv("BRAID_TUNING_FILE");
  unlink(path);
}

TEST_P(ThreadRanks, BruckAlltoAll) {
  // The log-step all-to-all (forced), every datatype, in and out of place, Simple and LL, plus a count large
  // enough for several slots per round.
  const int n = GetParam();
  setenv("BRAID_ALLTOALL_ALGO", "bruck", 1);
  for (const char* proto : {"Simple", "LL"}) {
    setenv("NCCL_PROTO", proto, 1);
    std::vector<CollCase> cases;
    for (ncclDataType_t t : kAllTypes) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
        for (bool inPlace : {false, true}) cases.push_back(CollCase{Coll::kAlltoAll, t, ncclSum, count, inPlace, 0});
      }
    }
    cases.push_back(CollCase{Coll::kAlltoAll, ncclFloat32, ncclSum, 300007, false, 0});
    cases.push_back(CollCase{Coll::kAlltoAll, ncclInt8, ncclSum, 300007, true, 0});
    runSweep(n, cases);
  }
  unsetenv("NCCL_PROTO");
  unsetenv("BRAID_ALLTOALL_ALGO");
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 9));

}  // namespace
}  // namespace braid_test

namespace braid_test {
namespace {

// BRAID_DETERMINISTIC=1: an all-reduce of random floats (sums that round) is bitwise the same whatever the chunk
// size (NCCL_BUFFSIZE) and channel count, on the FIFO path (tree) and on the direct path. Without it, the ring's
// results differ between those settings: the test can tell.
std::vector<float> allReduceRandom(int n, size_t count) {
  std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(count));
  auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
    std::mt19937 gen(1234u + static_cast<unsigned>(rank));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> in(count);
    for (float& v : in) v = dist(gen);
    return ncclAllReduce(in.data(), out[static_cast<size_t>(rank)].data(), count, ncclFloat, ncclSum, comm, nullptr);
  });
  for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess);
  for (int r = 1; r < n; ++r) EXPECT_EQ(out[static_cast<size_t>(r)], out[0]) << "ranks disagree";
  return out[0];
}

TEST(Deterministic, SameBitsAcrossChunkSizesAndChannels) {
  const size_t count = (1 << 20) + 17;
  struct Config {
    const char* buffsize;
    const char* channels;
  };
  const Config configs[] = {{"4194304", "1"}, {"65536", "2"}, {"1048576", "3"}};
  for (const char* algo : {"allreduce:tree", "allreduce:nvls"}) {
    for (int n : {3, 4}) {
      std::vector<float> first;
      for (const Config& c : configs) {
        setenv("BRAID_DETERMINISTIC", "1", 1);
        setenv("NCCL_ALGO", algo, 1);
        setenv("NCCL_BUFFSIZE", c.buffsize, 1);
        setenv("BRAID_CPU_NCHANNELS", c.channels, 1);
        std::vector<float> got = allReduceRandom(n, count);
        if (first.empty()) {
          first = got;
        } else {
          EXPECT_EQ(std::memcmp(first.data(), got.data(), count * sizeof(float)), 0)
              << algo << " n=" << n << " buffsize " << c.buffsize << " channels " << c.channels;
        }
      }
    }
  }
  // The ring without deterministic mode: chunking changes the order of the additions, and the bits.
  unsetenv("BRAID_DETERMINISTIC");
  setenv("NCCL_ALGO", "ring", 1);
  std::vector<std::vector<float>> ring;
  for (const Config& c : configs) {
    setenv("NCCL_BUFFSIZE", c.buffsize, 1);
    setenv("BRAID_CPU_NCHANNELS", c.channels, 1);
    ring.push_back(allReduceRandom(4, count));
  }
  EXPECT_TRUE(ring[0] != ring[1] || ring[1] != ring[2]) << "the ring happened to agree: the check has no teeth";
  for (const char* v : {"NCCL_ALGO", "NCCL_BUFFSIZE", "BRAID_CPU_NCHANNELS"}) unsetenv(v);
}

// Half sums on the direct (NVLS-style) path accumulate in float and round once; the ring rounds at every hop.
// Ranks hold 2048, 1 and 1: in half 2048 + 1 is a tie that rounds to 2048, so a chain from rank 0 or 2 ends at
// 2048, while the exact 2050 is a half.
TEST(Numerics, DirectPathSumsHalfInFloat) {
  const int n = 3;
  const size_t count = 4096;
  auto run = [&](const char* algo) {
    setenv("NCCL_ALGO", algo, 1);
    std::vector<std::vector<uint16_t>> out(n, std::vector<uint16_t>(count));
    auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
      std::vector<uint16_t> in(count, braid::floatToHalf(rank == 0 ? 2048.0f : 1.0f));
      ncclResult_t r =
          ncclAllReduce(in.data(), out[static_cast<size_t>(rank)].data(), count, ncclFloat16, ncclSum, comm, nullptr);
      return r;
    });
    unsetenv("NCCL_ALGO");
    for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess) << algo;
    for (int r = 1; r < n; ++r) EXPECT_EQ(out[static_cast<size_t>(r)], out[0]) << algo << ": ranks disagree";
    size_t exact = 0;
    for (uint16_t v : out[0]) exact += braid::halfToFloat(v) == 2050.0f;
    return exact;
  };
  EXPECT_EQ(run("allreduce:nvls"), count);
  EXPECT_LT(run("allreduce:ring"), count) << "the ring summed exactly too: the check has no teeth";
}

// Small inputs travel in the segment's stage lines (56 bytes of data each, by generation parity): every size around
// a line boundary, all-reduce, all-gather and reduce-scatter, one after another so each parity is reused, and now
// and then a late rank, so the others' spin runs out and they wait on the posted counter before they read the lines.
TEST(Numerics, DirectPathSmallInputsAcrossStageLineBoundaries) {
  const int n = 3;
  setenv("NCCL_ALGO", "allreduce:nvls;allgather:nvls;reducescatter:nvls", 1);
  const size_t sizes[] = {1, 2, 55, 56, 57, 111, 112, 113, 149, 447, 448, 449};
  auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
    int call = 0;
    for (int round = 0; round < 2; ++round) {
      for (size_t bytes : sizes) {
        for (int kind = 0; kind < 3; ++kind, ++call) {
          if (rank == 0 && call % 7 == 3) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          auto value = [&](int q, size_t k) { return static_cast<int8_t>((q * 3 + call + static_cast<int>(k)) % 5); };
          const size_t inElems = kind == 2 ? bytes * n : bytes;
          const size_t outElems = kind == 0 ? bytes : kind == 1 ? bytes * n : bytes;
          std::vector<int8_t> in(inElems), out(outElems, -1);
          for (size_t k = 0; k < inElems; ++k) in[k] = value(rank, k);
          ncclResult_t r = kind == 0 ? ncclAllReduce(in.data(), out.data(), bytes, ncclInt8, ncclSum, comm, nullptr)
                           : kind == 1
                               ? ncclAllGather(in.data(), out.data(), bytes, ncclInt8, comm, nullptr)
                               : ncclReduceScatter(in.data(), out.data(), bytes, ncclInt8, ncclSum, comm, nullptr);
          if (r != ncclSuccess) return r;
          for (size_t k = 0; k < outElems; ++k) {
            int want = 0;
            if (kind == 0) {
              for (int q = 0; q < n; ++q) want += value(q, k);
            } else if (kind == 1) {
              want = value(static_cast<int>(k / bytes), k % bytes);
            } else {
              for (int q = 0; q < n; ++q) want += value(q, static_cast<size_t>(rank) * bytes + k);
            }
            if (out[k] != want) {
              ADD_FAILURE() << "rank " << rank << " kind " << kind << " bytes " << bytes << " element " << k << ": "
                            << int(out[k]) << ", expected " << want;
              return ncclInternalError;
            }
          }
        }
      }
    }
    return ncclSuccess;
  });
  unsetenv("NCCL_ALGO");
  for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess);
}

// PreMulSum's scalar is each rank's own, and the direct path reads the peers' (by generation parity) only for
// PreMulSum: sums and maxima between them, in the inline stage, the segment's stage and on the buffers, must neither
// use a stale scalar nor disturb the next PreMulSum's.
TEST(Numerics, DirectPathPreMulSumScalarsPerRankBetweenOtherOps) {
  const int n = 3;
  setenv("NCCL_ALGO", "allreduce:nvls", 1);
  auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{64}, size_t{40000}}) {
      ncclRedOp_t premul;
      const float scalar = static_cast<float>(rank + 1);
      if (ncclRedOpCreatePreMulSum(&premul, const_cast<float*>(&scalar), ncclFloat32, ncclScalarHostImmediate, comm) !=
          ncclSuccess) {
        return ncclInternalError;
      }
      std::vector<float> in(count), out(count);
      for (int i = 0; i < 12; ++i) {
        const ncclRedOp_t op = i % 3 == 0 ? premul : i % 3 == 1 ? ncclSum : ncclMax;
        for (size_t k = 0; k < count; ++k) in[k] = static_cast<float>(rank + i + static_cast<int>(k % 7));
        ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, op, comm, nullptr);
        if (r != ncclSuccess) return r;
        for (size_t k = 0; k < count; ++k) {
          const float base = static_cast<float>(i + static_cast<int>(k % 7));
          float want = 0;
          for (int q = 0; q < n; ++q) {
            const float x = base + static_cast<float>(q);
            want = op == premul ? want + x * static_cast<float>(q + 1) : op == ncclSum ? want + x : std::max(want, x);
          }
          if (out[k] != want) {
            ADD_FAILURE() << "rank " << rank << " count " << count << " call " << i << " element " << k << ": "
                          << out[k] << ", expected " << want;
            return ncclInternalError;
          }
        }
      }
      if (ncclRedOpDestroy(premul, comm) != ncclSuccess) return ncclInternalError;
    }
    return ncclSuccess;
  });
  unsetenv("NCCL_ALGO");
  for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess);
}

}  // namespace
}  // namespace braid_test

namespace braid_test {
namespace {

// braidAlltoAllv (braid's extension): per-pair counts with zeros, gaps between the regions, Simple and LL, pairs
// larger than a FIFO; the receive side checks every element.
size_t vCount(int from, int to, int scale) {
  return static_cast<size_t>(((from * 7 + to * 3) % 5) * scale);
}

TEST(AlltoAllv, VariableCountsExact) {
  for (int scale : {1, 40000}) {
    for (const char* proto : {"LL", "Simple"}) {
      setenv("NCCL_PROTO", proto, 1);
      for (int n : {1, 2, 3, 5, 8}) {
        std::atomic<int> bad{0};
        auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
          std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
          size_t sTotal = 3, rTotal = 5;  // leading gaps
          for (int p = 0; p < n; ++p) {
            sc[p] = vCount(rank, p, scale);
            sd[p] = sTotal;
            sTotal += sc[p] + 2;
            rc[p] = vCount(p, rank, scale);
            rd[p] = rTotal;
            rTotal += rc[p] + 1;
          }
          std::vector<int32_t> in(sTotal, -1), out(rTotal, -7);
          for (int p = 0; p < n; ++p) {
            for (size_t i = 0; i < sc[p]; ++i) in[sd[p] + i] = rank * 1000003 + p * 1009 + static_cast<int32_t>(i);
          }
          ncclResult_t r = braidAlltoAllv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), ncclInt32,
                                          comm, nullptr);
          for (int p = 0; p < n; ++p) {
            for (size_t i = 0; i < rc[p]; ++i) {
              if (out[rd[p] + i] != p * 1000003 + rank * 1009 + static_cast<int32_t>(i)) ++bad;
            }
            // The gap after each region is untouched.
            if (out[rd[p] + rc[p]] != -7) ++bad;
          }
          return r;
        });
        for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess);
        EXPECT_EQ(bad.load(), 0) << "n=" << n << " scale=" << scale << " " << proto;
      }
    }
  }
  unsetenv("NCCL_PROTO");
}

TEST(AlltoAllv, BadArgumentsAreNamed) {
  auto results = runThreads(2, [&](int rank, ncclComm_t comm) {
    size_t counts[2] = {1, 1}, displs[2] = {0, 1};
    float buf[2] = {0, 0}, out[2];
    // The refused calls on rank 0 only: the last-error text is the process's (as NCCL's), so a second rank failing
    // in parallel could overwrite it between a call and its check.
    if (rank == 0) {
      ncclResult_t first = braidAlltoAllv(buf, counts, displs, out, nullptr, displs, ncclFloat, comm, nullptr);
      const std::string text = ncclGetLastError(comm);
      if (first != ncclInvalidArgument || text.find("recvcounts is NULL") == std::string::npos)
        return ncclInternalError;
      size_t huge[2] = {SIZE_MAX / 2, 1};
      if (braidAlltoAllv(buf, huge, displs, out, counts, displs, ncclFloat, comm, nullptr) != ncclInvalidArgument) {
        return ncclInternalError;
      }
      if (std::string(ncclGetLastError(comm)).find("sendcounts[0]") == std::string::npos) return ncclInternalError;
      if (braidAlltoAllv(nullptr, counts, displs, out, counts, displs, ncclFloat, comm, nullptr) !=
          ncclInvalidArgument) {
        return ncclInternalError;
      }
    }
    // Still usable afterwards: the refused calls queued nothing.
    return braidAlltoAllv(buf, counts, displs, out, counts, displs, ncclFloat, comm, nullptr);
  });
  for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess);
}

}  // namespace
}  // namespace braid_test
