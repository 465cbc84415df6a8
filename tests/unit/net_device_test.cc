// Which network device a connection uses (transports/net/net_transport.h pickNetDevice).
#include <gtest/gtest.h>

#include "transports/net/net_transport.h"

namespace braid {
namespace {

PeerInfo rankAt(int rail, int numa) {
  PeerInfo p;
  p.rail = rail;
  p.numa = numa;
  return p;
}

TEST(NetDevice, OneDeviceTakesEverything) {
  for (int rail = 0; rail < 4; ++rail) {
    for (int ch = 0; ch < 4; ++ch) EXPECT_EQ(pickNetDevice({-1}, rankAt(rail, -1), ch), 0);
  }
  EXPECT_EQ(pickNetDevice({}, rankAt(3, 0), 5), 0);
}

TEST(NetDevice, RanksStartOnTheirRailAndChannelsRotate) {
  const std::vector<int> four = {-1, -1, -1, -1};
  // Local rank r starts on device r; its channel c goes to device r + c.
  EXPECT_EQ(pickNetDevice(four, rankAt(0, -1), 0), 0);
  EXPECT_EQ(pickNetDevice(four, rankAt(1, -1), 0), 1);
  EXPECT_EQ(pickNetDevice(four, rankAt(3, -1), 0), 3);
  EXPECT_EQ(pickNetDevice(four, rankAt(3, -1), 1), 0);
  EXPECT_EQ(pickNetDevice(four, rankAt(5, -1), 2), 3);
  // Every device gets one of four ranks' channel 0: no device idles while another carries two.
  std::vector<int> load(4, 0);
  for (int r = 0; r < 4; ++r) ++load[static_cast<size_t>(pickNetDevice(four, rankAt(r, -1), 0))];
  EXPECT_EQ(load, std::vector<int>({1, 1, 1, 1}));
}

TEST(NetDevice, DevicesOnTheRanksNumaNodeFirst) {
  const std::vector<int> numa = {0, 0, 1, 1};
  EXPECT_EQ(pickNetDevice(numa, rankAt(0, 1), 0), 2);
  EXPECT_EQ(pickNetDevice(numa, rankAt(0, 1), 1), 3);
  EXPECT_EQ(pickNetDevice(numa, rankAt(1, 1), 1), 2);
  EXPECT_EQ(pickNetDevice(numa, rankAt(1, 0), 0), 1);
  // A node with no device, or a rank not placed: every device.
  EXPECT_EQ(pickNetDevice(numa, rankAt(2, 2), 0), 2);
  EXPECT_EQ(pickNetDevice(numa, rankAt(3, -1), 0), 3);
}

}  // namespace
}  // namespace braid
