// The flight recorder (src/core/flight_recorder.h) and the report braid-info --analyze prints from its dumps
// (tools/info/flight_report.h).
#include "src/core/flight_recorder.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/info/flight_report.h"

namespace braid {
namespace {

FlightCall allReduce(size_t count) {
  FlightCall c;
  c.fn = "ncclAllReduce";
  c.kind = CollKind::kAllReduce;
  c.count = count;
  c.dtype = DType::kFloat32;
  c.op = static_cast<int>(OpKind::kSum);
  return c;
}

FlightCall send(int peer, size_t count) {
  FlightCall c;
  c.fn = "ncclSend";
  c.kind = CollKind::kSend;
  c.p2p = true;
  c.count = count;
  c.peer = peer;
  return c;
}

// The recorder as braid-info reads it: wrapped in a dump's envelope and parsed back.
FlightComm parsed(const FlightRecorder& r, int64_t nowUs = 2'000'000) {
  const std::string text =
      "{\"braid_flight_recorder\": 1, \"host\": \"h\", \"pid\": 7, \"time_us\": " + std::to_string(nowUs) +
      ", \"trigger\": \"test\", \"comms\": [" + r.toJson(nowUs) + "]}";
  std::vector<FlightComm> comms;
  std::string error;
  EXPECT_TRUE(parseFlightDump(text, "test.json", &comms, &error)) << error << "\n" << text;
  return comms.empty() ? FlightComm{} : comms[0];
}

TEST(FlightRecorder, NumbersCollectivesAcrossRanksAndSendsPerRank) {
  FlightRecorder r(16);
  r.identify(FlightIdentity{0xabc, 1, 4, "trainer"});
  const uint64_t t0 = r.queued(allReduce(8));
  r.chose(t0, AlgoId::kRing, ProtoId::kLL);
  r.queued(send(2, 5));
  r.queued(allReduce(16));
  r.started();
  r.ended(Status::ok());
  const FlightComm c = parsed(r);
  EXPECT_EQ(c.commId, "0x0000000000000abc");
  EXPECT_EQ(c.name, "trainer");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.nranks, 4);
  EXPECT_EQ(c.nextCollSeq, 2u);
  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].collSeq, 0u);
  EXPECT_FALSE(c.ops[0].p2p);
  EXPECT_EQ(c.ops[0].algorithm, "Ring");
  EXPECT_EQ(c.ops[0].protocol, "LL");
  EXPECT_EQ(c.ops[0].op, "sum");
  EXPECT_EQ(c.ops[0].datatype, "float");
  EXPECT_TRUE(c.ops[1].p2p);
  EXPECT_EQ(c.ops[1].p2pSeq, 0u);
  EXPECT_EQ(c.ops[1].collSeq, 1u);  // a send carries the number of the next collective
  EXPECT_EQ(c.ops[1].peer, 2);
  EXPECT_EQ(c.ops[2].collSeq, 1u);
  EXPECT_TRUE(c.ops[2].algorithm.empty());  // the planner never said
  for (const FlightOp& op : c.ops) {
    EXPECT_EQ(op.state, "finished");
    EXPECT_GT(op.queuedUs, 0);
    EXPECT_GE(op.startedUs, op.queuedUs);
    EXPECT_GE(op.endedUs, op.startedUs);
  }
}

