// ncclSetEncryption (NCCL 2.32) end to end: ranks as processes on two NCCL_HOSTID hosts, whose bootstrap and
// Socket-network connections are TLS; a rank with another key is refused with a message, not left hanging; bad
// configurations are refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/common/coll_check.h"
#include "tests/common/harness.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit: reopening the log per process
namespace braid_test {
namespace {

const char kKey[] = "encryption-test-key-0123456789abcdef";
const char kOtherKey[] = "another-test-key-0123456789abcdef!!";

ncclResult_t setKey(const char* key) {
  ncclEncryptionConfig_t c = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  c.mode = key != nullptr ? NCCL_ENCRYPTION_MODE_PSK : NCCL_ENCRYPTION_MODE_NONE;
  c.psk = key;
  return ncclSetEncryption(&c);
}

// Each rank logs to dir/rank<r>.log at `level` for `subsys`.
void logTo(const std::string& dir, int rank, const char* level, const char* subsys) {
  setenv("NCCL_DEBUG", level, 1);
  setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", (dir + "/rank" + std::to_string(rank) + ".log").c_str(), 1);
  ncclResetDebugInit();
}

struct KeyGuard {  // the test process's own setting back to plain TCP, whatever the test's path
  ~KeyGuard() { (void)ncclSetEncryption(nullptr); }
};

TEST(Encryption, CollectivesAcrossHostsRunOverTls) {
  KeyGuard guard;
  // The bootstrap root runs in this process (ncclGetUniqueId), so it takes the key too; the ranks inherit it.
  ASSERT_EQ(setKey(kKey), ncclSuccess) << ncclGetLastError(nullptr);
  char dir[] = "/tmp/braid-tls-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::vector<CollCase> cases;
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast, Coll::kSendRecv}) {
    for (size_t count : {size_t{1}, size_t{1023}, size_t{(1 << 20) + 3}}) {  // inline and data-socket messages
      cases.push_back(CollCase{c, ncclFloat32, ncclSum, count, false, 1});
    }
  }
  setenv("NCCL_NET", "Socket", 1);
  setenv("NCCL_NSOCKS_PERTHREAD", "2", 1);  // several data sockets per connection, each its own TLS session
  auto status = runProcesses(
      4,
      [&](int rank, ncclComm_t comm) {
        for (const CollCase& c : cases) {
          std::string err = runCase(c, rank, 4, comm);
          if (!err.empty()) {
            fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
            return 1;
          }
        }
        return 0;
      },
      120, nullptr, nullptr,
      [&](int rank) {
        setenv("NCCL_HOSTID", rank % 2 == 0 ? "host-a" : "host-b", 1);
        logTo(dir, rank, "INFO", "INIT,NET");
      });
  unsetenv("NCCL_NET");
  unsetenv("NCCL_NSOCKS_PERTHREAD");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
  const std::string log = readFileText(std::string(dir) + "/rank0.log");
  EXPECT_NE(log.find("over TLS 1.3"), std::string::npos) << log;
  EXPECT_EQ(log.find("NCCL WARN"), std::string::npos) << log;
  for (int r = 0; r < 4; ++r) unlink((std::string(dir) + "/rank" + std::to_string(r) + ".log").c_str());
  rmdir(dir);
}

// Two ranks under this process's key, rank 1 switching to `rank1Key` (nullptr: none) before its init: both fail
// (rank 0 at BRAID_TIMEOUT=5), and rank 1's log holds `expected`.
void expectRank1Refused(const char* rank1Key, const char* expected) {
  KeyGuard guard;
  ASSERT_EQ(setKey(kKey), ncclSuccess) << ncclGetLastError(nullptr);
  char dir[] = "/tmp/braid-tls-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  setenv("BRAID_TIMEOUT", "5", 1);
  auto status = runProcesses(
      2, [](int, ncclComm_t) { return 0; }, 60, nullptr, nullptr,
      [&](int rank) {
        logTo(dir, rank, "WARN", "ALL");
        if (rank == 1) (void)setKey(rank1Key);
      });
  unsetenv("BRAID_TIMEOUT");
  for (int r = 0; r < 2; ++r) EXPECT_NE(status[static_cast<size_t>(r)], 0) << "rank " << r;
  const std::string log = readFileText(std::string(dir) + "/rank1.log");
  EXPECT_NE(log.find(expected), std::string::npos) << log;
  for (int r = 0; r < 2; ++r) unlink((std::string(dir) + "/rank" + std::to_string(r) + ".log").c_str());
  rmdir(dir);
}

TEST(Encryption, ARankWithAnotherKeyIsRefusedWithAMessage) {
  expectRank1Refused(kOtherKey, "TLS handshake with");
}

// The listener says nothing to a plain connection; the plain rank's error says why that may be.
TEST(Encryption, ARankWithoutAKeyIsRefusedWithAHint) {
  expectRank1Refused(nullptr, "this one has no key");
}

// NCCL 2.32's layout: size, magic, version, mode, psk (32 bytes on LP64).
static_assert(sizeof(ncclEncryptionConfig_t) == 32 && offsetof(ncclEncryptionConfig_t, mode) == 16 &&
                  offsetof(ncclEncryptionConfig_t, psk) == 24,
              "ncclEncryptionConfig_t layout");

TEST(Encryption, BadConfigurationsAreRefusedByName) {
  KeyGuard guard;
  ncclEncryptionConfig_t c = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(ncclEncryptionConfig_t));
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, static_cast<unsigned>(NCCL_VERSION_CODE));
  EXPECT_EQ(c.mode, NCCL_ENCRYPTION_MODE_NONE);
  EXPECT_EQ(c.psk, nullptr);
  EXPECT_EQ(ncclSetEncryption(&c), ncclSuccess);
  EXPECT_EQ(ncclSetEncryption(nullptr), ncclSuccess);

  ncclEncryptionConfig_t raw{};
  raw.mode = NCCL_ENCRYPTION_MODE_PSK;
  raw.psk = kKey;
  EXPECT_EQ(ncclSetEncryption(&raw), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_ENCRYPTION_CONFIG_INITIALIZER"), std::string::npos);

  c.mode = 7;
  EXPECT_EQ(ncclSetEncryption(&c), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("config->mode=7"), std::string::npos);

  c.mode = NCCL_ENCRYPTION_MODE_PSK;
  c.psk = nullptr;
  EXPECT_EQ(ncclSetEncryption(&c), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("config->psk is NULL"), std::string::npos);

  c.psk = "too-short-a-key";
  EXPECT_EQ(ncclSetEncryption(&c), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("15 bytes long; a key of at least 32 bytes"), std::string::npos)
      << ncclGetLastError(nullptr);
}

}  // namespace
}  // namespace braid_test
