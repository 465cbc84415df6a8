// The one wait loop (src/common/wait.h): spin first, then the caller's sleep; abort ends a wait at once; the
// caller's check runs at its interval and names what timed out; progress restarts the stall clock.
#include "src/common/wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace braid {
namespace {

using std::chrono::milliseconds;

WaitContext context(const std::atomic<bool>* abort, double timeoutSec, int spinCount) {
  WaitContext ctx;
  ctx.abort = abort;
  ctx.timeoutSec = timeoutSec;
  ctx.spinCount = spinCount;
  ctx.rank = 3;
  return ctx;
}

TEST(WaitLoop, SpinsThenSleepsTheCallersWay) {
  const WaitContext ctx = context(nullptr, 0, 10);
  WaitLoop wait(ctx);
  int sleeps = 0, lastRound = -1;
  auto sleep = [&](int round) {
    ++sleeps;
    lastRound = round;
  };
  auto check = [](bool) { return Status::ok(); };
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(wait.idle(check, sleep).isOk());
  EXPECT_EQ(sleeps, 0);  // still spinning
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(wait.idle(check, sleep).isOk());
  EXPECT_EQ(sleeps, 5);
  EXPECT_EQ(lastRound, 4);  // rounds past the spin count from 0
  wait.progressed();
  ASSERT_TRUE(wait.idle(check, sleep).isOk());
  EXPECT_EQ(sleeps, 5);  // spinning again after progress
}

TEST(WaitLoop, AbortEndsTheWaitWithInvalidUsage) {
  std::atomic<bool> abort{false};
  const WaitContext ctx = context(&abort, 60, 1);
  WaitLoop wait(ctx);
  auto none = [](int) {};
  auto check = [](bool) { return Status::ok(); };
  ASSERT_TRUE(wait.idle(check, none).isOk());
  abort.store(true);
  Status st = wait.idle(check, none);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_NE(st.message().find("rank 3: operation interrupted by ncclCommAbort"), std::string::npos);
}

TEST(WaitLoop, TimeoutRunsTheCheckWhichNamesWhatWasAwaited) {
  const WaitContext ctx = context(nullptr, 0.05, 1);
  WaitLoop wait(ctx, milliseconds(5));
  int checks = 0;
  bool sawTimeout = false;
  auto check = [&](bool timedOut) -> Status {
    ++checks;
    if (!timedOut) return Status::ok();
    sawTimeout = true;
    return remoteError("rank 3: peer rank 1 never came");
  };
  auto nap = [](int) { std::this_thread::sleep_for(milliseconds(1)); };
  const auto start = Clock::now();
  Status st;
  while (st.isOk() && Clock::now() - start < std::chrono::seconds(10)) st = wait.idle(check, nap);
  EXPECT_TRUE(sawTimeout);
  EXPECT_GT(checks, 1);  // checked before the deadline too
  EXPECT_EQ(st.code(), Code::kRemoteError);
  EXPECT_NE(st.message().find("peer rank 1 never came"), std::string::npos);
  EXPECT_GE(Clock::now() - start, milliseconds(50));
}

TEST(WaitLoop, ACheckThatSaysNothingGetsTheGenericTimeout) {
  const WaitContext ctx = context(nullptr, 0.02, 1);
  WaitLoop wait(ctx, milliseconds(2));
  auto check = [](bool) { return Status::ok(); };
  auto nap = [](int) { std::this_thread::sleep_for(milliseconds(1)); };
  Status st;
  const auto start = Clock::now();
  while (st.isOk() && Clock::now() - start < std::chrono::seconds(10)) st = wait.idle(check, nap);
  EXPECT_EQ(st.code(), Code::kRemoteError);
  EXPECT_NE(st.message().find("no progress for"), std::string::npos);
  EXPECT_NE(st.message().find("BRAID_TIMEOUT"), std::string::npos);
}

TEST(WaitLoop, ProgressRestartsTheStallClock) {
  const WaitContext ctx = context(nullptr, 0.3, 1);
  WaitLoop wait(ctx, milliseconds(1));
  auto check = [](bool timedOut) { return timedOut ? remoteError("stalled") : Status::ok(); };
  auto nap = [](int) { std::this_thread::sleep_for(milliseconds(1)); };
  // 400 ms of waiting in 50 ms stretches, each ended by progress: never 300 ms without it (the margin is for a
  // loaded machine).
  for (int stretch = 0; stretch < 8; ++stretch) {
    const auto start = Clock::now();
    while (Clock::now() - start < milliseconds(50)) ASSERT_TRUE(wait.idle(check, nap).isOk());
    wait.progressed();
  }
}

TEST(WaitLoop, AnAbsoluteDeadlineEndsTheWaitWhateverProgresses) {
  WaitContext ctx = WaitContext::withTimeout(nullptr, 0.02);
  ctx.timeoutSec = 0;  // no stall limit: only the deadline
  ctx.spinCount = 1;
  WaitLoop wait(ctx, milliseconds(1));
  auto check = [](bool timedOut) { return timedOut ? remoteError("deadline") : Status::ok(); };
  auto nap = [](int) { std::this_thread::sleep_for(milliseconds(1)); };
  Status st;
  const auto start = Clock::now();
  while (st.isOk() && Clock::now() - start < std::chrono::seconds(10)) {
    st = wait.idle(check, nap);
    wait.progressed();
    if (st.isOk()) st = wait.idle(check, nap);
  }
  EXPECT_EQ(st.message(), "deadline");
}

}  // namespace
}  // namespace braid