// The latency path launches a call as it queues it: its start is its queued time (no second clock read). A start or
// an end with nothing new to move changes nothing.
TEST(FlightRecorder, ALaunchAsItIsQueuedStartsAtItsQueuedTime) {
  FlightRecorder r(8);
  r.identify(FlightIdentity{1, 0, 2, ""});
  r.queued(allReduce(4));
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  r.started(true);
  r.ended(Status::ok());
  r.started();  // nothing queued since
  r.ended(Status::ok());
  r.queued(allReduce(8));
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  r.started();
  const FlightComm before = parsed(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  r.started();  // nothing new: the second call keeps its start
  r.ended(Status::ok());
  const FlightComm c = parsed(r);
  ASSERT_EQ(c.ops.size(), 2u);
  EXPECT_EQ(c.ops[0].state, "finished");
  EXPECT_EQ(c.ops[0].startedUs, c.ops[0].queuedUs);
  EXPECT_GE(c.ops[0].endedUs, c.ops[0].queuedUs + 2000);
  ASSERT_EQ(before.ops.size(), 2u);
  // Each dump converts ticks to microseconds at the tick rate measured then, so one stamp may read 1 us apart in
  // two dumps (regression: an exact comparison failed once in a loaded run).
  EXPECT_NEAR(static_cast<double>(c.ops[1].startedUs), static_cast<double>(before.ops[1].startedUs), 2.0);
  EXPECT_GE(c.ops[1].startedUs, c.ops[1].queuedUs + 2000);
  EXPECT_GE(c.ops[1].endedUs, c.ops[1].startedUs + 2000);
  EXPECT_EQ(c.ops[1].state, "finished");
}

// The latency path's one write: a lone call starts at its queued time with its choice; anything else (two calls
// queued, or none) is what started(true) and chose() make of it.
TEST(FlightRecorder, ALoneCallStartsWithItsChoiceInOneWrite) {
  FlightRecorder r(8);
  r.identify(FlightIdentity{1, 0, 2, ""});
  const uint64_t t0 = r.queued(allReduce(4));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  r.startedChosen(t0, AlgoId::kNvls, ProtoId::kSimple);
  const FlightComm mid = parsed(r);
  ASSERT_EQ(mid.ops.size(), 1u);
  EXPECT_EQ(mid.ops[0].state, "started");
  EXPECT_EQ(mid.ops[0].algorithm, "NVLS");
  EXPECT_EQ(mid.ops[0].protocol, "Simple");
  EXPECT_EQ(mid.ops[0].startedUs, mid.ops[0].queuedUs);
  r.ended(Status::ok());
  // Two queued: both start, the first gets the choice.
  const uint64_t t1 = r.queued(allReduce(8));
  r.queued(allReduce(16));
  r.startedChosen(t1, AlgoId::kRing, ProtoId::kLL);
  const FlightComm two = parsed(r);
  ASSERT_EQ(two.ops.size(), 3u);
  EXPECT_EQ(two.ops[0].state, "finished");
  EXPECT_EQ(two.ops[1].state, "started");
  EXPECT_EQ(two.ops[1].algorithm, "Ring");
  EXPECT_EQ(two.ops[1].protocol, "LL");
  EXPECT_EQ(two.ops[2].state, "started");
  EXPECT_EQ(two.ops[2].algorithm, "");
  r.ended(invalidUsage("peer gone"));
  EXPECT_EQ(parsed(r).ops[2].state, "failed");
}

TEST(FlightRecorder, KeepsTheLastEntriesRoundedUpToAPowerOfTwo) {
  FlightRecorder r(3);
  r.identify(FlightIdentity{1, 0, 2, ""});
  for (size_t i = 0; i < 10; ++i) {
    r.queued(allReduce(i));
    r.started();
    r.ended(Status::ok());
  }
  const FlightComm c = parsed(r);
  ASSERT_EQ(c.ops.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c.ops[i].collSeq, 6 + i);
    EXPECT_EQ(c.ops[i].count, 6 + i);
  }
  EXPECT_EQ(c.nextCollSeq, 10u);
}

TEST(FlightRecorder, FailedDroppedAndAbortedStates) {
  FlightRecorder r(8);
  r.identify(FlightIdentity{1, 0, 2, ""});
  r.queued(allReduce(4));
  r.started();
  EXPECT_NE(r.summary().find("collective 0: ncclAllReduce"), std::string::npos) << r.summary();
  r.ended(remoteError("rank 0: no progress for 2 s waiting for data from rank 1"));
  r.queued(allReduce(8));
  r.dropped();
  r.aborted();  // the first failure stays the error
  const uint64_t t = r.queued(allReduce(0));
  r.nothingToRun(t);
  const FlightComm c = parsed(r);
  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].state, "failed");
  EXPECT_EQ(c.ops[1].state, "not run");
  EXPECT_EQ(c.ops[2].state, "finished");
  EXPECT_EQ(c.error, "rank 0: no progress for 2 s waiting for data from rank 1");
  EXPECT_NE(r.summary().find("collective 0"), std::string::npos) << r.summary();
  EXPECT_NE(r.summary().find("failed"), std::string::npos) << r.summary();

  FlightRecorder aborted(8);
  aborted.identify(FlightIdentity{1, 0, 2, ""});
  aborted.aborted();
  EXPECT_EQ(parsed(aborted).error, "ncclCommAbort");
  FlightRecorder off(0);
  off.identify(FlightIdentity{});
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.queued(allReduce(1)), FlightRecorder::kNone);
}

