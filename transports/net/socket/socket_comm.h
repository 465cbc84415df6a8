// Data path of the Socket network: one established connection (send or receive side).
//
// Wire format. A connection is one control socket plus nSocks data sockets (NCCL_SOCKET_NTHREADS x
// NCCL_NSOCKS_PERTHREAD, chosen by the listener and carried in its handle so both sides agree). For each message
// the sender writes a 16-byte header (tag, size) on the control socket. A payload of at most kInlineBytes follows
// it there; a larger one is split into at most nSocks pieces of at least kMinPiece bytes, piece i on data socket
// (seq + i) % nSocks where seq counts the messages sent on data sockets. Both sides derive the same split from the
// size and the count, so no per-piece framing is needed.
//
// Threads. Control-socket I/O runs on the caller's thread inside isend/irecv/test (non-blocking). Payload I/O runs
// on nThreads helper threads; helper t serves data sockets s with s % nThreads == t, in message order, which
// makes the (message, socket) order global and so free of cross-thread deadlock. A mutex per comm guards the
// queues and requests; helpers hold it only to take or finish a piece, never during I/O.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "include/nccl_net.h"
#include "src/common/status.h"
#include "src/common/tls.h"

namespace braid {
namespace net {
namespace socket {

constexpr size_t kMinPiece = 64 * 1024;  // payload pieces below this ride on one data socket
// Payloads up to this follow their header on the control socket, moved by the caller's thread: a small message
// then costs no hand-off to a helper thread (measured on 2 cores: an 8-byte 2-rank all-reduce went from 210 to
// 70 us).
constexpr size_t kInlineBytes = 64 * 1024;
constexpr int kMaxGroup = 8;  // maxRecvs

class SocketComm;

struct WireHeader {
  int32_t tag;
  uint32_t reserved;
  uint64_t size;
};
static_assert(sizeof(WireHeader) == 16, "wire header is 16 bytes");

struct SocketRequest {
  SocketComm* comm = nullptr;
  bool used = false;
  bool abandoned = false;  // failed and reported; a helper still holds a piece of it
  bool isSend = false;
  int n = 0;                     // buffers (1 for a send)
  char* data[kMaxGroup] = {};    // buffers
  size_t cap[kMaxGroup] = {};    // send: size; recv: buffer capacity
  int tags[kMaxGroup] = {};      // tags
  bool matched[kMaxGroup] = {};  // send: header sent; recv: header received for this buffer
  size_t got[kMaxGroup] = {};    // bytes of the matched message
  int pieces = 0;                // payload pieces not yet moved
  Status error;                  // first failure
};

struct Piece {
  char* data;
  size_t size;
  SocketRequest* req;
  int sock;  // data socket index
};

class SocketComm {
 public:
  // Takes ownership of the fds (ctrl first) and, with encryption on, of their TLS sessions (`tls`: ctrl first, one
  // per socket, handshakes done; empty for plain TCP). Starts nThreads helpers.
  SocketComm(bool isSend, int ctrlFd, std::vector<int> dataFds, int nThreads, std::string peer,
             std::vector<std::unique_ptr<TlsStream>> tls = {});
  ~SocketComm();  // stops helpers, closes sockets
  SocketComm(const SocketComm&) = delete;
  SocketComm& operator=(const SocketComm&) = delete;

  bool isSend() const { return isSend_; }
  const std::string& peer() const { return peer_; }

  // *request null when NCCL_NET_MAX_REQUESTS are in flight.
  Status isend(void* data, size_t size, int tag, void** request);
  Status irecv(int n, void** data, const size_t* sizes, const int* tags, void** request);
  // Progresses the connection; on done, fills sizes and frees the request. A failed request is freed too.
  Status test(SocketRequest* req, int* done, int* sizes);

 private:
  SocketRequest* allocRequest();
  void enqueuePieces(SocketRequest* req, char* data, size_t size);  // mu_ held
  Status progressCtrl();                                            // mu_ held
  Status progressSendCtrl();
  Status progressRecvCtrl();
  void failAll(const Status& s);  // mu_ held
  void helperMain(int t);
  Status movePiece(const Piece& p);
  // Moves the rest of a kInlineBytes payload on the control socket (mu_ held): true when it is all there.
  Result<bool> moveInline(char* data, size_t size);
  // ::send or ::recv (by the comm's side) on socket `sock` (0: control, 1 + i: data socket i), through its TLS
  // session when it has one; MSG_DONTWAIT semantics.
  ssize_t xfer(int sock, char* data, size_t size);
  // The error of a failed xfer() on `sock` (errno set), naming `what`.
  Status xferError(int sock, const char* what);

  const bool isSend_;
  int ctrlFd_;
  std::vector<int> dataFds_;
  std::vector<std::unique_ptr<TlsStream>> tls_;  // empty, or one per socket (control first)
  const int nThreads_;
  const std::string peer_;

  std::mutex mu_;
  std::condition_variable cv_;
  SocketRequest reqs_[NCCL_NET_MAX_REQUESTS];
  std::deque<SocketRequest*> ctrlQueue_;   // send: headers to write; recv: groups with unmatched buffers
  std::vector<std::deque<Piece>> pieces_;  // per helper thread
  uint64_t seq_ = 0;                       // messages whose pieces were queued
  WireHeader hdr_{};                       // header being sent / received
  size_t hdrDone_ = 0;                     // bytes of hdr_ moved
  size_t inlineDone_ = 0;                  // bytes of an inline payload moved (kInlineBytes)
  bool hdrReady_ = false;                  // recv: hdr_ complete, waiting for a matching buffer
  Status connError_;                       // sticky: connection unusable
  bool peerClosed_ = false;                // the peer closed its end (EOF on the control socket), mu_ held
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
};

}  // namespace socket
}  // namespace net
}  // namespace braid
