// A key-value store over TCP for Gloo's rendezvous (Debian's Gloo has only file and Redis stores). Rank 0 serves
// at MASTER_ADDR:MASTER_PORT; every rank, rank 0 included, is a client. get() blocks until the key is set or the
// deadline passes; every error is an exception (Gloo's Store interface reports errors that way).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace braid::perf {

class TcpStore final : public gloo::rendezvous::Store {
 public:
  // isServer: also serve (rank 0). nclients: how many clients the server waits for before it may stop.
  TcpStore(const std::string& host, int port, bool isServer, int nclients, std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  struct Server;
  std::shared_ptr<Server> server_;
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
};

}  // namespace braid::perf
