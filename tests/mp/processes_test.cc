// Ranks as processes (fork + the shared-memory transport): collectives, kill -9 of one rank, segment cleanup, and a
// full /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/coll_check.h"
#include "tests/common/harness.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit: reopening the log per process
namespace braid_test {
namespace {

// Segments this test's children left in dir (names carry the creating pid).
std::vector<std::string> leftoverSegments(const std::string& dir, const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    for (pid_t p : pids) {
      if (name.rfind("braid-" + std::to_string(p) + "-", 0) == 0) found.push_back(name);
    }
  }
  closedir(d);
  return found;
}

// One rank's run of a case list: 0, or 1 after printing the first mismatch.
int runCaseList(const std::vector<CollCase>& cases, int rank, int n, ncclComm_t comm) {
  for (const CollCase& c : cases) {
    std::string err = runCase(c, rank, n, comm);
    if (!err.empty()) {
      fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
      return 1;
    }
  }
  return 0;
}

class ProcessRanks : public ::testing::TestWithParam<int> {};

TEST_P(ProcessRanks, Collectives) {
  // Two channels pinned, so the multi-channel paths run even where the default would pick one per rank.
  setenv("BRAID_CPU_NCHANNELS", "2", 1);
  const int n = GetParam();
  std::vector<CollCase> cases;
  const Coll colls[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce,  Coll::kAllGather, Coll::kReduceScatter,
                        Coll::kAlltoAll,  Coll::kGather,    Coll::kScatter, Coll::kSendRecv};
  struct TypeOp {
    ncclDataType_t t;
    ncclRedOp_t op;
  };
  const TypeOp typeOps[] = {{ncclFloat32, ncclSum}, {ncclInt8, ncclMax},          {ncclBfloat16, ncclAvg},
                            {ncclUint64, ncclProd}, {ncclFloat8e5m2, ncclNumOps}, {ncclFloat16, ncclMin}};
  for (Coll c : colls) {
    for (const TypeOp& to : typeOps) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        if (count > 1023 && to.t != ncclFloat32 && to.t != ncclBfloat16) continue;
        for (bool inPlace : {false, true}) {
          if (c == Coll::kSendRecv && inPlace) continue;
          cases.push_back(CollCase{c, to.t, collHasOp(c) ? to.op : ncclSum, count, inPlace, (n - 1) % n});
        }
      }
    }
  }
  std::vector<pid_t> pids;
  auto status = runProcesses(
      n, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, n, comm); }, 120, &pids);
  unsetenv("BRAID_CPU_NCHANNELS");
  for (int r = 0; r < n; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
  EXPECT_TRUE(leftoverSegments("/dev/shm", pids).empty());
}

INSTANTIATE_TEST_SUITE_P(Ranks, ProcessRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8));

