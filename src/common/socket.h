// TCP helpers for the bootstrap: addresses, interface selection, and sockets whose every blocking call has a
// deadline and polls an abort flag.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/status.h"
#include "src/common/tls.h"
#include "src/common/wait.h"

namespace braid {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string toString() const;  // "1.2.3.4:5678" or "[::1]:5678"
};

// Parses "ip:port", "[ipv6]:port" or "host:port" (NCCL_COMM_ID syntax).
Result<SocketAddress> parseSocketAddress(const std::string& text);

// Picks the address bootstrap sockets bind to: the first interface matching NCCL_SOCKET_IFNAME's syntax
// ("eth,ib" prefixes, "=eth0" exact, "^docker" excludes) and NCCL_SOCKET_FAMILY. Without NCCL_SOCKET_IFNAME, and
// given the address of a peer to be reached (`toward`, the bootstrap root), the interface the kernel routes to it
// through: the first interface in the list may be one the peer cannot reach (a second network, a host-only link in
// a container or network namespace), and then the peer's connection would hang until BRAID_TIMEOUT. Otherwise the
// first interface that is up and not loopback/docker, falling back to loopback. The port is 0.
Result<SocketAddress> findBootstrapInterface(std::string* ifName, const SocketAddress* toward = nullptr);

// The interface this process's bootstrap last listened on ("" before any): the Socket network puts it first when
// NCCL_SOCKET_IFNAME is unset, so data goes where the rendezvous went (NCCL shares one interface list too).
void noteBootstrapInterface(const std::string& ifName);
std::string bootstrapInterface();

// The local address and interface the kernel would use to reach `remote` (no packet is sent).
Result<SocketAddress> findRouteSource(const SocketAddress& remote, std::string* ifName);

// True when `name` matches an NCCL_SOCKET_IFNAME-style spec.
bool matchInterfaceSpec(const std::string& spec, const std::string& name);

// With ncclSetEncryption's key set (socketEncryptionOn()), every connection is TLS: connect() and accept() finish
// the handshake before they return, tryAccept() leaves it to secureStep(), and the I/O calls below go through it.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_), peer_(o.peer_), tls_(std::move(o.tls_)) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  const std::string& peerName() const { return peer_; }

  // Binds and listens on addr (port 0 = ephemeral); *bound receives the real address.
  static Result<Socket> listen(const SocketAddress& addr, SocketAddress* bound);
  // Accepts one connection. Fails at the deadline or when aborted.
  Result<Socket> accept(const WaitContext& wait) const;
  // Accepts a connection if one is waiting; an invalid Socket when none is. With encryption on, its TLS handshake
  // has only started: call secureStep() until it returns true before any I/O.
  Result<Socket> tryAccept() const;
  // One step of a tryAccept()ed socket's TLS handshake, without waiting: true once done (always, without TLS).
  Result<bool> secureStep();
  // Connects, retrying refused connections until the deadline (the peer may not be listening yet).
  static Result<Socket> connect(const SocketAddress& addr, const WaitContext& wait);

  Status sendAll(const void* data, size_t size, const WaitContext& wait) const;
  Status recvAll(void* data, size_t size, const WaitContext& wait) const;
  // Waits until readable; returns false at timeoutMs.
  Result<bool> pollReadable(int timeoutMs) const;
  // Reads what has arrived, up to `size` bytes, without waiting: the count (0 when nothing has), or an error when the
  // peer closed the connection or it failed.
  Result<size_t> recvSome(void* data, size_t size) const;
  // Writes what the socket takes now, up to `size` bytes, without waiting: the count.
  Result<size_t> sendSome(const void* data, size_t size) const;
  bool encrypted() const { return tls_ != nullptr; }

 private:
  Status startTls(bool server);
  ssize_t rawSend(const void* data, size_t size) const;  // ::send or TLS, MSG_DONTWAIT semantics
  ssize_t rawRecv(void* data, size_t size) const;
  std::string ioError(const char* what) const;  // errno's text, or the TLS layer's

  int fd_ = -1;
  std::string peer_;
  std::unique_ptr<TlsStream> tls_;
};

}  // namespace braid
