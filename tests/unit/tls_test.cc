// TLS streams (ncclSetEncryption's layer) over socket pairs, with a relay between the two ends that records or
// alters what crosses: the bytes on the wire are not the data, altered bytes are refused, and a peer with another
// key cannot connect.
#include "src/common/tls.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace braid {
namespace {

const char kKeyA[] = "key-a-0123456789abcdef0123456789abcdef";
const char kKeyB[] = "key-b-0123456789abcdef0123456789abcdef";

// client fd <-> [relay] <-> server fd. The relay copies both ways, keeps what went client->server, and can flip one
// byte of it (the `flipAt`-th).
class Relay {
 public:
  explicit Relay(long flipAt = -1) : flipAt_(flipAt) {
    int a[2], b[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    client = a[0];
    server = b[0];
    mid_[0] = a[1];
    mid_[1] = b[1];
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
    for (int fd : {client, server, mid_[0], mid_[1]}) ::close(fd);
  }
  std::string seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  int client = -1, server = -1;

 private:
  void run() {
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{mid_[0], POLLIN, 0}, {mid_[1], POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if ((p[i].revents & POLLIN) == 0) continue;
        ssize_t n = ::recv(mid_[i], buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0) continue;
        if (i == 0) {
          std::lock_guard<std::mutex> lock(mu_);
          const long start = static_cast<long>(seen_.size());
          if (flipAt_ >= start && flipAt_ < start + n) buf[flipAt_ - start] ^= 0x40;
          seen_.append(buf, static_cast<size_t>(n));
        }
        for (ssize_t off = 0; off < n;) {
          ssize_t w = ::send(mid_[1 - i], buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
          if (w <= 0) break;
          off += w;
        }
      }
    }
  }
  const long flipAt_;
  int mid_[2];
  std::mutex mu_;
  std::string seen_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Both handshakes, stepped in turn: ok, or the first error.
Status handshakeBoth(TlsStream& c, TlsStream& s) {
  auto wait = WaitContext::withTimeout(nullptr, 10.0);
  while (!c.handshakeDone() || !s.handshakeDone()) {
    BRAID_RETURN_IF_ERROR(c.handshakeStep().status());
    BRAID_RETURN_IF_ERROR(s.handshakeStep().status());
    if (wait.expired()) return remoteError("handshake took more than 10 s");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::ok();
}

// Sends `data` on one stream while the other receives it; the bytes received.
std::string moveAll(TlsStream& from, TlsStream& to, const std::string& data, int* recvErrno = nullptr) {
  std::string got(data.size(), '\0');
  std::thread sender([&] {
    size_t off = 0;
    auto wait = WaitContext::withTimeout(nullptr, 10.0);
    while (off < data.size() && !wait.expired()) {
      ssize_t n = from.send(data.data() + off, data.size() - off);
      if (n > 0) off += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN) return;
    }
  });
  size_t off = 0;
  auto wait = WaitContext::withTimeout(nullptr, 10.0);
  while (off < got.size() && !wait.expired()) {
    ssize_t n = to.recv(&got[off], got.size() - off);
    if (n > 0) off += static_cast<size_t>(n);
    if (n == 0) {
      if (recvErrno != nullptr) *recvErrno = -1;
      break;
    }
    if (n < 0 && errno != EAGAIN) {
      if (recvErrno != nullptr) *recvErrno = errno;
      break;
    }
  }
  sender.join();
  got.resize(off);
  return got;
}

std::string pattern(size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += "BRAID-PLAINTEXT-" + std::to_string(s.size()) + ";";
  s.resize(bytes);
  return s;
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = setSocketEncryption(kKeyA);
    if (!st.isOk()) GTEST_SKIP() << "OpenSSL 3 cannot be loaded here: " << st.message();
  }
  void TearDown() override { clearSocketEncryption(); }
};

TEST_F(Tls, DataCrossesIntactAndNeverInTheClear) {
  Relay relay;
  auto c = TlsStream::start(relay.client, false, "server");
  auto s = TlsStream::start(relay.server, true, "client");
  ASSERT_TRUE(c.isOk() && s.isOk());
  ASSERT_TRUE(handshakeBoth(*c.value(), *s.value()).isOk());
  const std::string data = pattern(3 << 20);  // several records, partial writes
  int err = 0;
  const std::string there = moveAll(*c.value(), *s.value(), data, &err);
  EXPECT_TRUE(there == data) << there.size() << " of " << data.size() << " bytes, errno " << err;
  const std::string back = moveAll(*s.value(), *c.value(), data.substr(0, 1000), &err);
  EXPECT_TRUE(back == data.substr(0, 1000)) << back.size() << " of 1000 bytes, errno " << err;
  const std::string wire = relay.seen();
  EXPECT_GT(wire.size(), data.size());
  EXPECT_EQ(wire.find("BRAID-PLAINTEXT-"), std::string::npos) << "plaintext on the wire";
}

TEST_F(Tls, WithoutEncryptionTheRelaySeesThePlaintext) {
  // The relay's own check has teeth: plain sockets through it show the data.
  Relay relay;
  const std::string data = pattern(4096);
  ASSERT_EQ(::send(relay.client, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  std::string got(data.size(), '\0');
  size_t off = 0;
  while (off < got.size()) {
    ssize_t n = ::recv(relay.server, &got[off], got.size() - off, 0);
    ASSERT_GT(n, 0);
    off += static_cast<size_t>(n);
  }
  EXPECT_EQ(got, data);
  EXPECT_NE(relay.seen().find("BRAID-PLAINTEXT-"), std::string::npos);
}

TEST_F(Tls, AnAlteredByteIsRefusedNotDelivered) {
  // Past the handshake (a few hundred bytes), inside the data's records.
  Relay relay(/*flipAt=*/6000);
  auto c = TlsStream::start(relay.client, false, "server");
  auto s = TlsStream::start(relay.server, true, "client");
  ASSERT_TRUE(c.isOk() && s.isOk());
  ASSERT_TRUE(handshakeBoth(*c.value(), *s.value()).isOk());
  int err = 0;
  const std::string data = pattern(64 << 10);
  const std::string got = moveAll(*c.value(), *s.value(), data, &err);
  EXPECT_LT(got.size(), data.size());
  EXPECT_EQ(err, EPROTO);
  EXPECT_TRUE(data.compare(0, got.size(), got) == 0) << "what was delivered before the altered record is intact";
  EXPECT_NE(s.value()->lastError().find("TLS receive with client failed"), std::string::npos) << s.value()->lastError();
}

TEST_F(Tls, APeerWithAnotherKeyCannotConnect) {
  Relay relay;
  auto s = TlsStream::start(relay.server, true, "client");  // key A
  ASSERT_TRUE(setSocketEncryption(kKeyB).isOk());
  auto c = TlsStream::start(relay.client, false, "server");  // key B
  ASSERT_TRUE(c.isOk() && s.isOk());
  Status st = handshakeBoth(*c.value(), *s.value());
  EXPECT_EQ(st.code(), Code::kRemoteError);
  EXPECT_NE(st.message().find("TLS handshake with"), std::string::npos) << st.message();
  EXPECT_EQ(relay.seen().find("BRAID"), std::string::npos);
}

TEST_F(Tls, TheSameKeyConnectsAgainAfterAKeyChange) {
  ASSERT_TRUE(setSocketEncryption(kKeyB).isOk());
  Relay relay;
  auto c = TlsStream::start(relay.client, false, "server");
  auto s = TlsStream::start(relay.server, true, "client");
  ASSERT_TRUE(c.isOk() && s.isOk());
  EXPECT_TRUE(handshakeBoth(*c.value(), *s.value()).isOk());
}

TEST_F(Tls, TrafficKeysAreRenewedAndTheDataStaysIntact) {
  Relay relay;
  auto c = TlsStream::start(relay.client, false, "server");
  auto s = TlsStream::start(relay.server, true, "client");
  ASSERT_TRUE(c.isOk() && s.isOk());
  ASSERT_TRUE(handshakeBoth(*c.value(), *s.value()).isOk());
  c.value()->setRekeyBytes(64 << 10);
  const std::string data = pattern(3 << 20);
  int err = 0;
  const std::string got = moveAll(*c.value(), *s.value(), data, &err);
  EXPECT_TRUE(got == data) << got.size() << " of " << data.size() << " bytes, errno " << err;
  EXPECT_GE(c.value()->keyUpdates(), 40u);  // 3 MB in 64 KB turns (sends may move up to a few records at once)
}

TEST_F(Tls, ASendToAClosedPeerFailsAsSendDoes) {
  // ::send's contract after the peer's close, after a receive saw the end of stream: -1 and EPIPE (or ECONNRESET).
  // (finish() also maps an end of stream OpenSSL reports on a send to EPIPE; this socket pair does not produce one.)
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto c = TlsStream::start(fds[0], false, "server");
  auto s = TlsStream::start(fds[1], true, "client");
  ASSERT_TRUE(c.isOk() && s.isOk());
  ASSERT_TRUE(handshakeBoth(*c.value(), *s.value()).isOk());
  s.value().reset();
  ::close(fds[1]);
  char b[4096] = {};
  EXPECT_EQ(c.value()->recv(b, sizeof(b)), 0);  // the end of stream, seen first by a receive
  ssize_t n = 1;
  for (int i = 0; i < 1000 && n > 0; ++i) n = c.value()->send(b, sizeof(b));
  EXPECT_EQ(n, -1);
  EXPECT_TRUE(errno == EPIPE || errno == ECONNRESET) << strerror(errno);
  ::close(fds[0]);
}

TEST(TlsKey, ShortOrMissingKeysAreRefusedByName) {
  Status st = setSocketEncryption("short");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("5 bytes long; a key of at least 32 bytes"), std::string::npos) << st.message();
  EXPECT_EQ(setSocketEncryption(nullptr).code(), Code::kInvalidArgument);
  EXPECT_FALSE(socketEncryptionOn());
}

}  // namespace
}  // namespace braid
