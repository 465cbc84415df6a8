// Bootstrap interface choice: without NCCL_SOCKET_IFNAME a rank listens on the interface routed to the root, not on
// the first interface in the list (tests/multihost's ifname test covers the multi-host case with namespaces).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "src/common/socket.h"

namespace braid {
namespace {

// Unsets one environment variable for a test and restores it after.
class UnsetEnv {
 public:
  explicit UnsetEnv(const char* name) : name_(name) {
    const char* v = getenv(name);
    if (v != nullptr) saved_ = std::make_pair(true, std::string(v));
    unsetenv(name);
  }
  ~UnsetEnv() {
    if (saved_.first) setenv(name_, saved_.second.c_str(), 1);
  }

 private:
  const char* name_;
  std::pair<bool, std::string> saved_{false, ""};
};

std::string host(const SocketAddress& a) {
  const std::string s = a.toString();
  return s.substr(0, s.rfind(':'));
}

// This machine's non-loopback IPv4 addresses that are up, with their interfaces.
std::vector<std::pair<std::string, std::string>> localAddresses() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text, sizeof(text));
    out.emplace_back(text, it->ifa_name);
  }
  freeifaddrs(list);
  return out;
}

TEST(SocketRoute, LoopbackRootIsReachedThroughLo) {
  Result<SocketAddress> root = parseSocketAddress("127.0.0.1:29500");
  ASSERT_TRUE(root.isOk());
  std::string name;
  Result<SocketAddress> src = findRouteSource(root.take(), &name);
  ASSERT_TRUE(src.isOk()) << src.status().message();
  EXPECT_EQ(host(src.take()), "127.0.0.1");
  EXPECT_EQ(name, "lo");
}

// A root at any of this machine's addresses is reached from that very address, whatever the interface order: the
// rank must listen there, even when another interface comes first in the list (the bug: it took the first one).
TEST(SocketRoute, BootstrapListensOnTheInterfaceRoutedToTheRoot) {
  UnsetEnv ifname("NCCL_SOCKET_IFNAME");
  UnsetEnv family("NCCL_SOCKET_FAMILY");
  const auto locals = localAddresses();
  if (locals.empty()) GTEST_SKIP() << "no non-loopback IPv4 interface here";
  for (const auto& [addr, ifName] : locals) {
    Result<SocketAddress> root = parseSocketAddress(addr + ":29500");
    ASSERT_TRUE(root.isOk());
    const SocketAddress toward = root.take();
    std::string name;
    Result<SocketAddress> chosen = findBootstrapInterface(&name, &toward);
    ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
    const SocketAddress got = chosen.take();
    EXPECT_EQ(host(got), addr);
    EXPECT_EQ(name, ifName);
    EXPECT_EQ(got.port(), 0);
  }
}

TEST(SocketRoute, SocketIfnameStillDecides) {
  const char* old = getenv("NCCL_SOCKET_IFNAME");
  const std::string saved = old != nullptr ? old : "";
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  const auto locals = localAddresses();
  Result<SocketAddress> root =
      parseSocketAddress((locals.empty() ? std::string("127.0.0.1") : locals[0].first) + ":29500");
  ASSERT_TRUE(root.isOk());
  const SocketAddress toward = root.take();
  std::string name;
  Result<SocketAddress> chosen = findBootstrapInterface(&name, &toward);
  if (old != nullptr) {
    setenv("NCCL_SOCKET_IFNAME", saved.c_str(), 1);
  } else {
    unsetenv("NCCL_SOCKET_IFNAME");
  }
  ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
  EXPECT_EQ(host(chosen.take()), "127.0.0.1");
  EXPECT_EQ(name, "lo");
}

}  // namespace
}  // namespace braid
