// Profiler plugins (include/nccl_profiler.h): the sample plugin of tests/profiler, built for ABI v4, v5, v6 and v7,
// loaded by NCCL_PROFILER_PLUGIN into communicators of 4 threads. It records every event; the tests check that
// every operation is there with NCCL's fields, under the right parents, each event started and stopped once, and
// that a plugin that fails, declines events or is missing leaves the collectives exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"
#include "tests/common/scoped_env.h"

namespace braid_test {
namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 64 * 1024;

std::string pluginPath(int abi) {
  return std::string(BRAID_PROFILER_PLUGIN_DIR) + "/libnccl-profiler-braidsample" + std::to_string(abi) + ".so";
}

// One recorded event.
struct Ev {
  unsigned long id = 0, parent = 0;
  std::string type;
  int rank = -1;
  std::map<std::string, std::string> f;  // its fields
  int stops = 0;
  std::vector<int> states;
};

struct Record {
  std::map<unsigned long, Ev> events;
  std::vector<std::string> lines;
  size_t inits = 0, finalizes = 0, declines = 0;
  std::vector<const Ev*> of(const std::string& type, int rank) const {
    std::vector<const Ev*> out;
    for (const auto& e : events) {
      if (e.second.type == type && e.second.rank == rank) out.push_back(&e.second);
    }
    return out;
  }
  const Ev* get(unsigned long id) const {
    auto it = events.find(id);
    return it == events.end() ? nullptr : &it->second;
  }
};

Record parse(const std::string& text) {
  Record r;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    r.lines.push_back(line);
    std::istringstream w(line);
    std::string verb;
    w >> verb;
    if (verb == "init") ++r.inits;
    if (verb == "finalize") ++r.finalizes;
    if (verb == "decline") ++r.declines;
    if (verb == "start") {
      Ev e;
      w >> e.id >> e.type;
      std::string kv;
      while (w >> kv) {
        const size_t eq = kv.find('=');
        if (eq != std::string::npos) e.f[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      e.rank = std::stoi(e.f["rank"]);
      e.parent = std::stoul(e.f["parent"]);
      r.events[e.id] = e;
    } else if (verb == "stop") {
      unsigned long id = 0;
      w >> id;
      ++r.events[id].stops;
    } else if (verb == "state") {
      unsigned long id = 0;
      int s = 0;
      w >> id >> s;
      r.events[id].states.push_back(s);
    }
  }
  return r;
}

// Each rank: an all-reduce, a broadcast from rank 1, a send/receive ring in one group, an all-to-all, and an
// all-reduce through ncclAllReduceConfig with profiler tag 42; every result checked.
ncclResult_t workload(int rank, ncclComm_t comm) {
  std::vector<float> a(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) a[i] = static_cast<float>(rank + 1);
  ncclResult_t r = ncclAllReduce(a.data(), b.data(), kCount, ncclFloat, ncclSum, comm, nullptr);
  if (r != ncclSuccess) return r;
  if (b[0] != 10.0f || b[kCount - 1] != 10.0f) return ncclInternalError;
  std::vector<int32_t> bc(100, rank == 1 ? 77 : 0);
  if ((r = ncclBroadcast(bc.data(), bc.data(), 100, ncclInt32, 1, comm, nullptr)) != ncclSuccess) return r;
  if (bc[99] != 77) return ncclInternalError;
  std::vector<int32_t> out(16, rank), in(16, -1);
  ncclGroupStart();
  ncclSend(out.data(), 16, ncclInt32, (rank + 1) % kRanks, comm, nullptr);
  ncclRecv(in.data(), 16, ncclInt32, (rank + kRanks - 1) % kRanks, comm, nullptr);
  if ((r = ncclGroupEnd()) != ncclSuccess) return r;
  if (in[15] != (rank + kRanks - 1) % kRanks) return ncclInternalError;
  std::vector<int32_t> sa(8 * kRanks), ra(8 * kRanks, -1);
  for (int p = 0; p < kRanks; ++p)
    for (int i = 0; i < 8; ++i) sa[static_cast<size_t>(p * 8 + i)] = rank * 100 + p;
  if ((r = ncclAlltoAll(sa.data(), ra.data(), 8, ncclInt32, comm, nullptr)) != ncclSuccess) return r;
  for (int p = 0; p < kRanks; ++p)
    if (ra[static_cast<size_t>(p * 8)] != p * 100 + rank) return ncclInternalError;
  ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
  cc.userProfilerTag = 42;
  if ((r = ncclAllReduceConfig(a.data(), b.data(), kCount, ncclFloat, ncclSum, comm, nullptr, &cc)) != ncclSuccess) {
    return r;
  }
  return b[7] == 10.0f ? ncclSuccess : ncclInternalError;
}

struct ProfiledRun {
  Record rec;
  std::string log;  // braid's INFO/WARN lines
};

ProfiledRun runWith(const char* plugin, const char* mask = nullptr, const char* failInit = nullptr) {
  char tmpl[] = "/tmp/braid-profiler-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  ProfiledRun out;
  {
    ScopedEnv p("NCCL_PROFILER_PLUGIN", plugin);
    ScopedEnv m("NCCL_PROFILE_EVENT_MASK", mask);
    ScopedEnv f("BRAID_TEST_PROFILER_INIT_FAIL", failInit);
    ScopedEnv l("BRAID_TEST_PROFILER_LOG", tmpl);
    // The all-to-all as sends and receives (the log-step schedule would be one Coll "AlltoAll").
    ScopedEnv a("BRAID_ALLTOALL_ALGO", "pairwise");
    LogCapture cap("INIT");
    std::vector<ncclResult_t> rc = runThreads(kRanks, workload);
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
    out.log = cap.textOf(getpid());
  }
  out.rec = parse(readFileText(tmpl));
  unlink(tmpl);
  return out;
}

// Every event started was stopped exactly once, and every parent named is an event of the expected type.
void checkBalancedAndParented(const Record& rec, bool apiEvents) {
  for (const auto& it : rec.events) {
    const Ev& e = it.second;
    EXPECT_EQ(e.stops, 1) << e.type << " " << e.id;
    if (e.type == "Coll" || e.type == "P2p") {
      const Ev* p = rec.get(e.parent);
      ASSERT_NE(p, nullptr) << e.type << " " << e.id << " has no parent";
      // (an all-to-all's sends and receives are children of its CollApi)
      if (apiEvents && e.type == "P2p") {
        EXPECT_TRUE(p->type == "P2pApi" || (p->type == "CollApi" && p->f.at("func") == "AlltoAll")) << e.id;
      } else {
        EXPECT_EQ(p->type, apiEvents ? "CollApi" : "Group") << e.type << " " << e.id;
      }
      if (apiEvents) {
        const Ev* g = rec.get(std::stoul(e.f.at("group")));
        ASSERT_NE(g, nullptr);
        EXPECT_EQ(g->type, "Group");
      }
    }
    if (e.type == "CollApi" || e.type == "P2pApi") {
      const Ev* p = rec.get(e.parent);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p->type, "GroupApi");
    }
  }
}

TEST(ProfilerPlugin, V7SeesEveryOperationWithNcclsFieldsAndParents) {
  const ProfiledRun run = runWith(pluginPath(7).c_str());
  const Record& rec = run.rec;
  EXPECT_EQ(rec.inits, size_t{kRanks});
  EXPECT_EQ(rec.finalizes, size_t{kRanks});
  EXPECT_NE(run.log.find("PROFILER/Plugin: rank 0: using braid-sample-v7"), std::string::npos) << run.log;
  checkBalancedAndParented(rec, true);
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    // Five groups (all-reduce, broadcast, the send/receive group, all-to-all, the tagged all-reduce).
    const std::vector<const Ev*> groupApis = rec.of("GroupApi", r);
    ASSERT_EQ(groupApis.size(), 5u);
    for (size_t i = 0; i < groupApis.size(); ++i) {
      const Ev* g = groupApis[i];
      // NCCL's depth at the call: its own implicit group, inside the user's group for the send/receive ring.
      EXPECT_EQ(g->f.at("depth"), i == 2 ? "2" : "1");
      EXPECT_EQ(g->states, (std::vector<int>{23, 24}));  // GroupStartApiStop, GroupEndApiStart
    }
    EXPECT_EQ(rec.of("Group", r).size(), 5u);
    // Collectives: AllReduce (seq 0 and 1), Broadcast; the all-to-all is one CollApi whose operations are sends
    // and receives (one per peer each way).
    std::vector<const Ev*> colls = rec.of("Coll", r);
    ASSERT_EQ(colls.size(), 3u);
    EXPECT_EQ(colls[0]->f.at("func"), "AllReduce");
    EXPECT_EQ(colls[0]->f.at("count"), std::to_string(kCount));
    EXPECT_EQ(colls[0]->f.at("dtype"), "ncclFloat32");
    EXPECT_EQ(colls[0]->f.at("seq"), "0");
    EXPECT_EQ(colls[0]->f.at("tag"), "0");
    const std::string algo = colls[0]->f.at("algo");
    EXPECT_TRUE(algo == "RING" || algo == "TREE" || algo == "NVLS") << algo;
    const std::string proto = colls[0]->f.at("proto");
    EXPECT_TRUE(proto == "SIMPLE" || proto == "LL") << proto;
    EXPECT_EQ(colls[1]->f.at("func"), "Broadcast");
    EXPECT_EQ(colls[1]->f.at("root"), "1");
    EXPECT_EQ(colls[1]->f.at("dtype"), "ncclInt32");
    EXPECT_EQ(colls[1]->f.at("seq"), "0");
    EXPECT_EQ(colls[2]->f.at("func"), "AllReduce");
    EXPECT_EQ(colls[2]->f.at("seq"), "1");
    EXPECT_EQ(colls[2]->f.at("tag"), "42");
    EXPECT_EQ(rec.get(colls[2]->parent)->f.at("tag"), "42");
    const std::vector<const Ev*> collApis = rec.of("CollApi", r);
    ASSERT_EQ(collApis.size(), 4u);
    EXPECT_EQ(collApis[2]->f.at("func"), "AlltoAll");
    EXPECT_EQ(collApis[2]->f.at("count"), "8");
    // Sends and receives: the ring's two, then the all-to-all's 2 x 4 under its CollApi.
    const std::vector<const Ev*> p2ps = rec.of("P2p", r);
    ASSERT_EQ(p2ps.size(), 2u + 2 * kRanks);
    EXPECT_EQ(p2ps[0]->f.at("func"), "Send");
    EXPECT_EQ(p2ps[0]->f.at("peer"), std::to_string((r + 1) % kRanks));
    EXPECT_EQ(p2ps[1]->f.at("func"), "Recv");
    EXPECT_EQ(p2ps[1]->f.at("peer"), std::to_string((r + kRanks - 1) % kRanks));
    EXPECT_EQ(rec.get(p2ps[0]->parent)->type, "P2pApi");
    for (size_t i = 2; i < p2ps.size(); ++i) EXPECT_EQ(p2ps[i]->parent, collApis[2]->id);
  }
}

