// NCCL 2.31's one-sided configuration on host communicators through the C API: numRmaCtx contexts of numRmaSig
// signals each (every (ctx, sigIdx) counts apart), rmaEagerInit (the signal area at init, so ncclSignal and
// ncclWaitSignal work before any window), the environment overrides (NCCL_NUM_RMA_CTX, NCCL_RMA_EAGER_INIT),
// numRmaCtx=0 turning one-sided operations off, and every bad value and disagreement between ranks by name.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

std::string lastError(ncclComm_t comm) {
  return ncclGetLastError(comm);
}

// A config with the three one-sided fields (NCCL_CONFIG_UNDEF_INT: left to the default).
ncclConfig_t rmaConfig(int ctx, int sig, int eager) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.numRmaCtx = ctx;
  c.numRmaSig = sig;
  c.rmaEagerInit = eager;
  return c;
}

// fn(rank, comm) on a thread per config, rank r initialised with configs[r] (destroyed after): "" or what went wrong,
// per rank (an init failure as "init: " and its error).
std::vector<std::string> onThreads(const std::vector<ncclConfig_t>& configs,
                                   const std::function<std::string(int, ncclComm_t)>& fn) {
  return runThreadsChecked(static_cast<int>(configs.size()), fn, configs);
}

void expectAllOk(const std::vector<std::string>& errs) {
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

std::string waitOn(ncclComm_t comm, std::vector<ncclWaitSignalDesc_t> d) {
  if (ncclWaitSignal(static_cast<int>(d.size()), d.data(), comm, nullptr) != ncclSuccess) {
    return "ncclWaitSignal: " + lastError(comm);
  }
  return "";
}

// Rank 1 puts to rank 0 on three (ctx, sigIdx) pairs of a 2 x 3 configuration, the one rank 0 waits for first last:
// each wait sees exactly its own signals (one counter shared by all would let the first wait end before its data).
// A wait for a signal nobody sent times out: it is not satisfied by the others'.
TEST(RmaConfig, EachContextAndSignalCountsApart) {
  setenv("BRAID_TIMEOUT", "2", 1);
  std::atomic<bool> done{false};
  const std::vector<std::string> errs = onThreads(
      {rmaConfig(2, 3, NCCL_CONFIG_UNDEF_INT), rmaConfig(2, 3, NCCL_CONFIG_UNDEF_INT)},
      [&](int r, ncclComm_t comm) -> std::string {
        std::vector<int> buf(64, -1);
        ncclWindow_t win = nullptr;
        if (ncclCommWindowRegister(comm, buf.data(), buf.size() * sizeof(int), &win, 0) != ncclSuccess) {
          return "register: " + lastError(comm);
        }
        std::string e;
        if (r == 1) {
          const int a[4] = {11, 12, 13, 14}, b[4] = {21, 22, 23, 24};
          if (ncclSignal(0, 1, 0, 0, comm, nullptr) != ncclSuccess ||
              ncclSignal(0, 1, 0, 0, comm, nullptr) != ncclSuccess ||
              ncclPutSignal(b, 4, ncclInt32, 0, win, 16 * sizeof(int), 0, 0, 0, comm, nullptr) != ncclSuccess ||
              ncclPutSignal(a, 4, ncclInt32, 0, win, 0, 2, 1, 0, comm, nullptr) != ncclSuccess) {
            e = "rank 1: " + lastError(comm);
          }
          while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } else {
          e = waitOn(comm, {{1, 1, 2, 1}});  // (ctx 1, sigIdx 2): a's, sent last
          for (int i = 0; e.empty() && i < 4; ++i) {
            if (buf[static_cast<size_t>(i)] != 11 + i) e = "a[" + std::to_string(i) + "] not in";
          }
          // One call over two contexts; two signals on (ctx 0, sigIdx 1).
          if (e.empty()) e = waitOn(comm, {{2, 1, 1, 0}, {1, 1, 0, 0}});
          for (int i = 0; e.empty() && i < 4; ++i) {
            if (buf[16 + static_cast<size_t>(i)] != 21 + i) e = "b[" + std::to_string(i) + "] not in";
          }
          // Nothing was sent on (ctx 1, sigIdx 0), nor a third time on (ctx 0, sigIdx 1).
          for (ncclWaitSignalDesc_t d : {ncclWaitSignalDesc_t{1, 1, 0, 1}, ncclWaitSignalDesc_t{1, 1, 1, 0}}) {
            if (!e.empty()) break;
            if (ncclWaitSignal(1, &d, comm, nullptr) != ncclRemoteError) {
              e = "a wait on (ctx " + std::to_string(d.ctx) + ", sigIdx " + std::to_string(d.sigIdx) +
                  ") that nobody signalled did not time out";
            }
          }
          done = true;
        }
        ncclCommWindowDeregister(comm, win);
        return e;
      });
  unsetenv("BRAID_TIMEOUT");
  expectAllOk(errs);
}

// ctx and sigIdx out of the configured range are refused by name, on puts, signals and each wait descriptor; the
// defaults are one context of one signal.
TEST(RmaConfig, OutOfRangeContextsAndSignalsAreNamed) {
  const std::vector<std::string> errs =
      onThreads({rmaConfig(3, 2, 1), rmaConfig(3, 2, 1)}, [](int r, ncclComm_t comm) -> std::string {
        if (r != 0) return "";
        std::string e;
        auto expect = [&](ncclResult_t got, const char* what) {
          if (got != ncclInvalidArgument) e += std::string(what) + " returned " + std::to_string(got) + "; ";
          if (lastError(comm).find(what) == std::string::npos)
            e += "no \"" + std::string(what) + "\" in: " + lastError(comm) + "; ";
        };
        expect(ncclSignal(1, 0, 3, 0, comm, nullptr), "ctx=3 must be in [0, 3)");
        expect(ncclSignal(1, 2, 0, 0, comm, nullptr), "sigIdx=2 must be in [0, 2)");
        expect(ncclSignal(1, -1, 0, 0, comm, nullptr), "sigIdx=-1 must be in [0, 2)");
        ncclWaitSignalDesc_t d[2] = {{1, 1, 1, 2}, {1, 1, 0, -1}};
        expect(ncclWaitSignal(2, d, comm, nullptr), "signalDescs[1].ctx=-1 must be in [0, 3)");
        return e;
      });
  expectAllOk(errs);
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<int> a(1024), b(1024);
  ncclWindow_t w[2];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclCommWindowRegister(c[0], a.data(), 4096, &w[0], 0);
  ncclCommWindowRegister(c[1], b.data(), 4096, &w[1], 0);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(ncclPutSignal(a.data(), 4, ncclInt32, 1, w[0], 0, 1, 0, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("sigIdx=1 must be in [0, 1)"), std::string::npos) << lastError(c[0]);
  EXPECT_EQ(ncclPutSignal(a.data(), 4, ncclInt32, 1, w[0], 0, 0, 1, 0, c[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError(c[0]).find("ctx=1 must be in [0, 1)"), std::string::npos) << lastError(c[0]);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(ncclCommWindowDeregister(c[i], w[i]), ncclSuccess);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// rmaEagerInit=1 (config, or NCCL_RMA_EAGER_INIT=1 over a config that says 0): signals and waits before any window
// registration, then a window registered later still carries puts. Without it they are refused, naming the remedy.
TEST(RmaConfig, EagerInitLetsSignalsComeBeforeAnyWindow) {
  auto pingPong = [](int r, ncclComm_t comm) -> std::string {
    for (int k = 0; k < 3; ++k) {
      if (ncclSignal(1 - r, 0, 0, 0, comm, nullptr) != ncclSuccess) return "ncclSignal: " + lastError(comm);
      const std::string e = waitOn(comm, {{1, 1 - r, 0, 0}});
      if (!e.empty()) return e;
    }
    std::vector<int> buf(16, -1);
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, buf.data(), 64, &win, 0) != ncclSuccess) return "register: " + lastError(comm);
    const int v[2] = {7 + r, 8 + r};
    if (ncclPutSignal(v, 2, ncclInt32, 1 - r, win, 8, 0, 0, 0, comm, nullptr) != ncclSuccess) {
      return "ncclPutSignal: " + lastError(comm);
    }
    std::string e = waitOn(comm, {{1, 1 - r, 0, 0}});
    if (e.empty() && (buf[2] != 8 - r || buf[3] != 9 - r)) e = "the put after the eager signals did not land";
    ncclCommWindowDeregister(comm, win);
    return e;
  };
  expectAllOk(onThreads({rmaConfig(NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, 1),
                         rmaConfig(NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, 1)},
                        pingPong));
  setenv("NCCL_RMA_EAGER_INIT", "1", 1);
  expectAllOk(onThreads({rmaConfig(NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, 0),
                         rmaConfig(NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, 0)},
                        pingPong));
  unsetenv("NCCL_RMA_EAGER_INIT");
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  EXPECT_EQ(ncclSignal(1, 0, 0, 0, c[0], nullptr), ncclInvalidUsage);
  EXPECT_NE(lastError(c[0]).find("NCCL_RMA_EAGER_INIT=1"), std::string::npos) << lastError(c[0]);
  ncclWaitSignalDesc_t d{1, 0, 0, 0};
  EXPECT_EQ(ncclWaitSignal(1, &d, c[1], nullptr), ncclInvalidUsage);
  EXPECT_NE(lastError(c[1]).find("rmaEagerInit=1"), std::string::npos) << lastError(c[1]);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// numRmaCtx=0 (config, or NCCL_NUM_RMA_CTX=0 over a config that says 2) turns one-sided operations off: refused by
// name, and ncclCommQueryProperties says hostRmaSupport 0; windows still register (collectives use them).
TEST(RmaConfig, NoContextsTurnOneSidedOperationsOff) {
  auto off = [](int r, ncclComm_t comm) -> std::string {
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    if (ncclCommQueryProperties(comm, &props) != ncclSuccess) return "properties: " + lastError(comm);
    if (props.hostRmaSupport != 0) return "hostRmaSupport is not 0";
    std::vector<int> buf(16);
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, buf.data(), 64, &win, 0) != ncclSuccess || win == nullptr) {
      return "register: " + lastError(comm);
    }
    std::string e;
    if (ncclSignal(1 - r, 0, 0, 0, comm, nullptr) != ncclInvalidArgument ||
        lastError(comm).find("one-sided operations are off") == std::string::npos) {
      e = "ncclSignal with numRmaCtx=0: " + lastError(comm);
    }
    ncclCommWindowDeregister(comm, win);
    return e;
  };
  expectAllOk(onThreads({rmaConfig(0, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT),
                         rmaConfig(0, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT)},
                        off));
  setenv("NCCL_NUM_RMA_CTX", "0", 1);
  expectAllOk(onThreads({rmaConfig(2, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT),
                         rmaConfig(2, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT)},
                        off));
  unsetenv("NCCL_NUM_RMA_CTX");
}

// Bad values are refused at init by name (config fields and environment), and ranks that disagree fail their init,
// each naming both ranks' settings.
TEST(RmaConfig, BadAndDifferingSettingsAreRefusedByName) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  struct Bad {
    ncclConfig_t cfg;
    const char* named;
  } bad[] = {{rmaConfig(-1, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT), "config->numRmaCtx=-1 must be in 0..64"},
             {rmaConfig(65, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT), "config->numRmaCtx=65"},
             {rmaConfig(NCCL_CONFIG_UNDEF_INT, 0, NCCL_CONFIG_UNDEF_INT), "config->numRmaSig=0 must be in 1..1024"},
             {rmaConfig(NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, 2), "config->rmaEagerInit=2 must be 0 or 1"}};
  for (Bad& b : bad) {
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &b.cfg), ncclInvalidArgument) << b.named;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(b.named), std::string::npos) << ncclGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr);
  }
  const std::pair<const char*, const char*> env[] = {
      {"NCCL_NUM_RMA_CTX", "many"}, {"NCCL_NUM_RMA_CTX", "-2"}, {"NCCL_RMA_EAGER_INIT", "3"}};
  for (const auto& e : env) {
    setenv(e.first, e.second, 1);
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument) << e.first << "=" << e.second;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(e.first), std::string::npos) << ncclGetLastError(nullptr);
    if (comm != nullptr) ncclCommDestroy(comm);
    unsetenv(e.first);
  }
  const std::vector<std::string> errs =
      onThreads({rmaConfig(2, 4, 0), rmaConfig(2, 3, 0)}, [](int, ncclComm_t) -> std::string { return "init passed"; });
  for (const std::string& e : errs) {
    EXPECT_NE(e.find("one-sided settings differ between rank"), std::string::npos) << e;
    EXPECT_NE(e.find("numRmaSig"), std::string::npos) << e;
  }
}

// A split or shrink inherits the parent's one-sided settings (NCCL copies the config): the child's signals count on
// its own contexts, and with rmaEagerInit its signal area is made at its init.
TEST(RmaConfig, ChildrenInheritTheSettings) {
  const std::vector<std::string> errs = onThreads(
      {rmaConfig(2, 2, 1), rmaConfig(2, 2, 1), rmaConfig(2, 2, 1)}, [](int r, ncclComm_t comm) -> std::string {
        ncclComm_t child = nullptr;
        if (ncclCommSplit(comm, r < 2 ? 0 : NCCL_SPLIT_NOCOLOR, r, &child, nullptr) != ncclSuccess) {
          return "split: " + lastError(comm);
        }
        if (child == nullptr) return "";
        std::string e;
        if (ncclSignal(1 - r, 1, 1, 0, child, nullptr) != ncclSuccess) e = "ncclSignal: " + lastError(child);
        if (e.empty()) e = waitOn(child, {{1, 1 - r, 1, 1}});
        ncclCommDestroy(child);
        return e;
      });
  expectAllOk(errs);
}

}  // namespace
}  // namespace braid_test
