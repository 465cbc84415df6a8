// Out-of-band bootstrap: the unique id, the root rendezvous, and tagged point-to-point messages between ranks
// over TCP, from which allgather and barrier are built.
//
// ncclGetUniqueId starts a root listener thread and encodes its address plus random words in the 128-byte id
// (or, with NCCL_COMM_ID, the fixed address and words derived from it; rank 0 then starts the root at init). The
// job's key comes from those words and BRAID_BOOTSTRAP_SECRET (handshake.h). Each rank opens its own listener,
// answers the root's challenge with (rank, nranks, listener address) under the key, and receives every rank's
// listener address with the root's proof of the key. From then on ranks talk directly, each connection again
// answering the listener's challenge; a connection that cannot is refused and logged without disturbing anyone.
// Every count, rank and length read from the wire is bounded before anything is sized or indexed by it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/handshake.h"
#include "src/bootstrap/launch_env.h"  // the launcher's variables: where the rendezvous is (part of this interface)
#include "src/common/socket.h"
#include "src/common/status.h"

namespace braid {

constexpr size_t kUniqueIdBytes = 128;
constexpr uint32_t kTagFailed = 0x7fff0001;  // a rank's note that it gave up, with its error (tellPeersFailed)

// The decoded content of an ncclUniqueId.
struct UniqueIdInfo {
  uint64_t magic = 0;
  Nonce nonce{};  // random with magic (zero for NCCL_COMM_ID): the job's key is derived from both
  SocketAddress root;
  bool fromEnv = false;  // NCCL_COMM_ID: rank 0 must start the root itself
};

void encodeUniqueId(const UniqueIdInfo& info, char out[kUniqueIdBytes]);
Result<UniqueIdInfo> decodeUniqueId(const char in[kUniqueIdBytes]);

// ncclGetUniqueId: starts a root listener (unless useEnv and NCCL_COMM_ID is set) and returns its id.
Result<UniqueIdInfo> createUniqueId(bool useEnv = true);

// Starts the root rendezvous thread listening on info.root (used for NCCL_COMM_ID by rank 0).
Status startRoot(const UniqueIdInfo& info);

// Stops the root this process started for `info` (ncclGetUniqueId) if no rank has joined it yet: for ids
// ncclCommInitRankScalable is given but does not use. False when this process has no such root.
bool stopUnusedRoot(const UniqueIdInfo& info);

class Bootstrap {
 public:
  // Rendezvous through the root; blocks until every rank has arrived, the deadline passes, or abort is set.
  // hostHash identifies this host (0: unknown): ranks on one host learn each other's processes, so an error can say
  // that a stalled peer exited or is stopped.
  static Result<std::unique_ptr<Bootstrap>> create(const UniqueIdInfo& id, int rank, int nranks,
                                                   const std::atomic<bool>* abort, double timeoutSec,
                                                   uint64_t hostHash);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Tagged messages; messages from one peer with one tag arrive in order. recv requires the exact size. A failure
  // says what this rank can see of its cause: a peer that said it failed (tellPeersFailed), ranks on this host
  // that exited or are stopped.
  Status send(int peer, uint32_t tag, const void* data, size_t size);
  Status recv(int peer, uint32_t tag, void* data, size_t size);
  // data holds nranks slots of `bytes`; this rank's slot is filled in; on return all are.
  Status allGather(void* data, size_t bytes);
  Status barrier();
  // All or nothing: every rank tells the others how its part of a collective step went (`mine`), so either all go on
  // or none does. Returns ok when every rank succeeded; `mine` where it failed; elsewhere peerFailed(rank, its Status)
  // for the lowest failed rank (its message cut at 235 bytes). The exchange's own errors come back with `context`.
  [[nodiscard]] Status agreeAllOrNothing(const Status& mine, const char* context,
                                         const std::function<Status(int rank, const Status& theirs)>& peerFailed);

  void setTimeout(double seconds) { timeoutSec_ = seconds; }

  // [rank] the pid of each rank in another process on this host (same host hash), 0 otherwise; empty when the host
  // hash was unknown. Lives as long as the bootstrap.
  const std::vector<int32_t>& localPids() const { return localPids_; }

  // This rank gives up (its init failed with `why`): every peer it has a connection to is told, so a peer waiting
  // on it fails at once quoting `why` (which names the cause) instead of naming this rank. Best effort, bounded.
  void tellPeersFailed(const std::string& why);

 private:
  Bootstrap() = default;
  WaitContext waitContext() const;
  Result<const Socket*> outgoing(int peer);
  void acceptLoop();
  Status acceptUntil(int peer, const WaitContext& wait);
  Status readFrame(int peer, const WaitContext& wait);
  Status sendImpl(int peer, uint32_t tag, const void* data, size_t size);
  Status recvImpl(int peer, uint32_t tag, void* data, size_t size);
  Status explain(const Status& st) const;

  int rank_ = 0;
  int nranks_ = 0;
  Digest256 key_{};                               // the job's key (handshake.h)
  Handshakes inbound_{sizeof(int32_t) * 2 + 32};  // peers connecting to listener_, mid-handshake (acceptor_ only)
  double timeoutSec_ = 60;
  const std::atomic<bool>* abort_ = nullptr;
  Socket listener_;
  std::vector<SocketAddress> peers_;
  std::vector<int32_t> localPids_;  // [rank] pid of a rank in another process on this host, 0 otherwise
  std::vector<Socket> out_;
  std::vector<Socket> in_;  // set once per peer by acceptor_, under inMu_; read by the receiving thread
  std::mutex inMu_;
  std::condition_variable inCv_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;  // serves listener_'s handshakes for the bootstrap's life (acceptLoop)
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<char>>> unexpected_;
  uint32_t collTag_ = 0;
  std::mutex mu_;
};

}  // namespace braid
