// src/common's small primitives on the operation path: Status (one pointer, null when OK), SpinLock and
// threadScratch.
#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

#include "src/common/spin_lock.h"
#include "src/common/status.h"
#include "src/common/thread_scratch.h"

namespace braid {
namespace {

TEST(Status, OkIsOnePointerAndAFailureKeepsItsCodeAndMessage) {
  static_assert(sizeof(Status) == sizeof(void*), "an OK status must cost no string work");
  Status ok;
  EXPECT_TRUE(ok.isOk());
  EXPECT_EQ(ok.code(), Code::kOk);
  EXPECT_EQ(ok.message(), "");
  EXPECT_TRUE(Status(Code::kOk, "ignored").isOk());
  Status bad = invalidArgument("count=%d is negative", -1);
  EXPECT_FALSE(bad.isOk());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.message(), "count=-1 is negative");
  EXPECT_EQ(Status(Code::kInProgress, "").code(), Code::kInProgress);
}

TEST(Status, CopiesAreIndependentAndMovesLeaveOk) {
  Status a = invalidUsage("first");
  Status b = a;  // a copy owns its own message
  a = systemError("second");
  EXPECT_EQ(b.code(), Code::kInvalidUsage);
  EXPECT_EQ(b.message(), "first");
  EXPECT_EQ(a.message(), "second");
  Status c = std::move(a);
  EXPECT_TRUE(a.isOk());  // NOLINT(bugprone-use-after-move): moved-from is OK, by contract of this class
  EXPECT_EQ(c.message(), "second");
  c = c;  // self-assignment keeps it
  EXPECT_EQ(c.message(), "second");
  c = std::move(b);
  EXPECT_EQ(c.message(), "first");
  c = Status::ok();
  EXPECT_TRUE(c.isOk());
  Status d = internalError("third").withContext("while testing");
  EXPECT_EQ(d.code(), Code::kInternalError);
  EXPECT_EQ(d.message(), "while testing: third");
  EXPECT_TRUE(Status::ok().withContext("nothing").isOk());
}

TEST(SpinLock, ExcludesUnderContention) {
  SpinLock mu;
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        std::lock_guard<SpinLock> lock(mu);
        ++counter;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 4 * 20000);
}

struct ScratchTag {};
std::vector<int>& scratch() {
  return threadScratch<std::vector<int>, ScratchTag>();
}

TEST(ThreadScratch, EachThreadHasItsOwnObjectKeptBetweenCalls) {
  std::vector<int>& mine = scratch();
  mine.assign(3, 7);
  EXPECT_EQ(&scratch(), &mine);
  EXPECT_EQ(scratch().size(), 3u);
  const std::vector<int>* other = nullptr;
  size_t otherSize = 99;
  std::thread([&] {
    other = &scratch();
    otherSize = other->size();
  }).join();
  EXPECT_NE(other, &mine);
  EXPECT_EQ(otherSize, 0u);
}

}  // namespace
}  // namespace braid
