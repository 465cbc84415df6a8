// RmaPosts (src/backends/rma_posts.h), the queue between a CUDA stream's host functions and the one-sided messenger's
// sender thread: order, the staging budget (a call waits for room, never when nothing is held, and fails by name
// at its deadline or on abort), and close() dropping what is queued or posted late, each `done` run once.
#include "src/backends/rma_posts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace braid {
namespace {

RmaStep put(int peer, size_t bytes) {
  RmaStep s;
  s.kind = RmaStep::Kind::kPut;
  s.peer = peer;
  s.bytes = bytes;
  return s;
}

WaitContext within(double sec, const std::atomic<bool>* abort = nullptr) {
  WaitContext w;
  w.timeoutSec = sec;
  w.abort = abort;
  return w;
}

TEST(RmaPosts, SentInOrderAndIdleOnceHandled) {
  RmaPosts q(0, 1 << 20);
  EXPECT_TRUE(q.idle());
  int done = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(q.expect(100, within(5)).isOk());
    q.post(put(i, 100), 100, [&] { ++done; });
  }
  EXPECT_FALSE(q.idle());
  for (int i = 0; i < 3; ++i) {
    RmaPosts::Item it;
    ASSERT_TRUE(q.next(&it, std::chrono::milliseconds(100)));
    EXPECT_EQ(it.step.peer, i);
    EXPECT_EQ(it.staged, 100u);
    it.done();
    q.finished(it.staged);
  }
  EXPECT_EQ(done, 3);
  EXPECT_TRUE(q.idle());
  RmaPosts::Item none;
  EXPECT_FALSE(q.next(&none, std::chrono::milliseconds(1)));
}

TEST(RmaPosts, ACallWaitsForRoomUntilEarlierPiecesAreSent) {
  RmaPosts q(0, 1000);
  EXPECT_EQ(q.pieceBytes(), 64u << 10);           // at least 64 KB
  ASSERT_TRUE(q.expect(5000, within(5)).isOk());  // more than the budget: granted, nothing being held
  std::atomic<bool> second{false};
  std::thread t([&] {
    EXPECT_TRUE(q.expect(10, within(5)).isOk());
    second = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(second.load());  // 5000 held: no room
  q.finished(5000);
  t.join();
  EXPECT_TRUE(second.load());
}

TEST(RmaPosts, NoRoomBeforeTheDeadlineOrAnAbortFailsByName) {
  RmaPosts q(3, 1000);
  ASSERT_TRUE(q.expect(900, within(5)).isOk());
  Status late = q.expect(200, within(0.1));
  EXPECT_FALSE(late.isOk());
  EXPECT_NE(late.message().find("BRAID_RMA_STAGE_BYTES=1000"), std::string::npos) << late.message();
  EXPECT_NE(late.message().find("rank 3"), std::string::npos) << late.message();
  std::atomic<bool> abort{true};
  Status aborted = q.expect(200, within(60, &abort));
  EXPECT_FALSE(aborted.isOk());
  EXPECT_NE(aborted.message().find("ncclCommAbort"), std::string::npos) << aborted.message();
  q.finished(900);
  EXPECT_TRUE(q.idle());  // the refused calls counted nothing
}

TEST(RmaPosts, CloseDropsWhatIsQueuedAndWhatIsPostedLater) {
  RmaPosts q(0, 1 << 20);
  int done = 0;
  ASSERT_TRUE(q.expect(10, within(5)).isOk());
  ASSERT_TRUE(q.expect(10, within(5)).isOk());
  q.post(put(1, 10), 10, [&] { ++done; });
  EXPECT_EQ(q.close(), 1u);
  EXPECT_EQ(done, 1);
  q.post(put(1, 10), 10, [&] { ++done; });  // a stream that got there after the end: dropped, done run
  EXPECT_EQ(done, 2);
  EXPECT_TRUE(q.idle());
  RmaPosts::Item none;
  EXPECT_FALSE(q.next(&none, std::chrono::milliseconds(1)));
}

}  // namespace
}  // namespace braid
