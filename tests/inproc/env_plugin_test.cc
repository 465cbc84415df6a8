// NCCL_ENV_PLUGIN (include/nccl_env.h): the sample plugin (tests/env/sample_env.c) answers for the environment in
// braid-info's knob list, the parameter API and a communicator's init; a plugin that cannot be used makes init fail
// by name. The plugin loads once per process, so every case runs programs of its own (braid-info -c, and the one-rank
// tests/env/env_probe.c), with the environment each case sets.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ProgramRun {
  int rc = -1;
  std::string out;
};

// Runs `program` with the test's environment plus `vars` (NAME=VALUE; NAME= alone unsets NAME), with the sample
// plugins on the library path and no NCCL_* setting of the test's own environment leaking in.
ProgramRun runWith(const std::string& program, const std::vector<std::string>& vars) {
  std::string cmd = "env";
  for (const char* name : {"NCCL_ENV_PLUGIN", "NCCL_CONF_FILE", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_BUFFSIZE",
                           "NCCL_LL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "BRAID_CPU_NCHANNELS", "BRAID_SAMPLE_ENV",
                           "BRAID_SAMPLE_ENV_LOG", "BRAID_SAMPLE_ENV_FAIL"}) {
    cmd += std::string(" -u ") + name;
  }
  for (const std::string& v : vars) {  // env takes its -u options before the assignments
    if (v.back() == '=') cmd += " -u " + v.substr(0, v.size() - 1);
  }
  const char* ld = getenv("LD_LIBRARY_PATH");
  cmd += std::string(" LD_LIBRARY_PATH=") + BRAID_ENV_PLUGIN_DIR + (ld != nullptr ? std::string(":") + ld : "");
  for (const std::string& v : vars) {
    if (v.back() != '=') cmd += " '" + v + "'";
  }
  cmd += " " + program + " 2>&1";
  ProgramRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string knobs(const std::vector<std::string>& vars) {
  return runWith(std::string(BRAID_INFO_BIN) + " -c", vars).out;
}

std::string fileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class EnvPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid_env_plugin_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    conf_ = dir_ + "/nccl.conf";
    log_ = dir_ + "/calls.log";
    std::ofstream(conf_) << "NCCL_LL_BUFFSIZE=65536\nNCCL_BUFFSIZE=8388608\n";
  }
  void TearDown() override {
    unlink(conf_.c_str());
    unlink(log_.c_str());
    rmdir(dir_.c_str());
  }
  // The variables of a run with the sample plugin `name` (its table `table`), the test's file and call log.
  std::vector<std::string> with(const std::string& name, const std::string& table) const {
    return {"NCCL_ENV_PLUGIN=" + name, "BRAID_SAMPLE_ENV=" + table, "BRAID_SAMPLE_ENV_LOG=" + log_,
            "NCCL_CONF_FILE=" + conf_, "HOME=" + dir_};
  }
  std::string dir_, conf_, log_;
};