// Regression: an in-place all-to-all whose blocks exceed the FIFOs overwrote blocks before they were sent (found
// by alltoall_perf between processes at 16 MB). Rank 1 starts first and fills its FIFO towards rank 0, so when
// rank 0 starts, data for its block 1 is already waiting while that block has not been sent yet.
TEST(Processes, InPlaceAlltoAllWithSkewedRanks) {
  const size_t perPeer = size_t{2} << 20;  // 8 MB of floats per block, 2 x NCCL_BUFFSIZE
  for (int n : {2, 3}) {
    auto status = runProcesses(n, [&](int rank, ncclComm_t comm) {
      for (bool inPlace : {false, true}) {
        if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::string err = runCase(CollCase{Coll::kAlltoAll, ncclFloat32, ncclSum, perPeer, inPlace, 0}, rank, n, comm);
        if (!err.empty()) {
          fprintf(stderr, "rank %d (%s): %s\n", rank, inPlace ? "in place" : "out of place", err.c_str());
          return 1;
        }
      }
      return 0;
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << n << " ranks, rank " << r;
  }
}

// The direct (NVLS-style) path across processes: with ncclMemAlloc buffers every rank loads and stores its peers'
// buffers; when one rank's buffers are private (heap) every rank must agree to fall back to the ring. Both give
// exact results, for every size class (staged, direct, streaming stores), in and out of place.
TEST(Processes, DirectCollectivesOnSharedAndPrivateBuffers) {
  for (int n : {2, 3, 4}) {
    for (int privateRank : {-1, n - 1}) {
      auto status = runProcesses(n, [&](int rank, ncclComm_t comm) {
        const Coll colls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather};
        for (Coll coll : colls) {
          for (size_t count : {size_t{5}, size_t{40000}, size_t{(1 << 20) + 3}}) {
            for (bool inPlace : {false, true}) {
              for (ncclRedOp_t op : {ncclSum, ncclNumOps}) {
                if (op != ncclSum && coll == Coll::kAllGather) continue;
                CollCase c{coll, ncclFloat32, op, count, inPlace, 0, rank != privateRank};
                std::string err = runCase(c, rank, n, comm);
                if (!err.empty()) {
                  fprintf(stderr, "rank %d (private rank %d): %s\n", rank, privateRank, err.c_str());
                  return 1;
                }
              }
            }
          }
        }
        // bf16 avg through the staged and the direct path: rounding must not depend on the path's chunking.
        for (size_t count : {size_t{999}, size_t{300001}}) {
          std::string err =
              runCase(CollCase{Coll::kAllReduce, ncclBfloat16, ncclAvg, count, false, 0, true}, rank, n, comm);
          if (!err.empty()) {
            fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
            return 1;
          }
        }
        return 0;
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(status[static_cast<size_t>(r)], 0) << n << " ranks, private rank " << privateRank << ", rank " << r;
      }
    }
  }
}

// The smallest staged inputs (24 bytes at most) travel on the line of the posted counter, the others through the
// segment's stages, both by generation parity: sizes alternating between the two for many generations, every
// result exact (a rank overwriting a stage a peer still reads would show here).
TEST(Processes, TinyStagedInputsAlternateBetweenInlineAndSegmentStages) {
  for (int n : {2, 3}) {
    auto status = runProcesses(n, [&](int rank, ncclComm_t comm) {
      const size_t counts[] = {1, 2, 6, 7, 5, 64, 3};  // floats: 4, 8, 24 (inline) and 28, 20, 256, 12 bytes
      std::vector<float> send(64), recv(64);
      for (int it = 0; it < 3000; ++it) {
        const size_t count = counts[static_cast<size_t>(it) % (sizeof(counts) / sizeof(counts[0]))];
        for (size_t i = 0; i < count; ++i)
          send[i] = static_cast<float>((rank + 1) * 1000 + it % 97 + static_cast<int>(i));
        if (ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return 2;
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < n; ++r) want += static_cast<float>((r + 1) * 1000 + it % 97 + static_cast<int>(i));
          if (recv[i] != want) {
            fprintf(stderr, "rank %d: iteration %d count %zu element %zu: %g, want %g\n", rank, it, count, i,
                    static_cast<double>(recv[i]), static_cast<double>(want));
            return 1;
          }
        }
      }
      return 0;
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << n << " ranks, rank " << r;
  }
}

// BRAID_CMA=1: private (heap) buffers of other processes are read and written with cross-memory attach on the
// direct path instead of falling back to the ring: exact results for every size class, in and out of place, with
// every rank's buffers private and with one rank's; the COLL log says the path was taken.
TEST(Processes, DirectCollectivesOnPrivateBuffersWithCrossMemoryAttach) {
  char base[] = "/tmp/braid-cma-log-XXXXXX";
  const int fd = mkstemp(base);
  ASSERT_GE(fd, 0);
  close(fd);
  setenv("BRAID_CMA", "1", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "COLL", 1);
  setenv("NCCL_DEBUG_FILE", (std::string(base) + ".%p").c_str(), 1);
  for (int n : {2, 3}) {
    for (int sharedRank : {-1, 0}) {
      std::vector<pid_t> pids;
      auto status = runProcesses(
          n,
          [&](int rank, ncclComm_t comm) {
            for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather}) {
              for (size_t count : {size_t{40000}, size_t{(1 << 20) + 3}}) {
                for (bool inPlace : {false, true}) {
                  CollCase c{coll, ncclFloat32, ncclSum, count, inPlace, 0, rank == sharedRank};
                  std::string err = runCase(c, rank, n, comm);
                  if (!err.empty()) {
                    fprintf(stderr, "rank %d (shared rank %d): %s\n", rank, sharedRank, err.c_str());
                    return 1;
                  }
                }
              }
            }
            return 0;
          },
          120, &pids, nullptr, [&](int) { ncclResetDebugInit(); });  // this process's own log file (%p)
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(status[static_cast<size_t>(r)], 0) << n << " ranks, shared rank " << sharedRank << ", rank " << r;
        const std::string log = std::string(base) + "." + std::to_string(pids[static_cast<size_t>(r)]);
        const std::string text = readFileText(log);
        unlink(log.c_str());
        // A rank whose every peer's buffers are shared (n = 2, the other rank's ncclMemAlloc) maps them instead.
        const bool seesPrivatePeer = sharedRank < 0 || n > 2 || r == sharedRank;
        EXPECT_EQ(text.find("private memory: cross-memory attach") != std::string::npos, seesPrivatePeer)
            << n << " ranks, shared rank " << sharedRank << ", rank " << r << ": " << text.substr(0, 2000);
      }
    }
  }
  for (const char* v : {"BRAID_CMA", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) unsetenv(v);
  ncclResetDebugInit();
  unlink((std::string(base) + "." + std::to_string(getpid())).c_str());
  unlink(base);
}

// The double binary tree between processes (forced), 2 to 7 ranks, across the FIFOs.
TEST(Processes, TreeAllReduce) {
  setenv("NCCL_ALGO", "allreduce:tree;reduce:tree;broadcast:tree", 1);
  for (int n : {2, 3, 4, 5, 7}) {
    std::vector<CollCase> cases;
    for (ncclDataType_t t : {ncclFloat32, ncclBfloat16, ncclInt8, ncclFloat8e5m2}) {
      for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclNumOps, ncclMax}) {
        for (size_t count : {size_t{1}, size_t{1023}, size_t{(1 << 20) + 3}}) {
          if (count > 1023 && t != ncclFloat32) continue;
          for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kBroadcast}) {
            if (coll == Coll::kBroadcast && op != ncclSum) continue;
            cases.push_back(CollCase{coll, t, op, count, count == 1023, n - 1});
          }
        }
      }
    }
    auto status = runProcesses(n, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, n, comm); });
    for (int r = 0; r < n; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << n << " ranks, rank " << r;
  }
  unsetenv("NCCL_ALGO");
}

