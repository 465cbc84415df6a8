// The device API's LSA and rail teams of processes on two "hosts" (NCCL_HOSTID): blocks of consecutive ranks on
// one host make an LSA team per block (and the host pointer queries follow them), interleaved hosts leave every rank
// its own LSA team.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "nccl.h"
#include "nccl_device.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

bool same(ncclTeam t, int n, int r, int s) {
  return t.nRanks == n && t.rank == r && t.stride == s;
}

TEST(DeviceApiHosts, BlocksOfOneHostAreLsaTeams) {
  auto status = runProcesses(
      4,
      [](int r, ncclComm_t comm) {
        if (!same(ncclTeamLsa(comm), 2, r % 2, 1)) return 1;
        if (!same(ncclTeamRail(comm), 2, r / 2, 2)) return 2;
        if (ncclTeamRankToWorld(comm, ncclTeamRail(comm), 1 - r / 2) != (r + 2) % 4) return 3;
        if (ncclTeamRankToLsa(comm, ncclTeamWorld(comm), r ^ 1) != (r ^ 1) % 2) return 4;
        if (ncclTeamRankToLsa(comm, ncclTeamWorld(comm), (r + 2) % 4) != -1) return 5;  // another host
        ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
        if (ncclCommQueryProperties(comm, &props) != ncclSuccess) return 6;
        // Peers on the other host are out of load/store reach, but one-sided operations reach them as messages.
        if (props.nLsaTeams != 2 || !props.hostRmaSupport) return 7;
        // The host pointer queries: the LSA partner's window buffer, and NULL (success) for a rank on the other host.
        void* buf = nullptr;
        if (ncclMemAlloc(&buf, 4096) != ncclSuccess) return 8;
        ncclWindow_t win = nullptr;
        if (ncclCommWindowRegister(comm, buf, 4096, &win, NCCL_WIN_DEFAULT) != ncclSuccess || win == nullptr) return 9;
        void *peer = reinterpret_cast<void*>(1), *lsa = nullptr;
        if (ncclGetPeerDevicePointer(win, 8, (r + 2) % 4, &peer) != ncclSuccess || peer != nullptr) return 10;
        if (ncclGetPeerDevicePointer(win, 8, r ^ 1, &peer) != ncclSuccess || peer == nullptr) return 11;
        if (ncclGetLsaDevicePointer(win, 8, (r ^ 1) % 2, &lsa) != ncclSuccess || lsa != peer) return 12;
        if (ncclGetLsaDevicePointer(win, 8, 2, &lsa) != ncclInvalidArgument) return 13;
        *static_cast<int*>(peer) = 100 + r;  // lands in the partner's buffer, as the all-reduce's order shows
        int token = 1, sum = 0;
        if (ncclAllReduce(&token, &sum, 1, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess || sum != 4) return 14;
        if (static_cast<int*>(buf)[2] != 100 + (r ^ 1)) return 15;
        if (ncclCommWindowDeregister(comm, win) != ncclSuccess || ncclMemFree(buf) != ncclSuccess) return 16;
        return 0;
      },
      60, nullptr, nullptr, [](int r) { setenv("NCCL_HOSTID", r < 2 ? "host-a" : "host-b", 1); });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(DeviceApiHosts, InterleavedHostsGiveSingleRankLsaTeams) {
  auto status = runProcesses(
      4,
      [](int r, ncclComm_t comm) {
        if (!same(ncclTeamLsa(comm), 1, 0, 1)) return 1;
        if (!same(ncclTeamRail(comm), 4, r, 1)) return 2;
        return 0;
      },
      60, nullptr, nullptr, [](int r) { setenv("NCCL_HOSTID", r % 2 ? "host-b" : "host-a", 1); });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
}

}  // namespace
}  // namespace braid_test
