#include "src/common/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "src/common/dyn_lib.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/common/sha256.h"

namespace braid {
namespace {

// Every OpenSSL function braid calls, bound at OpenSSL 3.0's symbol version (the headers' layout).
// clang-format off
#define BRAID_SSL_FNS(X)                                                                                         \
  X(OPENSSL_init_ssl) X(TLS_method) X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_ctrl) X(SSL_CTX_set_ciphersuites) \
  X(SSL_CTX_set_options) X(SSL_CTX_set_verify) X(SSL_CTX_set_num_tickets)                                      \
  X(SSL_CTX_set_psk_use_session_callback) X(SSL_CTX_set_psk_find_session_callback)                             \
  X(SSL_new) X(SSL_free) X(SSL_set_bio) X(SSL_get_rbio) X(SSL_set_connect_state) X(SSL_set_accept_state)       \
  X(SSL_do_handshake) X(SSL_read_ex) X(SSL_write_ex) X(SSL_get_error) X(SSL_pending) X(SSL_session_reused)      \
  X(SSL_key_update) X(SSL_CIPHER_find) X(SSL_SESSION_new) X(SSL_SESSION_free) X(SSL_SESSION_set1_master_key)   \
  X(SSL_SESSION_set_cipher) X(SSL_SESSION_set_protocol_version)
#define BRAID_CRYPTO_FNS(X)                                                                                      \
  X(ERR_get_error) X(ERR_error_string_n) X(ERR_clear_error) X(BIO_meth_new) X(BIO_meth_set_write)              \
  X(BIO_meth_set_read) X(BIO_meth_set_ctrl) X(BIO_meth_set_create) X(BIO_get_new_index) X(BIO_new)            \
  X(BIO_set_data) X(BIO_get_data) X(BIO_set_init) X(BIO_set_flags) X(BIO_clear_flags)
// clang-format on

struct SslApi {
#define BRAID_SSL_PTR(name) decltype(&::name) name = nullptr;
  BRAID_SSL_FNS(BRAID_SSL_PTR)
  BRAID_CRYPTO_FNS(BRAID_SSL_PTR)
#undef BRAID_SSL_PTR
};

constexpr char kIdentity[] = "braid-psk-v1";  // the PSK identity both ends offer and expect
constexpr size_t kMinKeyBytes = 32;           // what NCCL 2.32 asks of a key

struct TlsState {
  std::mutex mu;
  bool loaded = false;
  Status loadError;
  SslApi api;
  BIO_METHOD* bio = nullptr;
  SSL_CTX* client = nullptr;
  SSL_CTX* server = nullptr;
  bool on = false;
  bool chosen = false;  // setSocketEncryption or clearSocketEncryption was called: the environment is not read
  bool envRead = false;
  Status envError;
  Digest256 key{};  // HKDF-SHA256 of the application's key: the TLS 1.3 PSK
};
TlsState& tls() {
  static TlsState* s = new TlsState();  // never destroyed: connections may close during exit
  return *s;
}
const SslApi& ssl() {
  return tls().api;
}

// RFC 5869 with SHA-256: a zero salt, braid's label as info, one 32-byte block.
Digest256 deriveKey(const char* psk, size_t bytes) {
  const std::array<uint8_t, 32> salt{};
  const Digest256 prk = hmacSha256(salt.data(), salt.size(), psk, bytes);
  static const char kInfo[] = "braid TLS 1.3 PSK v1";
  uint8_t block[sizeof(kInfo)];
  std::memcpy(block, kInfo, sizeof(kInfo) - 1);
  block[sizeof(kInfo) - 1] = 1;
  return hmacSha256(prk.data(), prk.size(), block, sizeof(block));
}

// The first error on this thread's OpenSSL queue, which is emptied (the application's thread may share it).
std::string opensslError(const SslApi& a) {
  const unsigned long e = a.ERR_get_error();
  a.ERR_clear_error();
  if (e == 0) return "no OpenSSL error recorded";
  char text[256];
  a.ERR_error_string_n(e, text, sizeof(text));
  return text;
}

// The TLS 1.3 session both ends resume: the stream's key as its secret, TLS_AES_128_GCM_SHA256 as its suite.
SSL_SESSION* makePskSession(SSL* s, const Digest256& key) {
  const SslApi& a = ssl();
  static const unsigned char kAes128GcmSha256[] = {0x13, 0x01};
  const SSL_CIPHER* cipher = a.SSL_CIPHER_find(s, kAes128GcmSha256);
  SSL_SESSION* session = a.SSL_SESSION_new();
  if (session == nullptr || cipher == nullptr || a.SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1 ||
      a.SSL_SESSION_set_cipher(session, cipher) != 1 ||
      a.SSL_SESSION_set1_master_key(session, key.data(), key.size()) != 1) {
    if (session != nullptr) a.SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

}  // namespace

// The BIO under every session: ::send with MSG_NOSIGNAL (OpenSSL's socket BIO writes with write(), and a peer gone
// would raise SIGPIPE in the application), both directions non-blocking.
struct TlsBio {
  static int write(BIO* b, const char* data, int size) { return move(b, const_cast<char*>(data), size, true); }
  static int read(BIO* b, char* data, int size) { return move(b, data, size, false); }
  static int move(BIO* b, char* data, int size, bool sending) {
    const SslApi& a = ssl();
    auto* t = static_cast<TlsStream*>(a.BIO_get_data(b));
    a.BIO_clear_flags(b, BIO_FLAGS_RWS | BIO_FLAGS_SHOULD_RETRY);
    const size_t bytes = static_cast<size_t>(size);
    const ssize_t n =
        sending ? ::send(t->fd_, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(t->fd_, data, bytes, MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);
    t->ioErrno_ = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      a.BIO_set_flags(b, (sending ? BIO_FLAGS_WRITE : BIO_FLAGS_READ) | BIO_FLAGS_SHOULD_RETRY);
    }
    return -1;
  }
  static long ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }
  // The key of the stream whose handshake runs on `s` (its BIO's data), taken when the stream started.
  static SSL_SESSION* session(SSL* s) {
    const SslApi& a = ssl();
    auto* t = static_cast<TlsStream*>(a.BIO_get_data(a.SSL_get_rbio(s)));
    return makePskSession(s, t->key_);
  }
  static int create(BIO* b) {
    ssl().BIO_set_init(b, 1);
    return 1;
  }
};

namespace {

int usePsk(SSL* s, const EVP_MD*, const unsigned char** id, size_t* idLen, SSL_SESSION** session) {
  *id = reinterpret_cast<const unsigned char*>(kIdentity);
  *idLen = sizeof(kIdentity) - 1;
  *session = TlsBio::session(s);
  return *session != nullptr ? 1 : 0;
}

int findPsk(SSL* s, const unsigned char* id, size_t idLen, SSL_SESSION** session) {
  *session = nullptr;
  if (idLen != sizeof(kIdentity) - 1 || std::memcmp(id, kIdentity, idLen) != 0) return 1;  // unknown: no PSK
  *session = TlsBio::session(s);
  return *session != nullptr ? 1 : 0;
}

// Loads OpenSSL and makes both contexts (tls().mu held). Once: a failure is kept and returned again.
Status loadLocked() {
  TlsState& s = tls();
  if (s.loaded) return s.loadError;
  s.loaded = true;
  auto fail = [&](Status st) {
    s.loadError = st.withContext(
        "ncclSetEncryption: TLS needs OpenSSL 3 (libssl.so.3 and libcrypto.so.3; Debian/Ubuntu package libssl3)");
    return s.loadError;
  };
  Result<DynLib> crypto = DynLib::open("libcrypto.so.3");
  if (!crypto.isOk()) return fail(crypto.status());
  Result<DynLib> sslLib = DynLib::open("libssl.so.3");
  if (!sslLib.isOk()) return fail(sslLib.status());
  SslApi& a = s.api;
  const char* kVersion = "OPENSSL_3.0.0";
#define BRAID_SSL_BIND(name)                                 \
  {                                                          \
    Status b = sslLib.value().bind(a.name, #name, kVersion); \
    if (!b.isOk()) return fail(b);                           \
  }
#define BRAID_CRYPTO_BIND(name)                              \
  {                                                          \
    Status b = crypto.value().bind(a.name, #name, kVersion); \
    if (!b.isOk()) return fail(b);                           \
  }
  BRAID_SSL_FNS(BRAID_SSL_BIND)
  BRAID_CRYPTO_FNS(BRAID_CRYPTO_BIND)
#undef BRAID_SSL_BIND
#undef BRAID_CRYPTO_BIND
  // No cleanup at exit: detached threads (a bootstrap root, a communicator never destroyed) may still hold sessions.
  if (a.OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, nullptr) != 1) return fail(systemError("OPENSSL_init_ssl failed"));
  s.bio = a.BIO_meth_new(a.BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "braid socket");
  if (s.bio == nullptr || a.BIO_meth_set_write(s.bio, TlsBio::write) != 1 ||
      a.BIO_meth_set_read(s.bio, TlsBio::read) != 1 || a.BIO_meth_set_ctrl(s.bio, TlsBio::ctrl) != 1 ||
      a.BIO_meth_set_create(s.bio, TlsBio::create) != 1) {
    return fail(systemError("cannot make a BIO method: %s", opensslError(a).c_str()));
  }
  for (SSL_CTX** ctx : {&s.client, &s.server}) {
    *ctx = a.SSL_CTX_new(a.TLS_method());
    if (*ctx == nullptr || a.SSL_CTX_ctrl(*ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_3_VERSION, nullptr) != 1 ||
        a.SSL_CTX_ctrl(*ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, TLS1_3_VERSION, nullptr) != 1 ||
        a.SSL_CTX_set_ciphersuites(*ctx, "TLS_AES_128_GCM_SHA256") != 1) {
      return fail(systemError("cannot make a TLS 1.3 context: %s", opensslError(a).c_str()));
    }
    // Partial writes and retries from a moved buffer: the callers keep ::send's contract. A peer's close without
    // close_notify is an end of stream (braid's framing carries every length, so a cut message is still seen).
    a.SSL_CTX_ctrl(*ctx, SSL_CTRL_MODE, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, nullptr);
    a.SSL_CTX_set_options(*ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    a.SSL_CTX_set_num_tickets(*ctx, 0);  // nothing to resume but the key itself
  }
  // No certificates: a client that would accept one, or a server that would present one, could talk to a peer
  // without the key. The client verifies (and so refuses any certificate); the server has none.
  a.SSL_CTX_set_verify(s.client, SSL_VERIFY_PEER, nullptr);
  a.SSL_CTX_set_verify(s.server, SSL_VERIFY_NONE, nullptr);
  a.SSL_CTX_set_psk_use_session_callback(s.client, usePsk);
  a.SSL_CTX_set_psk_find_session_callback(s.server, findPsk);
  s.loadError = Status::ok();
  return Status::ok();
}

}  // namespace

Status setSocketEncryption(const char* psk) {
  if (psk == nullptr) return invalidArgument("config->psk is NULL (NCCL_ENCRYPTION_MODE_PSK needs a key)");
  const size_t bytes = strlen(psk);
  if (bytes < kMinKeyBytes) {
    return invalidArgument("config->psk is %zu bytes long; a key of at least %zu bytes is needed", bytes, kMinKeyBytes);
  }
  TlsState& s = tls();
  std::lock_guard<std::mutex> lock(s.mu);
  BRAID_RETURN_IF_ERROR(loadLocked());
  s.key = deriveKey(psk, bytes);
  s.on = true;
  s.chosen = true;
  return Status::ok();
}

void clearSocketEncryption() {
  TlsState& s = tls();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.chosen && !params::EncryptionKeyFile().empty()) {
    BRAID_WARN(
        "ncclSetEncryption: NCCL_ENCRYPTION_MODE_NONE overrides BRAID_ENCRYPTION_KEY_FILE=%s: connections made "
        "from now on are plain TCP",
        params::EncryptionKeyFile().c_str());
  }
  s.on = false;
  s.chosen = true;
  s.key.fill(0);
}

Status socketEncryptionFromEnv() {
  TlsState& s = tls();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.chosen) return Status::ok();
  if (s.envRead) return s.envError;
  s.envRead = true;
  const std::string path = params::EncryptionKeyFile();
  if (path.empty()) return Status::ok();
  auto fail = [&](Status st) {
    s.envError = st;
    return st;
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    return fail(invalidArgument("BRAID_ENCRYPTION_KEY_FILE=%s cannot be read: %s", path.c_str(), strerror(err)));
  }
  std::string key(4096, '\0');
  struct Wipe {  // the key's bytes are cleared whichever way this returns
    std::string& k;
    ~Wipe() { explicit_bzero(&k[0], k.size()); }
  } wipe{key};
  const ssize_t n = read(fd, &key[0], key.size());
  close(fd);
  if ((st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
    return fail(invalidArgument(
        "BRAID_ENCRYPTION_KEY_FILE=%s must belong to this user (uid %u; the file's is %u) and be accessible by it "
        "only (mode %03o): chown it and chmod 600 it",
        path.c_str(), static_cast<unsigned>(geteuid()), static_cast<unsigned>(st.st_uid),
        static_cast<unsigned>(st.st_mode & 0777)));
  }
  key.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (!key.empty() && key.back() == '\n') key.pop_back();
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (key.size() < kMinKeyBytes || key.find('\0') != std::string::npos) {
    return fail(
        invalidArgument("BRAID_ENCRYPTION_KEY_FILE=%s holds a key of %zu bytes; at least %zu are needed (and no "
                        "NUL byte)",
                        path.c_str(), key.size(), kMinKeyBytes));
  }
  Status loaded = loadLocked();
  if (!loaded.isOk()) return fail(loaded);
  s.key = deriveKey(key.data(), key.size());
  s.on = true;
  BRAID_INFO(kLogInit | kLogNet,
             "TLS 1.3 with the key of BRAID_ENCRYPTION_KEY_FILE=%s for bootstrap and Socket-network "
             "connections",
             path.c_str());
  return Status::ok();
}

bool socketEncryptionOn() {
  TlsState& s = tls();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.on;
}

struct TlsStream::Ssl {
  SSL* s = nullptr;
};

Result<std::unique_ptr<TlsStream>> TlsStream::start(int fd, bool server, std::string peer) {
  TlsState& st = tls();
  Digest256 key;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.on) return internalError("TLS stream to %s started without a key", peer.c_str());
    key = st.key;
  }
  const SslApi& a = st.api;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return errnoError(errno, "making the socket to %s non-blocking for TLS", peer.c_str());
  }
  std::unique_ptr<TlsStream> t(new TlsStream(fd, std::move(peer)));
  t->key_ = key;
  t->ssl_ = new Ssl();
  t->ssl_->s = a.SSL_new(server ? st.server : st.client);
  BIO* bio = t->ssl_->s == nullptr ? nullptr : a.BIO_new(st.bio);
  if (bio == nullptr)
    return systemError("cannot start a TLS session with %s: %s", t->peer_.c_str(), opensslError(a).c_str());
  a.BIO_set_data(bio, t.get());
  a.SSL_set_bio(t->ssl_->s, bio, bio);  // the session owns the BIO
  if (server) {
    a.SSL_set_accept_state(t->ssl_->s);
  } else {
    a.SSL_set_connect_state(t->ssl_->s);
  }
  return t;
}