TEST(ProfilerPlugin, V4SeesGroupsAndOperationsOnly) {
  const ProfiledRun run = runWith(pluginPath(4).c_str());
  EXPECT_EQ(run.rec.inits, size_t{kRanks});
  EXPECT_EQ(run.rec.finalizes, size_t{kRanks});
  checkBalancedAndParented(run.rec, false);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(run.rec.of("GroupApi", r).size(), 0u);
    EXPECT_EQ(run.rec.of("CollApi", r).size(), 0u);
    EXPECT_EQ(run.rec.of("Group", r).size(), 5u);
    ASSERT_EQ(run.rec.of("Coll", r).size(), 3u);
    EXPECT_EQ(run.rec.of("Coll", r)[2]->f.at("seq"), "1");
    EXPECT_EQ(run.rec.of("P2p", r).size(), 2u + 2 * kRanks);
  }
}

TEST(ProfilerPlugin, V5GetsTheApiEventsToo) {
  const ProfiledRun run = runWith(pluginPath(5).c_str());
  EXPECT_EQ(run.rec.inits, size_t{kRanks});
  checkBalancedAndParented(run.rec, true);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(run.rec.of("GroupApi", r).size(), 5u);
    EXPECT_EQ(run.rec.of("Coll", r).size(), 3u);
  }
}