// The LL protocol between processes (flagged lines in /dev/shm), every collective, ring and tree.
TEST(Processes, LlProtocol) {
  setenv("NCCL_PROTO", "LL", 1);
  setenv("NCCL_ALGO", "ring;allreduce:tree", 1);
  for (int n : {2, 3, 5}) {
    std::vector<CollCase> cases;
    for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                      Coll::kAlltoAll, Coll::kSendRecv}) {
      for (ncclDataType_t t : {ncclFloat32, ncclBfloat16, ncclInt8}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1023}, size_t{70001}}) {
          const ncclRedOp_t op = count == 1023 ? ncclAvg : ncclSum;
          cases.push_back(CollCase{coll, t, op, count, count == 1, n - 1});
        }
      }
    }
    auto status = runProcesses(n, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, n, comm); });
    for (int r = 0; r < n; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << n << " ranks, rank " << r;
  }
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
}

std::string readFile(const std::string& path) {
  std::string text;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return text;
  char line[4096];
  while (fgets(line, sizeof(line), f)) text += line;
  fclose(f);
  return text;
}

// Lines of `text` that contain `what`, from `what` on.
std::vector<std::string> linesWith(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = text.find(what, pos)) != std::string::npos) {
    size_t end = text.find('\n', pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// A beforeInit for runProcesses: rank r on host "host-a" or "host-b" as hostB(r) says; rank 0 logs `subsys` at
// INFO to `log`.
std::function<void(int)> hostsAndRank0Log(std::function<bool(int)> hostB, const std::string& log, const char* subsys) {
  return [=](int rank) {
    setenv("NCCL_HOSTID", hostB(rank) ? "host-b" : "host-a", 1);
    if (rank == 0) {
      setenv("NCCL_DEBUG", "INFO", 1);
      setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
      setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
      ncclResetDebugInit();
    }
  };
}

// BRAID_PLACE_THREADS between processes of one host: local rank i's collectives run on the i-th CPU.
TEST(Processes, RanksOfOneHostArePlacedOnCpusOfTheirOwn) {
  const std::vector<int> cpus = unrestrictedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 or more CPUs and an unrestricted CPU mask";
  char dir[] = "/tmp/braid-place-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto logOf = [&](int rank) { return std::string(dir) + "/rank" + std::to_string(rank) + ".log"; };
  auto status = runProcesses(
      2, [](int, ncclComm_t) { return 0; }, 60, nullptr, nullptr,
      [&](int rank) {
        setenv("NCCL_DEBUG", "INFO", 1);
        setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
        setenv("NCCL_DEBUG_FILE", logOf(rank).c_str(), 1);
        ncclResetDebugInit();
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
    const std::string log = readFile(logOf(r));
    const std::string line = "rank " + std::to_string(r) + ": collectives run on CPU " + std::to_string(cpus[r]);
    EXPECT_NE(log.find(line), std::string::npos) << "no \"" << line << "\" in:\n" << log;
    unlink(logOf(r).c_str());
  }
  rmdir(dir);
}

// Ranks 0 and 2 on one host, 1 and 3 on another (NCCL_HOSTID): the topology stage groups them into two nodes and
// every rank gets rings that visit a node's ranks together, logged in NCCL's style.
TEST(Processes, TopologyGroupsRanksByHost) {
  char dir[] = "/tmp/braid-topo-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto logOf = [&](int rank) { return std::string(dir) + "/rank" + std::to_string(rank) + ".log"; };
  auto status = runProcesses(
      4, [](int, ncclComm_t) { return 0; }, 60, nullptr, nullptr,
      [&](int rank) {
        setenv("NCCL_HOSTID", rank % 2 == 0 ? "host-a" : "host-b", 1);
        setenv("NCCL_DEBUG", "INFO", 1);
        setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
        setenv("NCCL_DEBUG_FILE", logOf(rank).c_str(), 1);
        ncclResetDebugInit();
      });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
  std::vector<std::string> trees;
  for (int r = 0; r < 4; ++r) {
    const std::string path = logOf(r);
    const std::string log = readFile(path);
    const std::string counts =
        "rank " + std::to_string(r) + " nRanks 4 nNodes 2 localRanks 2 localRank " + std::to_string(r / 2);
    EXPECT_NE(log.find(counts), std::string::npos) << log;
    // Two hosts on one kernel share its CPUs: placing each host's ranks would put both hosts' first ranks on
    // the first CPU, so nobody is placed.
    EXPECT_EQ(log.find("collectives run on CPU"), std::string::npos) << log;
    std::vector<std::string> t = linesWith(log, "Trees ");
    ASSERT_EQ(t.size(), 1u) << log;
    trees.push_back(t[0]);
    std::vector<std::string> rings = linesWith(log, "Channel 00/");
    if (r == 0) {
      ASSERT_FALSE(rings.empty()) << log;
      for (const std::string& ring : linesWith(log, "Channel ")) {
        EXPECT_EQ(ring.substr(ring.find(':')), ": 0 2 1 3") << ring;
      }
    } else {
      EXPECT_TRUE(rings.empty()) << "only rank 0 logs the rings: " << log;
    }
    unlink(path.c_str());
  }
  rmdir(dir);
  // The all-reduce trees are NCCL's over two hosts: a chain inside each host (0 -> 2, 1 -> 3) and a binary tree
  // between the hosts' first ranks, rooted on host-a in tree 0 and on host-b in tree 1 (the mirror).
  EXPECT_EQ(trees[0], "Trees [0] 2/1/-1->0->-1 [1] 2/-1/-1->0->1") << trees[0];
  EXPECT_EQ(trees[1], "Trees [0] 3/-1/-1->1->0 [1] 3/0/-1->1->-1") << trees[1];
  EXPECT_EQ(trees[2], "Trees [0] -1/-1/-1->2->0 [1] -1/-1/-1->2->0") << trees[2];
  EXPECT_EQ(trees[3], "Trees [0] -1/-1/-1->3->1 [1] -1/-1/-1->3->1") << trees[3];
}

// Ranks 0 and 2 on one "host", 1 and 3 on another (NCCL_HOSTID): the ring 0 2 1 3 crosses hosts twice per
// channel over the network transport (Socket, over this machine's own address), the trees run over that order,
// and every collective is exact. NCCL_SHM_DISABLE=1 sends even same-host processes through the network.
TEST(Processes, CollectivesAcrossHostsOverTheNetwork) {
  std::vector<CollCase> cases;
  for (Coll c : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                 Coll::kAlltoAll, Coll::kGather, Coll::kScatter, Coll::kSendRecv}) {
    for (ncclDataType_t t : {ncclFloat32, ncclBfloat16, ncclInt8}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        if (count > 1023 && t != ncclFloat32) continue;
        cases.push_back(
            CollCase{c, t, collHasOp(c) ? (count == 1023 ? ncclAvg : ncclSum) : ncclSum, count, count == 1, 3});
      }
    }
  }
  // LL too: its chunks cross the network as whole messages in the Simple slots, and run as lines inside a host.
  for (const char* proto : {"Simple", "LL"}) {
    for (const char* algo : {"ring", "allreduce:tree;reduce:tree;broadcast:tree"}) {
      for (bool shmOff : {false, true}) {
        setenv("NCCL_ALGO", algo, 1);
        setenv("NCCL_PROTO", proto, 1);
        auto status = runProcesses(
            4, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, 4, comm); }, 120, nullptr, nullptr,
            [&](int rank) {
              setenv("NCCL_HOSTID", rank % 2 == 0 ? "host-a" : "host-b", 1);
              if (shmOff) setenv("NCCL_SHM_DISABLE", "1", 1);
            });
        unsetenv("NCCL_ALGO");
        unsetenv("NCCL_PROTO");
        for (int r = 0; r < 4; ++r) {
          EXPECT_EQ(status[static_cast<size_t>(r)], 0)
              << algo << " " << proto << (shmOff ? " shm off" : "") << ", rank " << r;
        }
      }
    }
  }
  // An LL chunk that cannot fit a network slot (NCCL_BUFFSIZE far below NCCL_LL_BUFFSIZE): LL alone is refused
  // with both sizes and the remedy.
  char dir[] = "/tmp/braid-llnet-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/rank0.log";
  setenv("NCCL_PROTO", "LL", 1);
  setenv("NCCL_BUFFSIZE", "65536", 1);
  auto status = runProcesses(
      2, [](int, ncclComm_t) { return 0; }, 60, nullptr, nullptr,
      hostsAndRank0Log([](int r) { return r == 1; }, log, "INIT"));
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("NCCL_PROTO");
  for (int r = 0; r < 2; ++r) EXPECT_NE(status[static_cast<size_t>(r)], 0) << "tiny NCCL_BUFFSIZE with LL, rank " << r;
  const std::string text = readFile(log);
  EXPECT_NE(text.find("does not fit a network message slot (8192 bytes): raise NCCL_BUFFSIZE"), std::string::npos)
      << text;
  unlink(log.c_str());
  rmdir(dir);
}