TEST_F(EnvPlugin, AnswersForEveryKnobBeforeTheEnvironmentAndTheFiles) {
  std::vector<std::string> vars = with("braidsample", "NCCL_BUFFSIZE=1048576;BRAID_CPU_NCHANNELS=1");
  vars.push_back("BRAID_CPU_NCHANNELS=3");  // the plugin's 1 wins
  vars.push_back("NCCL_MIN_NCHANNELS=3");   // the plugin has none: the environment's
  const std::string out = knobs(vars);
  EXPECT_NE(out.find("NCCL_BUFFSIZE=1048576 (env plugin braidsample (v2))"), std::string::npos) << out;
  EXPECT_NE(out.find("BRAID_CPU_NCHANNELS=1 (env plugin braidsample (v2))"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_LL_BUFFSIZE=65536 (file " + conf_ + ")"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_MIN_NCHANNELS=3 (environment)"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_ENV_PLUGIN=braidsample (environment)"), std::string::npos) << out;
  const std::string calls = fileText(log_);
  EXPECT_EQ(calls.rfind("init 2.32.3\n", 0), 0u) << calls;  // init first, with braid's NCCL API version
  EXPECT_NE(calls.find("get NCCL_BUFFSIZE\n"), std::string::npos) << calls;
  EXPECT_NE(calls.find("get BRAID_TIMEOUT\n"), std::string::npos) << calls;  // braid's own knobs too
  EXPECT_EQ(calls.find("get NCCL_ENV_PLUGIN"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("get NCCL_CONF_FILE"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("init", 1), std::string::npos) << "init once: " << calls;
  const size_t fin = calls.find("finalize\n");
  EXPECT_NE(fin, std::string::npos) << calls;
  EXPECT_EQ(fin + 9, calls.size()) << "finalize last, at exit: " << calls;
}

TEST_F(EnvPlugin, VersionOneTablesLoadToo) {
  const std::string out = knobs(with("braidsample1", "NCCL_BUFFSIZE=2097152"));
  EXPECT_NE(out.find("NCCL_BUFFSIZE=2097152 (env plugin braidsample1 (v1))"), std::string::npos) << out;
  EXPECT_EQ(fileText(log_).rfind("init 2.32.3\n", 0), 0u);
}

TEST_F(EnvPlugin, NoneOrNoLibraryLeavesTheEnvironmentInCharge) {
  std::vector<std::string> vars = with("none", "NCCL_BUFFSIZE=1048576");
  vars.push_back("NCCL_BUFFSIZE=4194304");
  std::string out = knobs(vars);
  EXPECT_NE(out.find("NCCL_BUFFSIZE=4194304 (environment)"), std::string::npos) << out;
  EXPECT_EQ(fileText(log_), "") << "'none' loads nothing";
  vars[0] = "NCCL_ENV_PLUGIN=";  // unset: libnccl-env.so, where the loader finds one
  void* site = dlopen("libnccl-env.so", RTLD_NOW | RTLD_LOCAL);
  if (site != nullptr) {
    dlclose(site);
    GTEST_SKIP() << "this machine has a libnccl-env.so on the loader's path: the unset case would load it";
  }
  out = knobs(vars);
  EXPECT_NE(out.find("NCCL_BUFFSIZE=4194304 (environment)"), std::string::npos) << out;
  EXPECT_EQ(fileText(log_), "");
}

// End to end through the public API: the parameter API reads the plugin's value, NCCL_DEBUG and NCCL_DEBUG_SUBSYS
// come from it (so the logger's own settings are read through the plugin, whose init logs through the logger: its
// line is printed once the knob is settled), and a communicator runs.
TEST_F(EnvPlugin, ThePublicApiAndTheLoggerReadThroughIt) {
  const ProgramRun r = runWith(BRAID_ENV_PROBE_BIN,
                               with("braidsample", "NCCL_BUFFSIZE=1048576;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=INIT,ENV"));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("param NCCL_BUFFSIZE=1048576 (rc 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL INFO braidsample env plugin: 3 variable(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL INFO ENV/Plugin: using env plugin braidsample (v2) from libnccl-env-braidsample.so"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("all-reduce ok"), std::string::npos) << r.out;
}

// A plugin NCCL_ENV_PLUGIN names that cannot be used: every communicator's init fails, naming the setting, the
// reason and the remedy (knobs are still read, from the environment).
TEST_F(EnvPlugin, OneThatCannotBeUsedFailsInitByName) {
  struct Case {
    std::string plugin;
    const char* fail;
    std::string why;
  } cases[] = {
      {"nosuch", nullptr, "libnccl-env-nosuch.so: libnccl-env-nosuch.so: cannot open shared object file"},
      {"braidnone", nullptr, "exports neither ncclEnvPlugin_v2 nor ncclEnvPlugin_v1"},
      {"braidsample", "BRAID_SAMPLE_ENV_FAIL=1", "libnccl-env-braidsample.so: init returned 3"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> vars = with(c.plugin, "NCCL_BUFFSIZE=1048576");
    vars.push_back("NCCL_BUFFSIZE=4194304");
    if (c.fail != nullptr) vars.push_back(c.fail);
    const ProgramRun r = runWith(BRAID_ENV_PROBE_BIN, vars);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("param NCCL_BUFFSIZE=4194304 (rc 0)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("init failed: 4: ncclCommInitRank: NCCL_ENV_PLUGIN=\"" + c.plugin +
                         "\" (from environment) is not used: "),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(c.why), std::string::npos) << c.plugin << ": " << r.out;
    EXPECT_NE(r.out.find("set NCCL_ENV_PLUGIN=none to run without one"), std::string::npos) << r.out;
  }
}

}  // namespace
