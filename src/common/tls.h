// Encryption of braid's own TCP connections (NCCL 2.32's ncclSetEncryption): TLS 1.3 authenticated by a pre-shared
// key, over the bootstrap's sockets and the Socket network's. OpenSSL 3 is loaded at run time (libssl.so.3,
// libcrypto.so.3) the first time a key is set, so libnccl.so.2 needs neither unless encryption is asked for.
//
// Keys. The application's key (at least 32 bytes) is never used as such: both ends derive braid's TLS key from it
// (HKDF-SHA256, RFC 5869, with a braid-specific label), and a TLS 1.3 handshake in psk_dhe_ke mode gives every
// connection fresh traffic keys with forward secrecy. A peer without the key cannot complete the handshake; a
// handshake that did not use the key (a certificate handshake) is refused too.
//
// Thread safety: setSocketEncryption and socketEncryption may be called from any thread. One TlsStream may be used
// by several threads (one sending while another receives, as the bootstrap does); each call takes its lock.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "src/common/sha256.h"
#include "src/common/status.h"
#include "src/common/wait.h"

namespace braid {

// The process-wide setting: no key (plain TCP, the default) or the application's key. Takes effect for connections
// made afterwards; connections already open keep what they have. A key shorter than 32 bytes is refused
// (kInvalidArgument). Setting a key loads OpenSSL at once, so a process that cannot load it fails here, naming the
// library, rather than at its first connection.
[[nodiscard]] Status setSocketEncryption(const char* psk);
void clearSocketEncryption();
bool socketEncryptionOn();
// BRAID_ENCRYPTION_KEY_FILE, read once, unless setSocketEncryption or clearSocketEncryption came first: the socket
// layers call it before their first connection. Error (kInvalidArgument) naming the file when it cannot be read, is
// readable by group or others, or holds a short key; the same error on every later call.
[[nodiscard]] Status socketEncryptionFromEnv();

// One TLS connection over a connected TCP socket (which stays the caller's: TlsStream never closes it). The socket
// is made non-blocking; send() and recv() behave as ::send and ::recv with MSG_DONTWAIT | MSG_NOSIGNAL do.
class TlsStream {
 public:
  // A session with the process's key (socketEncryptionOn() must be true); the handshake has not started.
  // `server`: the accepting side. `peer` names the other end in messages.
  [[nodiscard]] static Result<std::unique_ptr<TlsStream>> start(int fd, bool server, std::string peer);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // One step of the handshake without waiting: true once it is complete. Error (kRemoteError) when the peer has
  // another key or none, closed, or is not speaking TLS.
  [[nodiscard]] Result<bool> handshakeStep();
  // The whole handshake, waiting for the peer until `wait` ends (kRemoteError) or is aborted (kInvalidUsage).
  [[nodiscard]] Status handshake(const WaitContext& wait);
  bool handshakeDone() const { return done_; }

  // As ::send / ::recv: the bytes moved (> 0); recv's 0 when the peer closed the connection; -1 with errno EAGAIN
  // (nothing can move now), the socket's own errno (ECONNRESET, EPIPE, ...), or EPROTO when the TLS layer failed
  // (a record that does not authenticate: the message is in lastError()). After EAGAIN, retry with the same data
  // and size (TLS may hold part of a record).
  ssize_t send(const void* data, size_t size);
  ssize_t recv(void* data, size_t size);
  // Bytes already decrypted and waiting: poll() on the socket does not show them.
  bool buffered();
  // The text of the last EPROTO.
  std::string lastError();
  // Traffic keys are renewed after every `bytes` sent (default kRekeyBytes); keyUpdates() counts the renewals.
  static constexpr uint64_t kRekeyBytes = uint64_t{1} << 34;  // 16 GiB: far below AES-GCM's limit per key
  void setRekeyBytes(uint64_t bytes) { rekeyBytes_ = bytes; }
  uint64_t keyUpdates() const { return keyUpdates_; }

 private:
  TlsStream(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ssize_t io(bool sending, void* data, size_t size);       // send() or recv()
  ssize_t finish(int rc, size_t moved, const char* what);  // maps an SSL call's result (mu_ held)

  struct Ssl;
  std::mutex mu_;
  const int fd_;
  const std::string peer_;
  Ssl* ssl_ = nullptr;
  bool done_ = false;
  int ioErrno_ = 0;  // errno of the socket call the last SSL call made
  uint64_t rekeyBytes_ = kRekeyBytes;
  uint64_t sentSinceKey_ = 0;
  uint64_t keyUpdates_ = 0;
  Digest256 key_{};  // the process's key when the stream started (a later ncclSetEncryption leaves it be)
  std::string error_;
  friend struct TlsBio;
};

}  // namespace braid
