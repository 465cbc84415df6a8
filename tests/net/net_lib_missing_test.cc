// The IB and OFI networks when their library cannot be used. ctest runs this group twice (CMakeLists.txt):
// net_lib_missing points BRAID_IBVERBS_LIB / BRAID_LIBFABRIC_LIB at files that do not exist, net_lib_nosymbol at
// libm.so.6 (loads, exports none of the functions); compat_no_rdma_needed runs it once more with the default
// names in a mount namespace where both libraries are /dev/null. Either way the network initialises with zero
// devices and says why in an INFO line naming the library and dlerror(), the loader falls back to Socket, and
// NCCL_NET=IB / NCCL_NET=OFI is an error naming the library. The libraries are loaded once per process, hence
// one process per setting.
#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "tests/net/net_test_util.h"

namespace braid {
namespace net {
namespace testing {
namespace {

std::mutex gLogMu;
std::vector<std::string> gLog;

void captureLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(gLogMu);
  gLog.push_back(std::string(level == NCCL_LOG_INFO ? "INFO " : "OTHER ") + buf);
}

// The INFO line of init that names `lib`; empty when there is none.
std::string infoNaming(const std::string& lib) {
  std::lock_guard<std::mutex> lk(gLogMu);
  for (const std::string& l : gLog) {
    if (l.rfind("INFO ", 0) == 0 && l.find(lib) != std::string::npos) return l;
  }
  return std::string();
}

class NetLibMissing : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* ib = getenv("BRAID_IBVERBS_LIB");
    const char* ofi = getenv("BRAID_LIBFABRIC_LIB");
    if (ib == nullptr || ofi == nullptr) GTEST_SKIP() << "run by ctest net_lib_missing / net_lib_nosymbol";
    ibLib_ = ib;
    ofiLib_ = ofi;
  }
  // What the INFO line and the error must say: "<lib> could not be loaded: <dlerror()>" when this process cannot
  // dlopen it either, else "<lib> has no <first symbol>@<version>".
  static std::string expectedCause(const std::string& lib, const std::string& firstSymbol) {
    dlerror();
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = dlerror();
      return lib + " could not be loaded: " + (err != nullptr ? err : "");
    }
    dlclose(h);
    return lib + " has no " + firstSymbol + "@";
  }
  void expectZeroDevicesWithInfo(const ncclNet_v8_t* table, const std::string& lib, const std::string& symbol) {
    {
      std::lock_guard<std::mutex> lk(gLogMu);
      gLog.clear();
    }
    ASSERT_EQ(table->init(captureLogger), ncclSuccess);
    int n = -1;
    ASSERT_EQ(table->devices(&n), ncclSuccess);
    EXPECT_EQ(n, 0);
    std::string info = infoNaming(lib);
    ASSERT_FALSE(info.empty()) << "no INFO line names " << lib;
    EXPECT_NE(info.find(expectedCause(lib, symbol)), std::string::npos) << info;
  }
  void expectNcclNetErrorNaming(const char* net, const std::string& lib, const std::string& symbol) {
    ScopedEnv n("NCCL_NET", net);
    Result<NetSelection> sel = loadNetworks();
    ASSERT_FALSE(sel.isOk());
    EXPECT_EQ(sel.status().code(), Code::kInvalidArgument);
    const std::string& m = sel.status().message();
    EXPECT_NE(m.find(std::string("NCCL_NET=") + net), std::string::npos) << m;
    EXPECT_NE(m.find("has no devices on this host: " + expectedCause(lib, symbol)), std::string::npos) << m;
  }

  ScopedEnv ifname_{"NCCL_SOCKET_IFNAME", "lo"};
  ScopedEnv net_{"NCCL_NET", nullptr};
  ScopedEnv plugin_{"NCCL_NET_PLUGIN", "none"};
  ScopedEnv ibDisable_{"NCCL_IB_DISABLE", nullptr};
  std::string ibLib_;
  std::string ofiLib_;
};

TEST_F(NetLibMissing, IbHasNoDevicesAndSaysWhy) {
  if (ibNetTable() == nullptr) GTEST_SKIP() << "built without the IB network";
  expectZeroDevicesWithInfo(ibNetTable(), ibLib_, "ibv_get_device_list");
}

TEST_F(NetLibMissing, OfiHasNoDevicesAndSaysWhy) {
  if (ofiNetTable() == nullptr) GTEST_SKIP() << "built without the OFI network";
  expectZeroDevicesWithInfo(ofiNetTable(), ofiLib_, "fi_getinfo");
}

TEST_F(NetLibMissing, DefaultFallsBackToSocket) {
  Result<NetSelection> sel = loadNetworks();
  ASSERT_TRUE(sel.isOk()) << sel.status().message();
  ASSERT_NE(sel.value().chosen, nullptr);
  EXPECT_EQ(sel.value().chosen->name(), "Socket");
}

TEST_F(NetLibMissing, NcclNetIbNamesTheLibrary) {
  if (ibNetTable() == nullptr) GTEST_SKIP() << "built without the IB network";
  expectNcclNetErrorNaming("IB", ibLib_, "ibv_get_device_list");
}

TEST_F(NetLibMissing, NcclNetOfiNamesTheLibrary) {
  if (ofiNetTable() == nullptr) GTEST_SKIP() << "built without the OFI network";
  expectNcclNetErrorNaming("OFI", ofiLib_, "fi_getinfo");
  expectNcclNetErrorNaming("libfabric", ofiLib_, "fi_getinfo");
}

}  // namespace
}  // namespace testing
}  // namespace net
}  // namespace braid
