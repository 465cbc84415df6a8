// The flight recorder end to end: ranks (threads and processes) that hang write their dumps at the timeout, a
// stopped rank is named by the others, SIGUSR1 (braid-info --dump) dumps a running process without disturbing its
// collectives, and braid-info --analyze names the rank that never reached the collective the others wait in.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/harness.h"
#include "tests/common/scoped_env.h"

namespace braid_test {
namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/braid-flight-XXXXXX";
    path = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    if (path.empty()) return;
    DIR* d = opendir(path.c_str());
    while (d != nullptr) {
      dirent* e = readdir(d);
      if (e == nullptr) break;
      if (e->d_name[0] != '.') unlink((path + "/" + e->d_name).c_str());
    }
    if (d != nullptr) closedir(d);
    rmdir(path.c_str());
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

// Runs braid-info with `args`; returns its standard output and error.
std::string braidInfo(const std::string& args, int* rc = nullptr) {
  const std::string cmd = std::string(BRAID_INFO_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

bool waitFor(const std::function<bool()>& cond, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// A dump of process `pid` that records an error for its communicator.
bool dumpHasError(const TempDir& dir, pid_t pid) {
  const std::string text = readFileText(dir.file("fr-" + std::to_string(pid) + ".json"));
  return text.find("\"error\": \"") != std::string::npos;
}

// Each job's ranks dump to their own directory.
class FlightRecorderJob : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path.empty());
    file = std::make_unique<ScopedEnv>("BRAID_FLIGHT_RECORDER_FILE", dir.file("fr-%p.json").c_str());
  }
  TempDir dir;
  std::unique_ptr<ScopedEnv> file;  // BRAID_FLIGHT_RECORDER_FILE, set once dir exists
};

ncclResult_t allReduceOnes(ncclComm_t comm, int nranks, size_t count, bool* wrong) {
  std::vector<float> x(count, 1.0f);
  const ncclResult_t r = ncclAllReduce(x.data(), x.data(), count, ncclFloat, ncclSum, comm, nullptr);
  for (float v : x) *wrong = *wrong || (r == ncclSuccess && v != static_cast<float>(nranks));
  return r;
}

TEST_F(FlightRecorderJob, ThreadRanksDumpAtTheTimeoutAndTheReportNamesTheRankThatNeverCame) {
  ScopedEnv timeout("BRAID_TIMEOUT", "2");
  const int n = 4;
  std::atomic<int> failed{0};
  bool wrong = false;
  auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
    bool w = false;
    for (int i = 0; i < 3; ++i) {
      const ncclResult_t r = allReduceOnes(comm, n, 1024, &w);
      if (r != ncclSuccess) return r;
    }
    if (w) wrong = true;
    if (rank == 3) {  // never calls collective 3; stays alive until the others gave up on it
      waitFor([&] { return failed.load() == n - 1; }, 60);
      return ncclSuccess;
    }
    const ncclResult_t r = allReduceOnes(comm, n, 1024, &w);
    failed.fetch_add(1);
    return r;
  });
  EXPECT_FALSE(wrong);
  for (int r = 0; r < n - 1; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], ncclRemoteError) << "rank " << r;
  EXPECT_EQ(results[3], ncclSuccess);
  const std::string dump = readFileText(dir.file("fr-" + std::to_string(getpid()) + ".json"));
  EXPECT_NE(dump.find("\"braid_flight_recorder\": 1"), std::string::npos) << dump.substr(0, 400);
  int rc = -1;
  const std::string report = braidInfo("--analyze " + dir.path, &rc);
  EXPECT_EQ(rc, 0) << report;
  EXPECT_NE(report.find("ranks wait in collective 3: ncclAllReduce(count 1024, float, sum)"), std::string::npos)
      << report;
  EXPECT_NE(report.find("never reached collective 3: rank 3\n"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 3 idle after collective 2"), std::string::npos) << report;
  EXPECT_NE(report.find("in it or before it: ranks 0,1,2\n"), std::string::npos) << report;
}

// Regression (issue 17): a rank stopped with SIGSTOP was named by 6 of 24 survivors (the others named the neighbour
// they waited on). Every survivor on its host now names it, and their dumps say where they waited.
TEST_F(FlightRecorderJob, AStoppedRankIsNamedByEveryOtherRank) {
  ScopedEnv timeout("BRAID_TIMEOUT", "3");
  const int n = 4;
  std::vector<pid_t> pids;
  auto status = runProcesses(
      n,
      [&](int rank, ncclComm_t comm) {
        bool wrong = false;
        for (int i = 0; i < 3; ++i) {
          if (allReduceOnes(comm, n, 1 << 16, &wrong) != ncclSuccess || wrong) return 43;
        }
        if (rank == 2) raise(SIGSTOP);
        const ncclResult_t r = allReduceOnes(comm, n, 1 << 16, &wrong);
        const std::string text = ncclGetLastError(comm);
        fprintf(stderr, "rank %d: %s\n", rank, text.c_str());
        const bool named =
            text.find("peer rank 2 (pid ") != std::string::npos && text.find("is stopped") != std::string::npos;
        return r == ncclRemoteError && named ? 42 : 44;
      },
      90, &pids,
      [&](const std::vector<pid_t>& p) {
        // Once every survivor has dumped its failure, the stopped rank goes.
        waitFor(
            [&] {
              for (int r = 0; r < n; ++r) {
                if (r != 2 && !dumpHasError(dir, p[static_cast<size_t>(r)])) return false;
              }
              return true;
            },
            60);
        kill(p[2], SIGKILL);
      });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(status[static_cast<size_t>(r)], r == 2 ? 128 + SIGKILL : 42) << "rank " << r;
  }
  const std::string report = braidInfo("--analyze " + dir.path);
  EXPECT_NE(report.find("ranks wait in collective 3"), std::string::npos) << report;
  EXPECT_NE(report.find("in it or before it: ranks 0,1,3\n"), std::string::npos) << report;
  EXPECT_NE(report.find("no dump from rank 2: stopped"), std::string::npos) << report;
  EXPECT_NE(report.find("is stopped (process state T"), std::string::npos) << report;
}