// A backend whose calls return before their work ends (CUDA streams): a launched group's calls stay "started"
// until finishedLaunches reaches its launch, across the clean-up that follows every launch (dropped(), which once
// marked them ended before their kernels were done); a failure then fails what is still running.
TEST(FlightRecorder, CallsOfAStreamsLaunchEndWhenTheLaunchFinishes) {
  FlightRecorder r(16);
  r.identify(FlightIdentity{1, 0, 2, ""});
  r.queued(allReduce(4));
  r.started();
  r.launched(1);
  r.dropped();
  r.queued(allReduce(8));
  r.queued(allReduce(16));
  r.started();
  r.launched(2);
  r.dropped();
  EXPECT_EQ(parsed(r).ops[0].state, "started");
  r.finishedLaunches(0);
  EXPECT_EQ(parsed(r).ops[0].state, "started");
  r.finishedLaunches(1);
  FlightComm c = parsed(r);
  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].state, "finished");
  EXPECT_EQ(c.ops[1].state, "started");
  EXPECT_EQ(c.ops[2].state, "started");
  r.ended(remoteError("rank 0: the kernels failed"));
  c = parsed(r);
  EXPECT_EQ(c.ops[1].state, "failed");
  EXPECT_EQ(c.ops[2].state, "failed");
  r.finishedLaunches(2);  // after the failure: nothing changes
  EXPECT_EQ(parsed(r).ops[2].state, "failed");
}

// A dump reads while the owner writes (the seqlock per entry): every entry it sees is whole.
TEST(FlightRecorder, ADumpDuringOperationsSeesWholeEntries) {
  FlightRecorder r(64);
  r.identify(FlightIdentity{1, 0, 2, ""});
  std::atomic<bool> stop{false};
  std::thread owner([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      FlightCall c = allReduce(static_cast<size_t>(i));
      c.root = static_cast<int>(i & 0xffff);
      const uint64_t t = r.queued(c);
      r.chose(t, (i & 1) ? AlgoId::kTree : AlgoId::kRing, ProtoId::kSimple);
      r.started();
      r.ended(Status::ok());
    }
  });
  size_t seen = 0;
  for (int dump = 0; dump < 2000; ++dump) {
    const FlightComm c = parsed(r);
    for (const FlightOp& op : c.ops) {
      ASSERT_EQ(op.count, op.collSeq);
      ASSERT_EQ(op.root, static_cast<int>(op.collSeq & 0xffff));
      if (!op.algorithm.empty()) {
        ASSERT_EQ(op.algorithm, (op.collSeq & 1) ? "Tree" : "Ring");
      }
      ++seen;
    }
  }
  stop.store(true);
  owner.join();
  EXPECT_GT(seen, 0u);
}

TEST(FlightRecorder, DumpGoesToTheKnobsPathWithHostAndPid) {
  char dir[] = "/tmp/braid-fr-unit-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  unsetenv("BRAID_FLIGHT_RECORDER_FILE");
  Result<std::string> none = flightDump("test");
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(none.value(), "");  // unset: no dump

  FlightRecorder r(8);
  r.identify(FlightIdentity{0x77, 0, 1, ""});
  r.queued(allReduce(3));
  setenv("BRAID_FLIGHT_RECORDER_FILE", (std::string(dir) + "/fr-%h-%p.json").c_str(), 1);
  Result<std::string> path = flightDump("unit test");
  unsetenv("BRAID_FLIGHT_RECORDER_FILE");
  ASSERT_TRUE(path.isOk()) << path.status().message();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(path.value(), std::string(dir) + "/fr-" + host + "-" + std::to_string(getpid()) + ".json");
  std::ifstream in(path.value());
  std::stringstream text;
  text << in.rdbuf();
  std::vector<FlightComm> comms;
  std::string error;
  ASSERT_TRUE(parseFlightDump(text.str(), path.value(), &comms, &error)) << error;
  bool found = false;
  for (const FlightComm& c : comms) found = found || c.commId == "0x0000000000000077";
  EXPECT_TRUE(found);
  EXPECT_EQ(comms.empty() ? "" : comms[0].trigger, "unit test");
  unlink(path.value().c_str());

  setenv("BRAID_FLIGHT_RECORDER_FILE", "/nonexistent-dir/fr.json", 1);
  Result<std::string> bad = flightDump("test");
  unsetenv("BRAID_FLIGHT_RECORDER_FILE");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("/nonexistent-dir/fr.json"), std::string::npos);
  rmdir(dir);
}

// ---- the report -------------------------------------------------------------------------------------------------

FlightOp op(uint64_t seq, const char* state, size_t count = 1024) {
  FlightOp o;
  o.collSeq = seq;
  o.fn = "ncclAllReduce";
  o.count = count;
  o.datatype = "float";
  o.op = "sum";
  o.algorithm = "Ring";
  o.protocol = "Simple";
  o.state = state;
  o.queuedUs = o.startedUs = 1'000'000;
  if (std::string(state) == "finished") o.endedUs = 1'000'100;
  return o;
}