// Several network devices: a host's ranks start on different devices and each rank's channels spread over them
// (NCCL_SOCKET_IFNAME lists two interfaces of this machine, both reachable from itself). Rank 0 (rail 0) runs its
// two channels over devices 0 and 1, and every result is exact.
TEST(Processes, ChannelsSpreadOverNetworkDevices) {
  std::vector<std::string> names;
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET || (it->ifa_flags & IFF_UP) == 0) continue;
    if (std::find(names.begin(), names.end(), it->ifa_name) == names.end()) names.push_back(it->ifa_name);
  }
  freeifaddrs(list);
  if (names.size() < 2) GTEST_SKIP() << "this machine has fewer than two IPv4 interfaces up";
  const std::string ifnames = "=" + names[0] + "," + names[1];
  char dir[] = "/tmp/braid-rails-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/rank0.log";
  const std::vector<CollCase> cases = {CollCase{Coll::kAllReduce, ncclFloat32, ncclSum, (1 << 20) + 3, false, 0},
                                       CollCase{Coll::kAlltoAll, ncclInt8, ncclSum, 1001, false, 0}};
  setenv("NCCL_SOCKET_IFNAME", ifnames.c_str(), 1);
  setenv("BRAID_CPU_NCHANNELS", "2", 1);
  setenv("NCCL_ALGO", "ring", 1);
  auto status = runProcesses(
      4, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, 4, comm); }, 120, nullptr, nullptr,
      hostsAndRank0Log([](int r) { return r >= 2; }, log, "NET"));
  unsetenv("NCCL_ALGO");
  unsetenv("BRAID_CPU_NCHANNELS");
  unsetenv("NCCL_SOCKET_IFNAME");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
  const std::string text = readFile(log);
  EXPECT_NE(text.find("NET/Socket : Using [0]" + names[0]), std::string::npos) << text;
  EXPECT_NE(text.find("via NET/Socket/0"), std::string::npos) << text;
  EXPECT_NE(text.find("via NET/Socket/1"), std::string::npos) << text;
  unlink(log.c_str());
  rmdir(dir);
}

