// Thread placement without binding (src/common/numa.h): moveThisThreadTo puts the calling thread on a CPU and
// leaves its affinity mask as it was.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <vector>

#include "src/common/numa.h"

namespace braid {
namespace {

std::vector<int> cpusOf(const cpu_set_t& set) {
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

cpu_set_t threadMask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(set), &set), 0);
  return set;
}

TEST(MoveThisThreadTo, RunsThereAndKeepsTheMask) {
  const cpu_set_t before = threadMask();
  const std::vector<int> cpus = cpusOf(before);
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs in this thread's mask, has " << cpus.size();
  for (int pass = 0; pass < 2; ++pass) {
    for (int c : cpus) {
      ASSERT_TRUE(moveThisThreadTo(c)) << "CPU " << c;
      // The kernel migrates the calling thread before the narrowing call returns; nothing else runs in this test
      // process that could take it back in the few nanoseconds before the check.
      EXPECT_EQ(sched_getcpu(), c);
      const cpu_set_t after = threadMask();
      EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the mask changed after moving to CPU " << c;
    }
  }
}

TEST(MoveThisThreadTo, RefusesACpuOutsideTheMask) {
  const cpu_set_t before = threadMask();
  const std::vector<int> cpus = cpusOf(before);
  EXPECT_FALSE(moveThisThreadTo(-1));
  EXPECT_FALSE(moveThisThreadTo(CPU_SETSIZE));
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs to restrict the mask to one";
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[0], &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  EXPECT_FALSE(moveThisThreadTo(cpus[1]));
  const cpu_set_t still = threadMask();
  EXPECT_TRUE(CPU_EQUAL(&one, &still)) << "a refused move changed the mask";
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
}

}  // namespace
}  // namespace braid