TlsStream::~TlsStream() {
  explicit_bzero(key_.data(), key_.size());
  if (ssl_ != nullptr && ssl_->s != nullptr) ssl().SSL_free(ssl_->s);
  delete ssl_;
}

Result<bool> TlsStream::handshakeStep() {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return true;
  const SslApi& a = ssl();
  a.ERR_clear_error();
  ioErrno_ = 0;
  const int rc = a.SSL_do_handshake(ssl_->s);
  if (rc == 1) {
    // Only a handshake that resumed the key's session proves the peer has the key.
    if (a.SSL_session_reused(ssl_->s) != 1) {
      return remoteError("TLS handshake with %s did not use the pre-shared key: refused", peer_.c_str());
    }
    done_ = true;
    return true;
  }
  const int e = a.SSL_get_error(ssl_->s, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return false;
  if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
    return remoteError("TLS handshake with %s failed: the connection %s", peer_.c_str(),
                       ioErrno_ != 0 ? strerror(ioErrno_) : "was closed by the peer (is its key the same?)");
  }
  return remoteError(
      "TLS handshake with %s failed: %s (every process must call ncclSetEncryption with the same key before "
      "connecting)",
      peer_.c_str(), opensslError(a).c_str());
}

Status TlsStream::handshake(const WaitContext& wait) {
  while (true) {
    BRAID_ASSIGN_OR_RETURN(bool finished, handshakeStep());
    if (finished) return Status::ok();
    if (wait.aborted()) return invalidUsage("TLS handshake with %s aborted", peer_.c_str());
    if (wait.expired()) {
      return remoteError("TLS handshake with %s did not finish before the deadline (BRAID_TIMEOUT)", peer_.c_str());
    }
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, wait.pollMs(20));
  }
}

