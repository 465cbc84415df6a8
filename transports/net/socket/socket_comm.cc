#include "transports/net/socket/socket_comm.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace braid {
namespace net {
namespace socket {

SocketComm::SocketComm(bool isSend, int ctrlFd, std::vector<int> dataFds, int nThreads, std::string peer,
                       std::vector<std::unique_ptr<TlsStream>> tls)
    : isSend_(isSend),
      ctrlFd_(ctrlFd),
      dataFds_(std::move(dataFds)),
      tls_(std::move(tls)),
      nThreads_(std::max(1, std::min<int>(nThreads, static_cast<int>(dataFds_.size())))),
      peer_(std::move(peer)) {
  for (SocketRequest& r : reqs_) r.comm = this;
  pieces_.resize(nThreads_);
  for (int t = 0; t < nThreads_; ++t) helpers_.emplace_back([this, t] { helperMain(t); });
}

SocketComm::~SocketComm() {
  stop_.store(true);
  ::shutdown(ctrlFd_, SHUT_RDWR);
  for (int fd : dataFds_) ::shutdown(fd, SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lk(mu_);
    cv_.notify_all();
  }
  for (std::thread& t : helpers_) t.join();
  ::close(ctrlFd_);
  for (int fd : dataFds_) ::close(fd);
}

ssize_t SocketComm::xfer(int sock, char* data, size_t size) {
  TlsStream* t = tls_.empty() ? nullptr : tls_[static_cast<size_t>(sock)].get();
  if (t != nullptr) return isSend_ ? t->send(data, size) : t->recv(data, size);
  const int fd = sock == 0 ? ctrlFd_ : dataFds_[static_cast<size_t>(sock - 1)];
  return isSend_ ? ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, data, size, MSG_DONTWAIT);
}

Status SocketComm::xferError(int sock, const char* what) {
  if (errno == EPIPE || errno == ECONNRESET) {
    return remoteError("NET/Socket : connection to peer %s lost (%s) during %s", peer_.c_str(), strerror(errno), what);
  }
  if (errno == EPROTO && !tls_.empty()) {
    return remoteError(
        "NET/Socket : %s, during %s (the data did not authenticate: tampered with, or not from a peer "
        "with this job's key)",
        tls_[static_cast<size_t>(sock)]->lastError().c_str(), what);
  }
  return errnoError(errno, "NET/Socket : %s on a socket of peer %s", what, peer_.c_str());
}

SocketRequest* SocketComm::allocRequest() {
  for (SocketRequest& r : reqs_) {
    if (!r.used) {
      SocketComm* owner = r.comm;
      r = SocketRequest();
      r.comm = owner;
      r.used = true;
      return &r;
    }
  }
  return nullptr;
}

void SocketComm::enqueuePieces(SocketRequest* req, char* data, size_t size) {
  const size_t nSocks = dataFds_.size();
  if (size > 0) {
    size_t piece = std::max(kMinPiece, (size + nSocks - 1) / nSocks);
    size_t k = 0;
    for (size_t off = 0; off < size; off += piece, ++k) {
      int s = static_cast<int>((seq_ + k) % nSocks);
      pieces_[s % nThreads_].push_back(Piece{data + off, std::min(piece, size - off), req, s});
      req->pieces++;
    }
    cv_.notify_all();
  }
  seq_++;
}

void SocketComm::failAll(const Status& s) {
  if (connError_.isOk()) connError_ = s;
  // A peer that closed its end (rather than failing) sent everything before closing: whole messages are delivered,
  // and so are those whose header came and whose pieces its data sockets still hold (a piece cut short fails by
  // itself). Regression: one progress pass read the last message and then the close, and failed both, so the last
  // message before a peer's end was lost now and then.
  for (SocketRequest& r : reqs_) {
    bool matched = true;
    for (int i = 0; i < r.n && matched; ++i) matched = r.matched[i];
    const bool complete = matched && r.pieces == 0;
    if (r.used && r.error.isOk() && !complete && !(peerClosed_ && matched)) r.error = s;
  }
  ctrlQueue_.clear();
  ::shutdown(ctrlFd_, SHUT_RDWR);
  if (peerClosed_) return;  // the data sockets end by themselves, after their data
  // Helpers blocked on a data socket return at once; the peer sees the connection go down.
  for (int fd : dataFds_) ::shutdown(fd, SHUT_RDWR);
}

Status SocketComm::progressCtrl() {
  if (!connError_.isOk()) return connError_;
  Status s = isSend_ ? progressSendCtrl() : progressRecvCtrl();
  if (!s.isOk()) failAll(s);
  return s;
}

Status SocketComm::progressSendCtrl() {
  while (!ctrlQueue_.empty()) {
    SocketRequest* req = ctrlQueue_.front();
    if (hdrDone_ == 0 && inlineDone_ == 0) hdr_ = WireHeader{req->tags[0], 0, req->cap[0]};
    while (hdrDone_ < sizeof(hdr_)) {
      ssize_t n = xfer(0, reinterpret_cast<char*>(&hdr_) + hdrDone_, sizeof(hdr_) - hdrDone_);
      if (n > 0) {
        hdrDone_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok();
      return xferError(0, "send() of a message header");
    }
    if (req->cap[0] <= kInlineBytes) {
      BRAID_ASSIGN_OR_RETURN(bool moved, moveInline(req->data[0], req->cap[0]));
      if (!moved) return Status::ok();
    } else {
      enqueuePieces(req, req->data[0], req->cap[0]);
    }
    hdrDone_ = 0;
    req->matched[0] = true;
    req->got[0] = req->cap[0];
    ctrlQueue_.pop_front();
  }
  return Status::ok();
}

Status SocketComm::progressRecvCtrl() {
  while (!ctrlQueue_.empty()) {
    while (!hdrReady_) {
      ssize_t n = xfer(0, reinterpret_cast<char*>(&hdr_) + hdrDone_, sizeof(hdr_) - hdrDone_);
      if (n > 0) {
        hdrDone_ += static_cast<size_t>(n);
        hdrReady_ = hdrDone_ == sizeof(hdr_);
        continue;
      }
      if (n == 0) {
        peerClosed_ = true;
        return remoteError("NET/Socket : connection closed by peer %s with %zu receive(s) pending", peer_.c_str(),
                           ctrlQueue_.size());
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::ok();
      return xferError(0, "recv() of a message header with receives pending");
    }
    // Match the header to the oldest posted buffer with its tag.
    SocketRequest* req = nullptr;
    int slot = -1;
    for (SocketRequest* r : ctrlQueue_) {
      for (int i = 0; i < r->n && slot < 0; ++i) {
        if (!r->matched[i] && r->tags[i] == hdr_.tag) slot = i;
      }
      if (slot >= 0) {
        req = r;
        break;
      }
    }
    if (req == nullptr) return Status::ok();  // the matching irecv is not posted yet
    if (hdr_.size > req->cap[slot]) {
      return Status(Code::kInvalidUsage,
                    strPrintf("NET/Socket : message of %llu bytes (tag %d) from peer %s is larger than the %zu-byte "
                              "receive buffer",
                              static_cast<unsigned long long>(hdr_.size), hdr_.tag, peer_.c_str(), req->cap[slot]));
    }
    if (hdr_.size <= kInlineBytes) {
      // Until the whole payload is here the header stays pending, and matching it again finds the same buffer
      // (the oldest unmatched one with its tag; later irecvs queue behind it).
      BRAID_ASSIGN_OR_RETURN(bool moved, moveInline(req->data[slot], static_cast<size_t>(hdr_.size)));
      if (!moved) return Status::ok();
    } else {
      enqueuePieces(req, req->data[slot], hdr_.size);
    }
    req->matched[slot] = true;
    req->got[slot] = hdr_.size;
    hdrReady_ = false;
    hdrDone_ = 0;
    bool all = true;
    for (int i = 0; i < req->n; ++i) all = all && req->matched[i];
    if (all) ctrlQueue_.erase(std::find(ctrlQueue_.begin(), ctrlQueue_.end(), req));
  }
  return Status::ok();
}

Result<bool> SocketComm::moveInline(char* data, size_t size) {
  while (inlineDone_ < size) {
    ssize_t n = xfer(0, data + inlineDone_, size - inlineDone_);
    if (n > 0) {
      inlineDone_ += static_cast<size_t>(n);
      continue;
    }
    if (n == 0 && !isSend_) {
      return remoteError("NET/Socket : connection closed by peer %s during a %zu-byte receive (%zu bytes missing)",
                         peer_.c_str(), size, size - inlineDone_);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return remoteError("NET/Socket : connection to peer %s lost (%s) during a %zu-byte %s", peer_.c_str(),
                         strerror(errno), size, isSend_ ? "send" : "receive");
    }
    if (n < 0 && errno == EPROTO) return xferError(0, "a message on the control socket");
    return errnoError(errno, "NET/Socket : %s of a %zu-byte message on the control socket of peer %s",
                      isSend_ ? "send()" : "recv()", size, peer_.c_str());
  }
  inlineDone_ = 0;
  return true;
}

Status SocketComm::isend(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  if (!isSend_) return invalidUsage("NET/Socket : isend on a receive comm (peer %s)", peer_.c_str());
  if (data == nullptr && size > 0) return invalidArgument("NET/Socket : isend: data is null for %zu bytes", size);
  std::lock_guard<std::mutex> lk(mu_);
  if (!connError_.isOk()) return connError_;
  SocketRequest* req = allocRequest();
  if (req == nullptr) return Status::ok();
  req->isSend = true;
  req->n = 1;
  req->data[0] = static_cast<char*>(data);
  req->cap[0] = size;
  req->tags[0] = tag;
  ctrlQueue_.push_back(req);
  *request = req;
  (void)progressCtrl();  // a failure is recorded in the request; test() reports it
  return Status::ok();
}

Status SocketComm::irecv(int n, void** data, const size_t* sizes, const int* tags, void** request) {
  *request = nullptr;
  if (isSend_) return invalidUsage("NET/Socket : irecv on a send comm (peer %s)", peer_.c_str());
  if (n < 1 || n > kMaxGroup) {
    return invalidArgument("NET/Socket : irecv: n=%d buffers (the Socket network accepts 1..%d)", n, kMaxGroup);
  }
  if (data == nullptr || sizes == nullptr || tags == nullptr) {
    return invalidArgument("NET/Socket : irecv: data, sizes or tags is null");
  }
  for (int i = 0; i < n; ++i) {
    if (data[i] == nullptr && sizes[i] > 0) {
      return invalidArgument("NET/Socket : irecv: data[%d] is null for %zu bytes", i, sizes[i]);
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!connError_.isOk()) return connError_;
  SocketRequest* req = allocRequest();
  if (req == nullptr) return Status::ok();
  req->n = n;
  for (int i = 0; i < n; ++i) {
    req->data[i] = static_cast<char*>(data[i]);
    req->cap[i] = sizes[i];
    req->tags[i] = tags[i];
  }
  ctrlQueue_.push_back(req);
  *request = req;
  (void)progressCtrl();
  return Status::ok();
}

Status SocketComm::test(SocketRequest* req, int* done, int* sizes) {
  *done = 0;
  std::lock_guard<std::mutex> lk(mu_);
  if (req < reqs_ || req >= reqs_ + NCCL_NET_MAX_REQUESTS || !req->used || req->abandoned) {
    return invalidArgument("NET/Socket : test: request %p is not in flight on this comm", static_cast<void*>(req));
  }
  (void)progressCtrl();
  if (!req->error.isOk()) {
    Status e = req->error;
    // A helper may still hold a piece of it; the helper frees the slot when it lets go.
    if (req->pieces == 0) {
      req->used = false;
    } else {
      req->abandoned = true;
    }
    return e;
  }
  if (req->pieces > 0) return Status::ok();
  for (int i = 0; i < req->n; ++i) {
    if (!req->matched[i]) return Status::ok();
  }
  if (sizes != nullptr) {
    for (int i = 0; i < req->n; ++i) sizes[i] = static_cast<int>(std::min<size_t>(req->got[i], INT32_MAX));
  }
  req->used = false;
  *done = 1;
  return Status::ok();
}

Status SocketComm::movePiece(const Piece& p) {
  int fd = dataFds_[p.sock];
  char* ptr = p.data;
  size_t left = p.size;
  while (left > 0) {
    if (stop_.load(std::memory_order_relaxed)) {
      return invalidUsage("NET/Socket : connection to peer %s closed locally during a transfer", peer_.c_str());
    }
    ssize_t n = xfer(p.sock + 1, ptr, left);
    if (n > 0) {
      ptr += n;
      left -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0 && !isSend_) {
      return remoteError("NET/Socket : connection closed by peer %s during a %zu-byte receive (%zu bytes missing)",
                         peer_.c_str(), p.size, left);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      pollfd pf{fd, static_cast<short>(isSend_ ? POLLOUT : POLLIN), 0};
      ::poll(&pf, 1, 100);
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) {
      return remoteError("NET/Socket : connection to peer %s lost (%s) during a %zu-byte %s", peer_.c_str(),
                         strerror(errno), p.size, isSend_ ? "send" : "receive");
    }
    if (errno == EPROTO) return xferError(p.sock + 1, "a transfer on a data socket");
    return errnoError(errno, "NET/Socket : %s on a data socket of peer %s", isSend_ ? "send()" : "recv()",
                      peer_.c_str());
  }
  return Status::ok();
}

void SocketComm::helperMain(int t) {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_.load() || !pieces_[t].empty(); });
    if (stop_.load()) return;
    Piece p = pieces_[t].front();
    lk.unlock();
    Status s = movePiece(p);
    lk.lock();
    pieces_[t].pop_front();
    SocketRequest* r = p.req;
    r->pieces--;
    if (!s.isOk()) {
      if (r->error.isOk()) r->error = s;
      failAll(s);
    }
    if (r->abandoned && r->pieces == 0) r->used = false;
  }
}

}  // namespace socket
}  // namespace net
}  // namespace braid