// braid-info --dump signals a running job: its collectives go on with correct results; later, when one rank idles
// instead of calling the next collective, the others time out and dump, --dump fetches the idle rank's record, and
// the report names it.
TEST_F(FlightRecorderJob, BraidInfoDumpFetchesARunningRanksRecordAndTheReportNamesTheIdleRank) {
  ScopedEnv timeout("BRAID_TIMEOUT", "3");
  const int n = 3;
  const std::string release = dir.file("release");
  auto ready = [&](int rank) { return dir.file("ready." + std::to_string(rank)); };
  auto idle = [&](int rank) { return dir.file("idle." + std::to_string(rank)); };
  std::vector<pid_t> pids;
  std::string dumpOutput;
  int dumpRc = -1, signalled = 0;
  auto status = runProcesses(
      n,
      [&](int rank, ncclComm_t comm) {
        fclose(fopen(ready(rank).c_str(), "w"));
        bool wrong = false;
        for (int i = 0; i < 300; ++i) {
          if (allReduceOnes(comm, n, 1 << 14, &wrong) != ncclSuccess || wrong) return 43;
        }
        if (rank == 2) {
          fclose(fopen(idle(rank).c_str(), "w"));
          return waitFor([&] { return access(release.c_str(), F_OK) == 0; }, 60) ? 0 : 45;
        }
        const ncclResult_t r = allReduceOnes(comm, n, 1 << 14, &wrong);
        return r == ncclRemoteError ? 42 : 44;
      },
      90, &pids,
      [&](const std::vector<pid_t>& p) {
        // The handler exists once a rank's communicator does (before, SIGUSR1 would kill it).
        waitFor(
            [&] {
              return access(ready(0).c_str(), F_OK) == 0 && access(ready(1).c_str(), F_OK) == 0 &&
                     access(ready(2).c_str(), F_OK) == 0;
            },
            30);
        while (access(idle(2).c_str(), F_OK) != 0 && signalled < 2000) {
          for (pid_t pid : p) kill(pid, SIGUSR1);
          ++signalled;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        waitFor([&] { return dumpHasError(dir, p[0]) && dumpHasError(dir, p[1]); }, 60);
        dumpOutput = braidInfo("--dump " + std::to_string(p[2]), &dumpRc);
        fclose(fopen(release.c_str(), "w"));
      });
  EXPECT_EQ(status[0], 42);
  EXPECT_EQ(status[1], 42);
  EXPECT_EQ(status[2], 0);
  EXPECT_GT(signalled, 0);
  EXPECT_EQ(dumpRc, 0) << dumpOutput;
  EXPECT_NE(dumpOutput.find("pid " + std::to_string(pids[2]) + ": wrote " + dir.file("fr-")), std::string::npos)
      << dumpOutput;
  for (int r = 0; r < n; ++r) {
    unlink(ready(r).c_str());
    unlink(idle(r).c_str());
  }
  unlink(release.c_str());
  const std::string report = braidInfo("--analyze " + dir.path);
  EXPECT_NE(report.find("ranks wait in collective 300"), std::string::npos) << report;
  EXPECT_NE(report.find("never reached collective 300: rank 2\n"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 idle after collective 299"), std::string::npos) << report;
  EXPECT_NE(report.find("in it or before it: ranks 0,1\n"), std::string::npos) << report;
}

TEST(FlightRecorderTool, BraidInfoDumpRefusesProcessesItWouldKill) {
  // This test's own process has no BRAID_FLIGHT_RECORDER_FILE; a child without a SIGUSR1 handler must not be
  // signalled at all.
  pid_t child = fork();
  if (child == 0) {
    setenv("BRAID_FLIGHT_RECORDER_FILE", "/tmp/never-written-%p.json", 1);
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int rc = -1;
  const std::string out = braidInfo("--dump " + std::to_string(child), &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("does not catch SIGUSR1"), std::string::npos) << out;
  EXPECT_EQ(kill(child, 0), 0);  // still alive
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_NE(braidInfo("--dump notapid").find("\"notapid\" is not a process id"), std::string::npos);
  EXPECT_NE(braidInfo("--dump " + std::to_string(getpid()))
                .find("BRAID_FLIGHT_RECORDER_FILE is not set in its environment (nor here)"),
            std::string::npos);
}

}  // namespace
}  // namespace braid_test