// NVLSTree across hosts: NVLS-style reduce-scatter inside each host, all-reduce across hosts, all-gather inside.
// Forced through NCCL_ALGO, every type/operator case below is exact, counts that do not split evenly included
// (padding), and rank 0's TUNING log says NVLSTree ran. Without 2 ranks on every host it is refused by name.
TEST(Processes, NvlsTreeAcrossHosts) {
  char dir[] = "/tmp/braid-nvlstree-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/rank0.log";
  std::vector<CollCase> cases;
  for (ncclDataType_t t : {ncclFloat32, ncclBfloat16, ncclInt8, ncclUint64}) {
    for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclNumOps, ncclMax, ncclProd}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        if (count > 1023 && t != ncclFloat32) continue;
        cases.push_back(CollCase{Coll::kAllReduce, t, op, count, count == 7, 0});
      }
    }
  }
  setenv("NCCL_ALGO", "allreduce:nvlstree", 1);
  auto status = runProcesses(
      4, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, 4, comm); }, 120, nullptr, nullptr,
      hostsAndRank0Log([](int r) { return r % 2 == 1; }, log, "TUNING,INIT"));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
  const std::string text = readFile(log);
  EXPECT_NE(text.find("NVLSTree on: 2 hosts x 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("-> NVLSTree/Simple"), std::string::npos) << text;
  unlink(log.c_str());

  // A tuning file's pin takes it too (these hosts share CPUs, where the model alone never takes it).
  const std::string tuning = std::string(dir) + "/tuning";
  FILE* f = fopen(tuning.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "pin allreduce 0 100000000 nvlstree\n");
  fclose(f);
  unsetenv("NCCL_ALGO");
  setenv("BRAID_TUNING_FILE", tuning.c_str(), 1);
  const std::vector<CollCase> few = {CollCase{Coll::kAllReduce, ncclFloat32, ncclAvg, 1001, false, 0}};
  status = runProcesses(
      4, [&](int rank, ncclComm_t comm) { return runCaseList(few, rank, 4, comm); }, 120, nullptr, nullptr,
      hostsAndRank0Log([](int r) { return r % 2 == 1; }, log, "TUNING"));
  unsetenv("BRAID_TUNING_FILE");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "pinned, rank " << r;
  EXPECT_NE(readFile(log).find("-> NVLSTree/Simple"), std::string::npos) << readFile(log);
  unlink(log.c_str());
  unlink(tuning.c_str());

  // One rank per host: NVLSTree cannot run, and forcing it alone is an error that says why.
  setenv("NCCL_ALGO", "allreduce:nvlstree", 1);
  status = runProcesses(
      2,
      [](int, ncclComm_t comm) {
        float v = 1;
        ncclResult_t rc = ncclAllReduce(&v, &v, 1, ncclFloat32, ncclSum, comm, nullptr);
        const std::string err = ncclGetLastError(comm);
        return rc == ncclInvalidUsage && err.find("NVLSTree runs all-reduce over several hosts") != std::string::npos
                   ? 0
                   : 1;
      },
      60, nullptr, nullptr, [](int rank) { setenv("NCCL_HOSTID", rank == 0 ? "host-a" : "host-b", 1); });
  unsetenv("NCCL_ALGO");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "refusal on rank " << r;
  rmdir(dir);
}

// On hosts with CPUs of their own the model takes NVLSTree where it predicts it fastest: with a slow network it
// crosses the network between H hosts instead of n ranks, and moves each host's bytes once (at 8 bytes it ties
// with the tree, whose chain inside a host costs what NVLSTree's host steps do). Namespaces or
// processes of one machine (the same kernel boot id) share CPUs, and there the model never takes it.
TEST(Processes, ModelTakesNvlsTreeOnSeparateMachines) {
  char dir[] = "/tmp/braid-nvlsmodel-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string tuning = std::string(dir) + "/tuning";
  FILE* f = fopen(tuning.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "net 500 0.5\n");
  fclose(f);
  const std::vector<CollCase> cases = {CollCase{Coll::kAllReduce, ncclFloat32, ncclSum, 2, false, 0},
                                       CollCase{Coll::kAllReduce, ncclFloat32, ncclAvg, (1 << 20) + 5, false, 0}};
  setenv("BRAID_TUNING_FILE", tuning.c_str(), 1);
  for (const char* share : {"0", "-1"}) {
    const std::string log = std::string(dir) + "/rank0." + share + ".log";
    setenv("BRAID_HOSTS_SHARE_CPUS", share, 1);
    auto status = runProcesses(
        4, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, 4, comm); }, 120, nullptr, nullptr,
        hostsAndRank0Log([](int r) { return r >= 2; }, log, "TUNING,INIT"));
    for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "share " << share << " rank " << r;
    const std::string text = readFile(log);
    const std::vector<std::string> small = linesWith(text, "allreduce 8 bytes");
    const std::vector<std::string> large = linesWith(text, "allreduce 4194324 bytes");
    ASSERT_FALSE(small.empty()) << text;
    ASSERT_FALSE(large.empty()) << text;
    if (std::string(share) == "0") {
      EXPECT_NE(text.find("NVLSTree on: 2 hosts x 2 ranks"), std::string::npos) << text;
      EXPECT_NE(large[0].find("-> NVLSTree/Simple"), std::string::npos) << large[0];
    } else {
      EXPECT_NE(text.find("NVLSTree off: the hosts share one machine's CPUs"), std::string::npos) << text;
      EXPECT_EQ(large[0].find("-> NVLSTree/Simple"), std::string::npos) << large[0];
    }
    unlink(log.c_str());
  }
  unsetenv("BRAID_HOSTS_SHARE_CPUS");
  unsetenv("BRAID_TUNING_FILE");
  unlink(tuning.c_str());
  rmdir(dir);
}

