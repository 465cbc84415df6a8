// The IB (verbs) network on a host without an RDMA device: it builds, initialises, reports zero devices and
// refuses work cleanly; NCCL_IB_HCA parsing is checked on its own. The QP data path needs hardware and is not
// exercised here (docs/networks.md).
#include "tests/net/net_test_util.h"

#if BRAID_HAVE_IBVERBS
#include "transports/net/ibverbs/ib_hca.h"
#include "transports/net/ibverbs/ibv_lib.h"
#endif

namespace braid {
namespace net {
namespace testing {
namespace {

#if BRAID_HAVE_IBVERBS
using ib::matchIbHca;
using ib::parseIbHca;

TEST(IbNet, HcaPrefixExactExcludeAndPorts) {
  auto all = parseIbHca("");
  ASSERT_TRUE(all.isOk());
  EXPECT_TRUE(matchIbHca(all.value(), "mlx5_3", 2));

  auto prefix = parseIbHca("mlx5");
  ASSERT_TRUE(prefix.isOk());
  EXPECT_TRUE(matchIbHca(prefix.value(), "mlx5_0", 1));
  EXPECT_TRUE(matchIbHca(prefix.value(), "mlx5_10", 1));
  EXPECT_FALSE(matchIbHca(prefix.value(), "bnxt_re0", 1));

  auto exact = parseIbHca("=mlx5_1:1,mlx5_2");
  ASSERT_TRUE(exact.isOk());
  EXPECT_TRUE(matchIbHca(exact.value(), "mlx5_1", 1));
  EXPECT_FALSE(matchIbHca(exact.value(), "mlx5_1", 2));
  EXPECT_FALSE(matchIbHca(exact.value(), "mlx5_10", 1));
  EXPECT_TRUE(matchIbHca(exact.value(), "mlx5_2", 2));

  auto excl = parseIbHca("^mlx5_0");
  ASSERT_TRUE(excl.isOk());
  EXPECT_FALSE(matchIbHca(excl.value(), "mlx5_0", 1));
  EXPECT_TRUE(matchIbHca(excl.value(), "mlx5_1", 1));

  auto exclExact = parseIbHca("^=mlx5_0:2");
  ASSERT_TRUE(exclExact.isOk());
  EXPECT_TRUE(matchIbHca(exclExact.value(), "mlx5_0", 1));
  EXPECT_FALSE(matchIbHca(exclExact.value(), "mlx5_0", 2));

  auto rail = parseIbHca("mlx5_0:1:0:0");  // NCCL's rail/plane suffixes are accepted and ignored
  ASSERT_TRUE(rail.isOk());
  EXPECT_TRUE(matchIbHca(rail.value(), "mlx5_0", 1));
}

TEST(IbNet, HcaBadPortIsAnErrorNamingTheText) {
  auto bad = parseIbHca("mlx5_0:x");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("NCCL_IB_HCA=\"mlx5_0:x\""), std::string::npos) << bad.status().message();
  EXPECT_FALSE(parseIbHca("mlx5_0:0").isOk());
  EXPECT_FALSE(parseIbHca(":1").isOk());
}

TEST(IbNet, NoDeviceMeansZeroDevicesAndCleanErrors) {
  auto net = NetModule::wrapV8(ibNetTable(), nullptr);
  Status s = net->init();
  ASSERT_TRUE(s.isOk()) << s.message();
  Result<int> n = net->devices();
  ASSERT_TRUE(n.isOk());
  if (n.value() > 0) GTEST_SKIP() << "this host has an RDMA device; the zero-device path is not testable here";
  EXPECT_EQ(net->getProperties(0).status().code(), Code::kInvalidArgument);
  NetHandle handle;
  void* listen = nullptr;
  Status l = net->listen(0, &handle, &listen);
  EXPECT_EQ(l.code(), Code::kInvalidArgument) << l.message();
  EXPECT_EQ(listen, nullptr);
}
// libibverbs is dlopen()ed, and each function resolved at the symbol version this build's headers link against,
// which on the build host is the library's default (what dlsym gives). ibv_reg_dmabuf_mr is optional; rdma-core
// 34 and later have it.
TEST(IbNet, LibraryIsLoadedAtTheHeadersSymbolVersions) {
  Result<const ib::IbvLib*> lib = ib::loadIbvLib();
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value()->name, "libibverbs.so.1");
  std::string notDefault;
  for (const std::string& s : lib.value()->notDefault) notDefault += " " + s;
  EXPECT_TRUE(lib.value()->notDefault.empty()) << "pinned versions that are not the default:" << notDefault;
  EXPECT_NE(lib.value()->regDmabufMr, nullptr);
  EXPECT_EQ(ib::loadIbvLib().value(), lib.value()) << "loaded once per process";
}
#else
TEST(IbNet, NotBuilt) {
  GTEST_SKIP() << "built without libibverbs";
}
#endif

}  // namespace
}  // namespace testing
}  // namespace net
}  // namespace braid
