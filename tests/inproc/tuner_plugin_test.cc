// Tuner plugins (include/nccl_tuner.h): the sample plugin of tests/tuner, built for ABI v3, v5 and v7, loaded by
// NCCL_TUNER_PLUGIN into communicators of 4 threads. What it changes is what runs (the TUNING line names the
// choice), results stay exact, and a plugin that fails, asks for what braid cannot run, or is missing leaves the
// model's choice with a WARN.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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
constexpr size_t kCount = 256 * 1024;  // 1 MiB of floats

std::string pluginPath(int abi) {
  return std::string(BRAID_TUNER_PLUGIN_DIR) + "/libnccl-tuner-braidsample" + std::to_string(abi) + ".so";
}

// An all-reduce (sum of float) on every rank, checked exactly.
void allReduceExact() {
  std::vector<ncclResult_t> rc = runThreads(kRanks, [](int rank, ncclComm_t comm) -> ncclResult_t {
    std::vector<float> send(kCount), recv(kCount, -1.0f);
    for (size_t i = 0; i < kCount; ++i) storeValue(ncclFloat, send.data(), i, inputValue(ncclSum, ncclFloat, rank, i));
    ncclResult_t r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, comm, nullptr);
    if (r != ncclSuccess) return r;
    const size_t wrong = countWrong(ncclFloat, recv.data(), kCount,
                                    [](size_t i) { return expectedReduce(ncclSum, ncclFloat, kRanks, i, 0); });
    return wrong == 0 ? ncclSuccess : ncclInternalError;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// The algorithm/protocol the TUNING line of the all-reduce names ("Tree/Simple"), from the first such line.
std::string chosenPair(const std::string& log, size_t bytes = kCount * sizeof(float)) {
  const std::string key = "allreduce " + std::to_string(bytes) + " bytes";
  const size_t at = log.find(key);
  if (at == std::string::npos) return "";
  const size_t arrow = log.find(" -> ", at);
  const size_t end = log.find(' ', arrow + 4);
  return arrow == std::string::npos ? "" : log.substr(arrow + 4, end - arrow - 4);
}

struct TunedRun {
  std::string log;     // braid's INFO/WARN lines
  std::string plugin;  // the plugin's own record
};

TunedRun runWith(const char* plugin, const char* force, const char* extraName = nullptr,
                 const char* extraValue = nullptr) {
  char tmpl[] = "/tmp/braid-tuner-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  TunedRun out;
  {
    ScopedEnv p("NCCL_TUNER_PLUGIN", plugin);
    ScopedEnv f("BRAID_TEST_TUNER_FORCE", force);
    ScopedEnv l("BRAID_TEST_TUNER_LOG", tmpl);
    ScopedEnv x(extraName != nullptr ? extraName : "BRAID_TEST_TUNER_UNUSED", extraValue);
    LogCapture cap("INIT,TUNING");
    allReduceExact();
    out.log = cap.textOf(getpid());
  }
  out.plugin = readFileText(tmpl);
  unlink(tmpl);
  return out;
}

TEST(TunerPlugin, V7ForcesTheTreeItIsAskedForAndTheResultStaysExact) {
  const TunedRun model = runWith("none", nullptr);
  const std::string modelPair = chosenPair(model.log);
  ASSERT_FALSE(modelPair.empty()) << model.log;
  ASSERT_NE(modelPair, "Tree/Simple") << "the test needs a size where the model picks something else";
  const TunedRun forced = runWith(pluginPath(7).c_str(), "tree/simple");
  EXPECT_EQ(chosenPair(forced.log), "Tree/Simple") << forced.log;
  EXPECT_NE(forced.log.find("tuner plugin braid-sample-v7"), std::string::npos) << forced.log;
  // Every rank initialised and finalised its own context, with NCCL's ABI (v7 taken over the v3 table it also has).
  EXPECT_EQ(occurrences(forced.plugin, "init v7 4 1\n"), 4u) << forced.plugin;
  EXPECT_EQ(occurrences(forced.plugin, "finalize\n"), 4u) << forced.plugin;
  // The table offered ring and tree at the model's price, and PAT (which braid does not run) as -1.
  const std::string coll = "coll 4 " + std::to_string(kCount * sizeof(float)) + " ";
  const size_t at = forced.plugin.find(coll);
  ASSERT_NE(at, std::string::npos) << forced.plugin;
  double ring = 0, tree = 0, pat = 0;
  ASSERT_EQ(sscanf(forced.plugin.c_str() + at + coll.size(), "%lf %lf %lf", &ring, &tree, &pat), 3);
  EXPECT_GT(ring, 0);
  EXPECT_GT(tree, 0);
  EXPECT_EQ(pat, -1);
}

TEST(TunerPlugin, APluginThatChangesNothingKeepsTheModelsChoice) {
  const std::string modelPair = chosenPair(runWith("none", nullptr).log);
  for (int abi : {3, 5, 7}) {
    const TunedRun r = runWith(pluginPath(abi).c_str(), nullptr);
    EXPECT_EQ(chosenPair(r.log), modelPair) << "v" << abi << "\n" << r.log;
    EXPECT_EQ(occurrences(r.plugin, "init v" + std::to_string(abi) + " 4 1\n"), 4u) << r.plugin;
  }
}

TEST(TunerPlugin, V3AndV5ForceRingLlAndAChannelCount) {
  // 4 channels on the communicator, so the plugin's 3 is a real choice (the size rule would take 1 here).
  ScopedEnv channels("NCCL_MIN_NCHANNELS", "4");
  for (int abi : {3, 5}) {
    const TunedRun r = runWith(pluginPath(abi).c_str(), "ring/ll", "BRAID_TEST_TUNER_CHANNELS", "3");
    EXPECT_EQ(chosenPair(r.log), "Ring/LL") << "v" << abi << "\n" << r.log;
    EXPECT_NE(r.log.find("host memory, 4 channels"), std::string::npos) << r.log;
  }
}

TEST(TunerPlugin, APairBraidCannotRunIsIgnoredWithAWarning) {
  const std::string modelPair = chosenPair(runWith("none", nullptr).log);
  const TunedRun r = runWith(pluginPath(7).c_str(), "pat/simple");
  EXPECT_EQ(chosenPair(r.log), modelPair) << r.log;
  EXPECT_NE(r.log.find("set PAT/Simple to 0.0 for allreduce, but braid cannot run that pair"), std::string::npos)
      << r.log;
}

TEST(TunerPlugin, AFailingPluginLeavesTheModelsChoice) {
  const std::string modelPair = chosenPair(runWith("none", nullptr).log);
  const TunedRun r = runWith(pluginPath(7).c_str(), "tree/simple", "BRAID_TEST_TUNER_FAIL", "1");
  EXPECT_EQ(chosenPair(r.log), modelPair) << r.log;
  EXPECT_NE(r.log.find("getCollInfo(allreduce"), std::string::npos) << r.log;
  const TunedRun i = runWith(pluginPath(7).c_str(), "tree/simple", "BRAID_TEST_TUNER_INIT_FAIL", "1");
  EXPECT_EQ(chosenPair(i.log), modelPair) << i.log;
  EXPECT_NE(i.log.find("init returned 3"), std::string::npos) << i.log;
}

// The plugin's init fails on one rank only: no rank may follow it (the others would choose differently and hang).
TEST(TunerPlugin, APluginOnlySomeRanksLoadedIsUsedByNone) {
  const std::string modelPair = chosenPair(runWith("none", nullptr).log);
  const TunedRun r = runWith(pluginPath(7).c_str(), "tree/simple", "BRAID_TEST_TUNER_INIT_FAIL_NTH", "2");
  EXPECT_EQ(chosenPair(r.log), modelPair) << r.log;
  EXPECT_EQ(r.log.find("tuner plugin braid-sample-v7"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("no rank uses a tuner on this communicator"), std::string::npos) << r.log;
  EXPECT_EQ(occurrences(r.plugin, "init v7 4 1\n"), 3u) << r.plugin;
}

// The plugin is asked again in every group, ungrouped calls included, and what it forces runs: a grouped
// all-reduce, then the same one ungrouped, each forced onto the NVLS-style path. Regression: the ungrouped call's
// shortcut to that path (Communicator::launchLone) asked the selector before the group began, so it reused the
// grouped call's answer and the plugin was asked once for the two calls.
TEST(TunerPlugin, EveryGroupAsksAgainUngroupedCallsToo) {
  char tmpl[] = "/tmp/braid-tuner-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  std::string log;
  {
    ScopedEnv p("NCCL_TUNER_PLUGIN", pluginPath(7).c_str());
    ScopedEnv f("BRAID_TEST_TUNER_FORCE", "nvls/simple");
    ScopedEnv l("BRAID_TEST_TUNER_LOG", tmpl);
    LogCapture cap("INIT,TUNING");
    std::vector<ncclResult_t> rc = runThreads(kRanks, [](int rank, ncclComm_t comm) -> ncclResult_t {
      std::vector<float> send(kCount), recv(kCount);
      for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<float>(rank + 1);
      for (bool grouped : {true, false}) {
        std::fill(recv.begin(), recv.end(), -1.0f);
        if (grouped) ncclGroupStart();
        const ncclResult_t r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, comm, nullptr);
        const ncclResult_t g = grouped ? ncclGroupEnd() : ncclSuccess;
        if (r != ncclSuccess || g != ncclSuccess) return r != ncclSuccess ? r : g;
        for (size_t i = 0; i < kCount; ++i) {
          if (recv[i] != static_cast<float>(kRanks * (kRanks + 1) / 2)) return ncclInternalError;
        }
      }
      return ncclSuccess;
    });
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
    log = cap.textOf(getpid());
  }
  const std::string plugin = readFileText(tmpl);
  unlink(tmpl);
  EXPECT_EQ(chosenPair(log), "NVLS/Simple") << log;
  EXPECT_EQ(occurrences(plugin, "coll 4 " + std::to_string(kCount * sizeof(float)) + " "), 2u * kRanks) << plugin;
}

TEST(TunerPlugin, AMissingPluginIsNamedAndTheCommunicatorWorks) {
  const TunedRun r = runWith("braid-no-such-tuner", "tree/simple");
  EXPECT_NE(r.log.find("NCCL_TUNER_PLUGIN=braid-no-such-tuner could not be loaded (tried "
                       "libnccl-tuner-braid-no-such-tuner.so, braid-no-such-tuner)"),
            std::string::npos)
      << r.log;
  EXPECT_TRUE(r.plugin.empty());
}

// A v5+ plugin may retune NCCL's model itself, by editing the constants its init receives (here: every ring
// protocol's base latency made huge). A CUDA communicator whose topology shows its GPUs rebuilds NCCL's GPU model
// from them, so the choice moves off the ring; v3 gets no constants, and a plugin that edits none changes nothing.
TEST(TunerPlugin, EditedConstantsRebuildNcclsGpuModel) {
  if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  BRAID_REQUIRE_FAKE("the fake GPUs' topology file");
  constexpr int kGpus = 3;
  constexpr size_t kFloats = 1 << 20;
  const std::string topo = writeFakeGpuTopology(false);
  ScopedEnv file("NCCL_TOPO_FILE", topo.c_str());
  auto run = [&](const std::string& plugin, const char* ringLatency) {
    ScopedEnv p("NCCL_TUNER_PLUGIN", plugin.c_str());
    ScopedEnv l("BRAID_TEST_TUNER_RING_LATENCY", ringLatency);
    LogCapture cap("INIT,TUNING");
    std::vector<ncclResult_t> rc = runCudaRanks(kGpus, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      return checkedAllReduce(comm, stream, std::vector<float>(kFloats, static_cast<float>(r + 1)),
                              [](size_t) { return 6.0f; });
    });
    for (int r = 0; r < kGpus; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << plugin << " rank " << r;
    return cap.textOf(getpid());
  };
  const size_t bytes = kFloats * sizeof(float);
  const std::string model = chosenPair(run("none", nullptr), bytes);
  ASSERT_EQ(model.substr(0, 5), "Ring/") << "the test needs a size where NCCL's model picks the ring";
  for (int abi : {5, 7}) {
    const std::string log = run(pluginPath(abi), "1000000");
    const std::string pair = chosenPair(log, bytes);
    EXPECT_FALSE(pair.empty()) << log;
    EXPECT_NE(pair.substr(0, 5), "Ring/") << "v" << abi << "\n" << log;
    EXPECT_EQ(occurrences(log, "NCCL's GPU model rebuilt from the constants braid-sample-v" + std::to_string(abi)),
              static_cast<size_t>(kGpus))
        << log;
    // Without edits the plugin keeps the model's choice, and nothing is rebuilt.
    const std::string same = run(pluginPath(abi), nullptr);
    EXPECT_EQ(chosenPair(same, bytes), model) << same;
    EXPECT_EQ(same.find("GPU model rebuilt"), std::string::npos) << same;
  }
  EXPECT_EQ(chosenPair(run(pluginPath(3), "1000000"), bytes), model);  // v3 is handed no constants
  // Edits on one rank only: no rank uses them (ranks pricing differently would choose differently and hang).
  {
    ScopedEnv nth("BRAID_TEST_TUNER_EDIT_NTH", "2");
    const std::string log = run(pluginPath(7), "1000000");
    EXPECT_EQ(chosenPair(log, bytes), model) << log;
    EXPECT_EQ(occurrences(log, "edited NCCL's GPU-model constants, differently from another rank"), 1u) << log;
    EXPECT_EQ(log.find("GPU model rebuilt"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace braid_test
