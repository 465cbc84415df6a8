// The one reader of launcher variables (src/bootstrap/launch_env.h): which launcher wins, the default port,
// torchrun's port rule, Slurm's first host, NCCL_COMM_ID, and errors that name the variable.
#include "src/bootstrap/launch_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace braid {
namespace {

const char* const kAllVars[] = {"WORLD_SIZE",
                                "RANK",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_RANK",
                                "PMI_SIZE",
                                "PMI_RANK",
                                "SLURM_STEP_NUM_TASKS",
                                "SLURM_PROCID",
                                "SLURM_NTASKS",
                                "LOCAL_RANK",
                                "LOCAL_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE",
                                "MPI_LOCALRANKID",
                                "MPI_LOCALNRANKS",
                                "SLURM_LOCALID",
                                "SLURM_NTASKS_PER_NODE",
                                "MASTER_ADDR",
                                "MASTER_PORT",
                                "TORCHELASTIC_RUN_ID",
                                "SLURM_STEP_NODELIST",
                                "SLURM_JOB_NODELIST",
                                "NCCL_COMM_ID"};

// Clears every launcher variable for the test and restores the process's values after it.
class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kAllVars) {
      const char* old = getenv(v);
      saved_.push_back({v, old != nullptr, old != nullptr ? old : ""});
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const Saved& s : saved_) {
      if (s.set) {
        setenv(s.name, s.value.c_str(), 1);
      } else {
        unsetenv(s.name);
      }
    }
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  struct Saved {
    const char* name;
    bool set;
    std::string value;
  };
  std::vector<Saved> saved_;
};

TEST_F(LaunchEnvTest, NoLauncherIsOneProcessWithTheDefaultPort) {
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk()) << env.status().message();
  EXPECT_EQ(env.value().rank, 0);
  EXPECT_EQ(env.value().nranks, 1);
  EXPECT_EQ(env.value().localSize, 1);
  EXPECT_EQ(env.value().source, "");
  EXPECT_EQ(env.value().masterPort, kDefaultMasterPort);
  EXPECT_EQ(env.value().commId, "127.0.0.1:29500");
  EXPECT_FALSE(env.value().torchrun);
}

TEST_F(LaunchEnvTest, TorchrunVariablesWinOverMpiAndKeepTheLocalRank) {
  set("WORLD_SIZE", "8");
  set("RANK", "5");
  set("LOCAL_RANK", "1");
  set("LOCAL_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("OMPI_COMM_WORLD_RANK", "0");
  set("MASTER_ADDR", "node0");
  set("MASTER_PORT", "1234");
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk()) << env.status().message();
  EXPECT_EQ(env.value().source, "WORLD_SIZE/RANK");
  EXPECT_EQ(env.value().rank, 5);
  EXPECT_EQ(env.value().nranks, 8);
  EXPECT_EQ(env.value().localRank, 1);
  EXPECT_EQ(env.value().localSize, 4);
  EXPECT_EQ(env.value().commId, "node0:1234");  // not torchrun: MASTER_PORT itself
}

TEST_F(LaunchEnvTest, UnderTorchrunBraidListensOneAboveTheStore) {
  set("WORLD_SIZE", "2");
  set("RANK", "1");
  set("TORCHELASTIC_RUN_ID", "job-7");
  set("MASTER_PORT", "29400");
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk()) << env.status().message();
  EXPECT_TRUE(env.value().torchrun);
  EXPECT_EQ(env.value().masterPort, 29401);
  EXPECT_EQ(env.value().commId, "127.0.0.1:29401");
  // No MASTER_PORT: torchrun's default store port, plus one.
  unsetenv("MASTER_PORT");
  env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().masterPort, kDefaultMasterPort + 1);
  // The top port leaves no room above the store: unusable, and said why.
  set("MASTER_PORT", "65535");
  env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().masterPort, 0);
  EXPECT_EQ(env.value().commId, "");
  EXPECT_NE(env.value().rendezvousError.find("MASTER_PORT=65535 under torchrun"), std::string::npos);
}