// Across hosts the selector weighs network hops: with a slow network (a tuning file's "net" line standing in for
// tc netem, which this kernel lacks) a 1 MB all-reduce over 2 hosts x 2 ranks takes the tree (2 network hops
// each way) instead of the ring (6 steps, each waiting on the network); with a fast one, the ring. The TUNING
// log line of rank 0 says which, and the results are exact either way.
TEST(Processes, NetworkLatencyMovesTheAllReduceToTheTree) {
  char dir[] = "/tmp/braid-netsel-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::vector<CollCase> cases = {CollCase{Coll::kAllReduce, ncclFloat32, ncclSum, 1 << 18, false, 0}};
  for (const char* alpha : {"2", "5000"}) {
    const std::string tuning = std::string(dir) + "/tuning." + alpha;
    FILE* f = fopen(tuning.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fprintf(f, "net %s 1.25\n", alpha);
    fclose(f);
    const std::string log = std::string(dir) + "/rank0." + alpha + ".log";
    setenv("BRAID_TUNING_FILE", tuning.c_str(), 1);
    auto status = runProcesses(
        4, [&](int rank, ncclComm_t comm) { return runCaseList(cases, rank, 4, comm); }, 120, nullptr, nullptr,
        hostsAndRank0Log([](int r) { return r >= 2; }, log, "TUNING"));
    unsetenv("BRAID_TUNING_FILE");
    for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "net alpha " << alpha << " rank " << r;
    const std::string text = readFile(log);
    const std::vector<std::string> lines = linesWith(text, "allreduce 1048576 bytes");
    ASSERT_FALSE(lines.empty()) << text;
    const std::string want = std::string(alpha) == "2" ? "-> Ring/Simple" : "-> Tree/Simple";
    EXPECT_NE(lines[0].find(want), std::string::npos) << "net alpha " << alpha << ": " << lines[0];
    unlink(log.c_str());
    unlink(tuning.c_str());
  }
  rmdir(dir);
}

TEST(Processes, KillNineOneRankOthersGetRemoteError) {
  // Rank 1 is killed mid-collective; the others must fail with ncclRemoteError naming rank 1, well before the
  // BRAID_TIMEOUT deadline, because a dead peer process is detected directly.
  const int n = 3;
  std::vector<pid_t> pids;
  // Rank 1 dies only once every rank is past init (on a loaded machine init can outlast a fixed delay, and a
  // death during init is a different failure): each rank leaves a file here before its first collective.
  char dir[] = "/tmp/braid-kill-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto readyFile = [&](int rank) { return std::string(dir) + "/ready." + std::to_string(rank); };
  auto t0 = std::chrono::steady_clock::now();
  auto status = runProcesses(
      n,
      [&](int rank, ncclComm_t comm) {
        fclose(fopen(readyFile(rank).c_str(), "w"));
        std::vector<float> x(4 << 20, 1.0f);
        for (int iter = 0; iter < 100000; ++iter) {
          ncclResult_t r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, comm, nullptr);
          if (r != ncclSuccess) {
            std::string text = ncclGetLastError(comm);
            fprintf(stderr, "rank %d: %s\n", rank, text.c_str());
            return r == ncclRemoteError && text.find("rank 1") != std::string::npos ? 42 : 43;
          }
          for (float& v : x) v = 1.0f;
        }
        return 0;
      },
      60, &pids,
      [&](const std::vector<pid_t>& p) {
        for (int i = 0; i < 3000; ++i) {  // at most 30 s
          bool all = true;
          for (int r = 0; r < n; ++r) all = all && access(readyFile(r).c_str(), F_OK) == 0;
          if (all) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the collectives
        kill(p[1], SIGKILL);
      });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < n; ++r) unlink(readyFile(r).c_str());
  rmdir(dir);
  EXPECT_EQ(status[0], 42);
  EXPECT_EQ(status[1], 128 + SIGKILL);
  EXPECT_EQ(status[2], 42);
  EXPECT_LT(secs, 30.0);
  // The dead rank's segments were unlinked when they were attached; nothing is left behind.
  EXPECT_TRUE(leftoverSegments("/dev/shm", pids).empty());
}