ssize_t TlsStream::finish(int rc, size_t moved, const char* what) {
  const SslApi& a = ssl();
  if (rc == 1) return static_cast<ssize_t>(moved);
  const int e = a.SSL_get_error(ssl_->s, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    errno = EAGAIN;
    return -1;
  }
  const bool sending = what[0] == 's';
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ioErrno_ == 0)) {  // end of stream
    if (!sending) return 0;
    errno = EPIPE;  // ::send's answer to a closed connection (0 would read as "try again")
    return -1;
  }
  if (e == SSL_ERROR_SYSCALL) {
    errno = ioErrno_;
    return -1;
  }
  error_ = strPrintf("TLS %s with %s failed: %s", what, peer_.c_str(), opensslError(a).c_str());
  errno = EPROTO;
  return -1;
}

ssize_t TlsStream::send(const void* data, size_t size) {
  return io(true, const_cast<void*>(data), size);
}

ssize_t TlsStream::recv(void* data, size_t size) {
  return io(false, data, size);
}

ssize_t TlsStream::io(bool sending, void* data, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  const SslApi& a = ssl();
  a.ERR_clear_error();
  ioErrno_ = 0;
  size_t moved = 0;
  const int rc = sending ? a.SSL_write_ex(ssl_->s, data, size, &moved) : a.SSL_read_ex(ssl_->s, data, size, &moved);
  if (sending && rc == 1) {
    // AES-GCM keys wear out (RFC 8446 5.5): fresh traffic keys after every kRekeyBytes sent, announced to the peer
    // with the next record (it need not answer, so a stream that only receives never has to write).
    sentSinceKey_ += moved;
    if (sentSinceKey_ >= rekeyBytes_ && a.SSL_key_update(ssl_->s, SSL_KEY_UPDATE_NOT_REQUESTED) == 1) {
      sentSinceKey_ = 0;
      ++keyUpdates_;
    }
  }
  return finish(rc, moved, sending ? "send" : "receive");
}

bool TlsStream::buffered() {
  std::lock_guard<std::mutex> lock(mu_);
  return ssl().SSL_pending(ssl_->s) > 0;
}

std::string TlsStream::lastError() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

}  // namespace braid