TEST(ProfilerPlugin, V6GetsTheApiEventsToo) {
  const ProfiledRun run = runWith(pluginPath(6).c_str());
  EXPECT_EQ(run.rec.inits, size_t{kRanks});
  checkBalancedAndParented(run.rec, true);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(run.rec.of("GroupApi", r).size(), 5u);
    EXPECT_EQ(run.rec.of("P2pApi", r).size(), 2u);
    EXPECT_EQ(run.rec.of("Coll", r).size(), 3u);
  }
}

// NCCL_PROFILE_EVENT_MASK=2 (Coll only): braid still offers the parents, the plugin declines them, and gets every
// collective with a NULL parent. Mask 0: braid offers nothing at all.
TEST(ProfilerPlugin, TheMaskDecidesWhatIsOffered) {
  const ProfiledRun coll = runWith(pluginPath(7).c_str(), "2");
  EXPECT_GT(coll.rec.declines, 0u);
  for (int r = 0; r < kRanks; ++r) {
    const std::vector<const Ev*> colls = coll.rec.of("Coll", r);
    ASSERT_EQ(colls.size(), 3u);
    for (const Ev* c : colls) EXPECT_EQ(c->parent, 0u);
    EXPECT_EQ(coll.rec.of("P2p", r).size(), 0u);
    EXPECT_EQ(coll.rec.of("GroupApi", r).size(), 0u);
  }
}