FlightComm rankRecord(int rank, int nranks, std::vector<FlightOp> ops, const std::string& error = "") {
  FlightComm c;
  c.commId = "0x1";
  c.rank = rank;
  c.nranks = nranks;
  c.host = "h";
  c.pid = 100 + rank;
  c.dumpUs = 4'000'000;
  c.ops = std::move(ops);
  c.nextCollSeq = c.ops.empty() ? 0 : c.ops.back().collSeq + 1;
  c.error = error;
  return c;
}

TEST(FlightReport, NamesTheRanksThatNeverReachedTheCollectiveTheOthersWaitIn) {
  std::vector<FlightComm> comms = {
      rankRecord(0, 4, {op(4, "finished"), op(5, "failed")}, "rank 0: no progress for 3 s"),
      rankRecord(1, 4, {op(4, "finished"), op(5, "started")}),
      rankRecord(2, 4, {op(3, "finished"), op(4, "finished")}),
  };
  const std::string report = flightReport(comms);
  EXPECT_NE(report.find("ranks wait in collective 5: ncclAllReduce(count 1024, float, sum) Ring/Simple"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("never reached collective 5: rank 2\n"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 idle after collective 4"), std::string::npos) << report;
  EXPECT_NE(report.find("in it or before it: ranks 0,1\n"), std::string::npos) << report;
  EXPECT_NE(report.find("started 3.0 s before its dump"), std::string::npos) << report;
  EXPECT_NE(report.find("no dump from rank 3"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 0 (h pid 100): rank 0: no progress for 3 s"), std::string::npos) << report;
}

TEST(FlightReport, CollectivesThatDifferBetweenRanks) {
  std::vector<FlightComm> comms = {
      rankRecord(0, 2, {op(0, "finished"), op(1, "started", 4)}),
      rankRecord(1, 2, {op(0, "finished"), op(1, "started", 8)}),
  };
  const std::string report = flightReport(comms);
  EXPECT_NE(report.find("collective 1 differs: rank 0 called ncclAllReduce(count 4"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 called ncclAllReduce(count 8"), std::string::npos) << report;
}

TEST(FlightReport, NothingInFlight) {
  std::vector<FlightComm> comms = {rankRecord(0, 2, {op(0, "finished")}), rankRecord(1, 2, {op(0, "finished")})};
  EXPECT_NE(flightReport(comms).find("no collective in flight: every rank with a dump finished all 1"),
            std::string::npos)
      << flightReport(comms);
}

TEST(FlightReport, BadDumpsAreNamedErrors) {
  std::vector<FlightComm> comms;
  std::string error;
  EXPECT_FALSE(parseFlightDump("{\"a\": 1}", "x.json", &comms, &error));
  EXPECT_NE(error.find("x.json: not a braid flight recorder dump"), std::string::npos) << error;
  EXPECT_FALSE(parseFlightDump("{\"braid_flight_recorder\": 1,", "y.json", &comms, &error));
  EXPECT_NE(error.find("y.json: line 1"), std::string::npos) << error;
  EXPECT_FALSE(parseFlightDump(
      "{\"braid_flight_recorder\": 1, \"host\": \"h\", \"pid\": 1, \"time_us\": 5, \"trigger\": \"t\", \"comms\": "
      "[{\"comm_id\": \"0x1\", \"name\": \"\", \"rank\": 5, \"nranks\": 2, \"next_coll_seq\": 0, \"error\": null, "
      "\"ops\": []}]}",
      "z.json", &comms, &error));
  EXPECT_NE(error.find("z.json: comms[0]: rank 5 of 2 ranks is out of range"), std::string::npos) << error;
  EXPECT_FALSE(parseFlightDump(
      "{\"braid_flight_recorder\": 1, \"host\": \"h\", \"pid\": 1, \"time_us\": 5, \"trigger\": \"t\", \"comms\": "
      "[{\"comm_id\": \"0x1\", \"name\": \"\", \"rank\": 0, \"nranks\": 2, \"next_coll_seq\": 0, \"error\": null, "
      "\"ops\": [{\"coll_seq\": \"x\"}]}]}",
      "w.json", &comms, &error));
  EXPECT_NE(error.find("w.json: comms[0].ops[0]: field \"coll_seq\""), std::string::npos) << error;
  EXPECT_TRUE(comms.empty());
}

}  // namespace
}  // namespace braid