// Whatever phase a rank is killed in (init, connecting, a collective, destroy), nothing is left in BRAID_SHM_DIR:
// shm FIFOs never have a name there (O_TMPFILE, or unlinked the moment they exist; the peer attaches through
// /proc/<pid>/fd). Regression: a receiver killed before its sender attached left its 4.7 MB braid-<pid>-* file.
TEST(Processes, NothingLeftInShmDirWhateverPhaseARankIsKilledIn) {
  char dir[] = "/dev/shm/braid-leak-XXXXXX";
  if (mkdtemp(dir) == nullptr) GTEST_SKIP() << "cannot create a directory in /dev/shm";
  char marks[] = "/tmp/braid-phase-XXXXXX";  // where each rank says which phase it reached
  ASSERT_NE(mkdtemp(marks), nullptr);
  setenv("BRAID_SHM_DIR", dir, 1);
  setenv("BRAID_TIMEOUT", "5", 1);  // a peer killed during init is only noticed at the bootstrap's deadline
  auto marker = [&](int rank, const char* phase) {
    return std::string(marks) + "/" + phase + "." + std::to_string(rank);
  };
  const char* phases[] = {"init", "connect", "operate", "destroy"};
  for (const char* phase : phases) {
    for (int victim : {0, 1}) {
      auto status = runProcesses(
          2,
          [&](int rank, ncclComm_t comm) {
            fclose(fopen(marker(rank, "connect").c_str(), "w"));
            // Large and on private buffers: the FIFO path, over shm connectors made at this first call.
            std::vector<float> x(1 << 20, 1.0f);
            for (int iter = 0; iter < 200; ++iter) {
              if (iter == 2) fclose(fopen(marker(rank, "operate").c_str(), "w"));
              if (ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) {
                return 1;
              }
            }
            fclose(fopen(marker(rank, "destroy").c_str(), "w"));
            return 0;
          },
          60, nullptr,
          [&](const std::vector<pid_t>& p) {
            if (std::string(phase) != "init") {
              for (int i = 0; i < 3000 && access(marker(victim, phase).c_str(), F_OK) != 0; ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
            }
            kill(p[static_cast<size_t>(victim)], SIGKILL);
          });
      // In the destroy phase the victim may have finished before the signal came.
      const int st = status[static_cast<size_t>(victim)];
      EXPECT_TRUE(st == 128 + SIGKILL || (std::string(phase) == "destroy" && st == 0))
          << phase << ", victim rank " << victim << ": status " << st;
      for (const char* ph : phases) {
        for (int r = 0; r < 2; ++r) unlink(marker(r, ph).c_str());
      }
      std::vector<std::string> left;
      if (DIR* d = opendir(dir)) {
        while (dirent* e = readdir(d)) {
          if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") left.push_back(e->d_name);
        }
        closedir(d);
      }
      EXPECT_TRUE(left.empty()) << phase << ", victim rank " << victim << ": " << left.size() << " file(s) left, "
                                << (left.empty() ? "" : left[0]);
    }
  }
  unsetenv("BRAID_SHM_DIR");
  unsetenv("BRAID_TIMEOUT");
  rmdir(dir);
  rmdir(marks);
}

// BRAID_CHECK_CALLS=1: matching calls run as usual; ranks that call different counts, ops, datatypes, roots or
// collectives all get ncclInvalidUsage naming both calls, never success with wrong data.
TEST(Processes, MismatchedCollectivesAreCaughtOnEveryRank) {
  setenv("BRAID_CHECK_CALLS", "1", 1);
  setenv("BRAID_TIMEOUT", "20", 1);
  struct Variant {
    const char* what;
    const char* mentions;
  } variants[] = {
      {"count", "count 8"}, {"op", "max"}, {"datatype", "int32"}, {"root", "root 1"}, {"collective", "Broadcast"}};
  for (const Variant& v : variants) {
    auto status = runProcesses(2, [&](int rank, ncclComm_t comm) {
      std::vector<float> x(16, 1.0f);
      // A matching group first: the check passes and the all-reduce is right.
      if (ncclAllReduce(x.data(), x.data(), 4, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess || x[0] != 2.0f) {
        return 10;
      }
      ncclResult_t r;
      const std::string what = v.what;
      if (rank == 0 || what == "root") {
        const int root = what == "root" ? rank : 0;
        r = what == "root" ? ncclReduce(x.data(), x.data(), 4, ncclFloat, ncclSum, root, comm, nullptr)
                           : ncclReduce(x.data(), x.data(), 4, ncclFloat, ncclSum, 0, comm, nullptr);
      } else if (what == "count") {
        r = ncclReduce(x.data(), x.data(), 8, ncclFloat, ncclSum, 0, comm, nullptr);
      } else if (what == "op") {
        r = ncclReduce(x.data(), x.data(), 4, ncclFloat, ncclMax, 0, comm, nullptr);
      } else if (what == "datatype") {
        r = ncclReduce(x.data(), x.data(), 4, ncclInt32, ncclSum, 0, comm, nullptr);
      } else {
        r = ncclBroadcast(x.data(), x.data(), 4, ncclFloat, 0, comm, nullptr);
      }
      const std::string text = ncclGetLastError(comm);
      fprintf(stderr, "%s, rank %d: %s\n", v.what, rank, text.c_str());
      if (r != ncclInvalidUsage) return 11;
      return text.find("mismatched collectives") != std::string::npos && text.find(v.mentions) != std::string::npos
                 ? 42
                 : 12;
    });
    EXPECT_EQ(status[0], 42) << v.what;
    EXPECT_EQ(status[1], 42) << v.what;
  }
  unsetenv("BRAID_CHECK_CALLS");
  unsetenv("BRAID_TIMEOUT");
}

TEST(Processes, FullShmNamesTheDirectoryAndSize) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  char dir[] = "/tmp/braid-shm-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  if (mount("tmpfs", dir, "tmpfs", 0, "size=1m") != 0) {
    rmdir(dir);
    GTEST_SKIP() << "cannot mount tmpfs here";
  }
  setenv("BRAID_SHM_DIR", dir, 1);
  setenv("NCCL_BUFFSIZE", "8388608", 1);
  setenv("NCCL_LL_BUFFSIZE", "65536", 1);
  auto status = runProcesses(2, [&](int rank, ncclComm_t comm) {
    // A broadcast: the FIFO path (small all-reduces are staged through a memfd, outside BRAID_SHM_DIR).
    float x[4] = {1, 2, 3, 4};
    ncclResult_t r = ncclBroadcast(x, x, 4, ncclFloat, 0, comm, nullptr);
    std::string text = ncclGetLastError(comm);
    fprintf(stderr, "rank %d: %s\n", rank, text.c_str());
    if (r == ncclSuccess) return 1;
    // The rank that hit the full directory names it, the size (4 KiB of counters, the Simple and the LL slots) and
    // the knobs that shrink it; its peer reports a remote failure.
    if (text.find("is full") != std::string::npos && text.find(dir) != std::string::npos &&
        text.find("8458240 bytes") != std::string::npos && text.find("NCCL_LL_BUFFSIZE") != std::string::npos) {
      return 42;
    }
    return r == ncclRemoteError ? 43 : 44;
  });
  unsetenv("BRAID_SHM_DIR");
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("NCCL_LL_BUFFSIZE");
  umount(dir);
  rmdir(dir);
  EXPECT_TRUE(status[0] == 42 || status[1] == 42) << status[0] << " " << status[1];
  EXPECT_TRUE(status[0] == 42 || status[0] == 43) << status[0];
  EXPECT_TRUE(status[1] == 42 || status[1] == 43) << status[1];
}

}  // namespace
}  // namespace braid_test