TEST(ProfilerPlugin, AZeroMaskGetsNoEvents) {
  const ProfiledRun none = runWith(pluginPath(7).c_str(), "0");
  EXPECT_EQ(none.rec.inits, size_t{kRanks});
  EXPECT_TRUE(none.rec.events.empty());
  EXPECT_EQ(none.rec.declines, 0u);
}

TEST(ProfilerPlugin, AFailingInitLeavesTheCommunicatorsWorking) {
  const ProfiledRun run = runWith(pluginPath(7).c_str(), nullptr, "1");
  EXPECT_EQ(run.rec.inits, 0u);
  EXPECT_NE(run.log.find("init returned 3 on rank"), std::string::npos) << run.log;
}

TEST(ProfilerPlugin, AMissingPluginIsNamedAndTheCommunicatorsWork) {
  const ProfiledRun run = runWith("braid-no-such-profiler");
  EXPECT_TRUE(run.rec.lines.empty());
  EXPECT_NE(run.log.find("NCCL_PROFILER_PLUGIN=braid-no-such-profiler could not be loaded"), std::string::npos)
      << run.log;
  EXPECT_NE(run.log.find("libnccl-profiler-braid-no-such-profiler.so"), std::string::npos) << run.log;
}

// Two processes with heap buffers above the stage size: the NVLS-style attempt falls back to the FIFO path, and the
// profiler sees the attempt stopped, then the ring/tree operation with the same seqNumber.
TEST(ProfilerPlugin, AFallbackFromTheDirectPathIsReportedWithItsRealAlgorithm) {
  char tmpl[] = "/tmp/braid-profiler-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  std::vector<int> status;
  {
    ScopedEnv p("NCCL_PROFILER_PLUGIN", pluginPath(7).c_str());
    ScopedEnv l("BRAID_TEST_PROFILER_LOG", tmpl);
    ScopedEnv cma("BRAID_CMA", "0");  // private buffers of another process stay out of reach: the ring runs
    status = runProcesses(2, [](int rank, ncclComm_t comm) {
      std::vector<float> a(256 * 1024, static_cast<float>(rank + 1)), b(256 * 1024, -1.0f);  // malloc'd
      if (ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) return 1;
      return b[1000] == 3.0f ? 0 : 2;
    });
  }
  for (int r = 0; r < 2; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
  const Record rec = parse(readFileText(tmpl));
  unlink(tmpl);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<const Ev*> colls = rec.of("Coll", r);
    ASSERT_EQ(colls.size(), 2u) << "the attempt, then the operation";
    EXPECT_EQ(colls[0]->f.at("algo"), "NVLS");
    EXPECT_TRUE(colls[1]->f.at("algo") == "RING" || colls[1]->f.at("algo") == "TREE") << colls[1]->f.at("algo");
    for (const Ev* c : colls) {
      EXPECT_EQ(c->f.at("seq"), "0");
      EXPECT_EQ(c->stops, 1);
    }
  }
}

