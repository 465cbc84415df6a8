// How the bootstrap names the cause when a rendezvous cannot complete.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

// Two of three ranks call init; the third never comes. The root tells both which rank is missing when its
// deadline passes (before: both failed with "connection closed by <root address>", naming nobody).
TEST(BootstrapFailures, RanksThatNeverArriveAreNamedByTheRoot) {
  const char* old = getenv("BRAID_TIMEOUT");
  const std::string saved = old != nullptr ? old : "";
  setenv("BRAID_TIMEOUT", "2", 1);  // read by the root (at ncclGetUniqueId) and by each rank at init
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclResult_t> res(2, ncclSuccess);
  std::vector<std::string> text(2);
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      res[static_cast<size_t>(r)] = ncclCommInitRank(&comm, 3, id, r);
      text[static_cast<size_t>(r)] = ncclGetLastError(nullptr);
      if (comm != nullptr) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (old != nullptr) {
    setenv("BRAID_TIMEOUT", saved.c_str(), 1);
  } else {
    unsetenv("BRAID_TIMEOUT");
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  }
  // ncclGetLastError is the process's last WARN: one of the two ranks' errors, both of which name rank 2.
  EXPECT_NE(text[1].find("missing: rank 2 "), std::string::npos) << text[1];
  EXPECT_LT(secs, 15.0);
}

}  // namespace