TEST_F(LaunchEnvTest, NcclCommIdOverridesTheMasterAddress) {
  set("WORLD_SIZE", "2");
  set("RANK", "0");
  set("MASTER_PORT", "not-a-port");
  set("NCCL_COMM_ID", "10.0.0.1:4000");
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk()) << env.status().message();
  EXPECT_EQ(env.value().commId, "10.0.0.1:4000");
  EXPECT_TRUE(env.value().commIdFromUser);
  EXPECT_EQ(env.value().masterPort, 0);  // still unusable for whoever needs the port itself
  EXPECT_NE(env.value().rendezvousError.find("MASTER_PORT='not-a-port' is not a port number"), std::string::npos);
}

TEST_F(LaunchEnvTest, OpenMpiPmiAndSlurmPairs) {
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().source, "OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(env.value().rank, 3);
  EXPECT_EQ(env.value().localRank, 1);
  EXPECT_EQ(env.value().localSize, 0);  // a launcher that does not say
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_RANK");
  set("PMI_SIZE", "3");
  set("PMI_RANK", "2");
  env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().source, "PMI_SIZE/PMI_RANK");
  unsetenv("PMI_SIZE");
  unsetenv("PMI_RANK");
  // srun: the step's task count (a batch script's SLURM_NTASKS alone is not a launch), rank 0 on the first host.
  set("SLURM_NTASKS", "16");
  set("SLURM_PROCID", "0");
  env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().source, "");
  set("SLURM_STEP_NUM_TASKS", "16");
  set("SLURM_STEP_NODELIST", "rack[1-2]-n[07,09],gpu1");
  env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().source, "SLURM_STEP_NUM_TASKS/SLURM_PROCID");
  EXPECT_EQ(env.value().masterAddr, "rack1-n07");
  EXPECT_EQ(env.value().commId, "rack1-n07:29500");
}

TEST_F(LaunchEnvTest, Ipv6MasterAddressIsBracketed) {
  set("WORLD_SIZE", "2");
  set("RANK", "0");
  set("MASTER_ADDR", "fe80::1");
  set("MASTER_PORT", "5000");
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env.value().commId, "[fe80::1]:5000");
}

TEST_F(LaunchEnvTest, MalformedRankOrSizeNamesTheVariable) {
  set("WORLD_SIZE", "two");
  set("RANK", "0");
  Result<LaunchEnv> env = detectLaunchEnv();
  ASSERT_FALSE(env.isOk());
  EXPECT_EQ(env.status().code(), Code::kInvalidArgument);
  EXPECT_NE(env.status().message().find("WORLD_SIZE='two' is not a positive integer"), std::string::npos);
  set("WORLD_SIZE", "2");
  set("RANK", "2");
  env = detectLaunchEnv();
  ASSERT_FALSE(env.isOk());
  EXPECT_NE(env.status().message().find("RANK='2' is not a rank below WORLD_SIZE=2"), std::string::npos);
  set("RANK", "-1");
  EXPECT_FALSE(detectLaunchEnv().isOk());
  set("RANK", "+1");
  EXPECT_FALSE(detectLaunchEnv().isOk());
  set("WORLD_SIZE", "0");
  set("RANK", "0");
  EXPECT_FALSE(detectLaunchEnv().isOk());
}

TEST(FirstSlurmHost, TakesTheFirstValueOfEachBracketGroup) {
  EXPECT_EQ(firstSlurmHost("node1"), "node1");
  EXPECT_EQ(firstSlurmHost("a,b"), "a");
  EXPECT_EQ(firstSlurmHost("n[3-5]"), "n3");
  EXPECT_EQ(firstSlurmHost("n[07,09]x[1-2]"), "n07x1");
  EXPECT_EQ(firstSlurmHost("n[1"), "n1");
  EXPECT_EQ(firstSlurmHost(""), "");
}

}  // namespace
}  // namespace braid