// An all-to-all that fails after its API event opened (host buffers on a CUDA communicator) closes it: the next
// group's GroupApi is a new one, with its own states.
TEST(ProfilerPlugin, AFailedCallClosesItsApiScope) {
  if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  char tmpl[] = "/tmp/braid-profiler-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  {
    ScopedEnv p("NCCL_PROFILER_PLUGIN", pluginPath(7).c_str());
    ScopedEnv l("BRAID_TEST_PROFILER_LOG", tmpl);
    const Driver& drv = Driver::get();
    std::vector<ncclResult_t> rc = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
      std::vector<float> host(64, 1.0f), back(64, 0.0f);
      EXPECT_NE(ncclAlltoAll(host.data(), back.data(), 32, ncclFloat, comm, stream), ncclSuccess);
      void* buf = drv.alloc(64 * 4);
      drv.copy(buf, host.data(), 64 * 4, stream);
      ncclResult_t st = ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, comm, stream);
      if (st != ncclSuccess) return st;
      drv.copy(back.data(), buf, 64 * 4, stream);
      if (drv.streamSync(stream) != 0) return ncclUnhandledCudaError;
      (void)r;
      return back[63] == 2.0f ? ncclSuccess : ncclInternalError;
    });
    for (int r = 0; r < 2; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  }
  const Record rec = parse(readFileText(tmpl));
  unlink(tmpl);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<const Ev*> groups = rec.of("GroupApi", r);
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0]->stops, 1);
    EXPECT_EQ(groups[1]->states, (std::vector<int>{23, 24}));
    ASSERT_EQ(rec.of("Coll", r).size(), 1u);
    EXPECT_EQ(rec.of("Coll", r)[0]->parent, rec.of("CollApi", r).back()->id);
    EXPECT_EQ(rec.get(rec.of("CollApi", r).back()->parent), groups[1]);
  }
}

// A CUDA communicator on the fake driver: the group's kernels are bracketed by a KernelLaunch event under the
// GroupApi, carrying the stream; the collective's event stops once it is enqueued, and the result is exact.
TEST(ProfilerPlugin, CudaCommunicatorsReportTheKernelLaunch) {
  if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  char tmpl[] = "/tmp/braid-profiler-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  std::vector<void*> streams(2);
  {
    ScopedEnv p("NCCL_PROFILER_PLUGIN", pluginPath(7).c_str());
    ScopedEnv l("BRAID_TEST_PROFILER_LOG", tmpl);
    ScopedEnv a("NCCL_ALGO", "ring");
    const Driver& drv = Driver::get();
    std::vector<ncclResult_t> rc = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
      streams[static_cast<size_t>(r)] = stream;
      const size_t n = 5000;
      std::vector<float> host(n, static_cast<float>(r + 1)), out(n, -1);
      void* buf = drv.alloc(n * 4);
      drv.copy(buf, host.data(), n * 4, stream);
      ncclResult_t st = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream);
      if (st != ncclSuccess) return st;
      drv.copy(out.data(), buf, n * 4, stream);
      if (drv.streamSync(stream) != 0) return ncclUnhandledCudaError;
      return out[n - 1] == 3.0f ? ncclSuccess : ncclInternalError;
    });
    for (int r = 0; r < 2; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  }
  const Record rec = parse(readFileText(tmpl));
  unlink(tmpl);
  checkBalancedAndParented(rec, true);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<const Ev*> launches = rec.of("KernelLaunch", r);
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_EQ(launches[0]->stops, 1);
    const Ev* parent = rec.get(launches[0]->parent);
    ASSERT_NE(parent, nullptr);
    EXPECT_EQ(parent->type, "GroupApi");
    ASSERT_EQ(rec.of("Coll", r).size(), 1u);
    EXPECT_EQ(rec.of("Coll", r)[0]->f.at("algo"), "RING");
  }
}

}  // namespace
}  // namespace braid_test
