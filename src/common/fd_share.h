// Passing a file descriptor to another process of this host: how a receiver hands its sender the CUDA memory
// handle of a FIFO it exported as a POSIX descriptor (cuMemExportToShareableHandle), as NCCL's proxy does; and how
// a process asks another to act on a descriptor it sends (a service: mapping a registered buffer there).
//
// The owner offers a descriptor and gets a ticket: its pid, a socket name and a random 64-bit token. The ticket
// travels through the bootstrap (authenticated) to the one peer meant to have it, which fetches a duplicate over
// a Unix socket (SCM_RIGHTS) from a server thread this process starts at its first offer. The socket is in the
// abstract namespace (nothing left in the file system, whatever dies when); a request from another user is
// refused (SO_PEERCRED), and a token is good for the fetches it was offered for. /proc/<pid>/fd and pidfd_getfd would
// need ptrace rights that Yama (ptrace_scope 1) and containers deny between sibling processes; a socket needs none.
//
// A service is the other direction: a process registers a handler under a random 64-bit key and hands the key (in
// an FdTicket, through the bootstrap) to the peers meant to call it; a caller sends a request of a few bytes, with
// or without a descriptor, and waits for the handler's answer. Handlers run one at a time on the server thread.
//
// Thread safety: every function may be called from any thread. A child forked after an offer starts its own
// server at its own first offer; the parent's offers are not the child's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {

struct FdTicket {
  int32_t pid = 0;
  uint32_t server = 0;  // the server's nonce: its socket is "@braid-fd-<pid>-<server>"
  uint64_t token = 0;
};

// The most descriptors one offer or service call carries (the kernel's SCM_MAX_FD for one message).
constexpr size_t kMaxFdsPerMessage = 253;

// Offers duplicates of `fds` (1 to kMaxFdsPerMessage; the caller keeps its own), in order, with `info` (at most 4096
// bytes the fetcher receives with them), for `fetches` fetches (one per peer meant to have them). Errors:
// kInvalidArgument for a count or info out of range, kSystemError naming the call (fcntl, socket, bind).
Result<FdTicket> offerFds(const std::vector<int>& fds, int fetches = 1, const std::string& info = std::string());
// One descriptor, no info.
Result<FdTicket> offerFd(int fd, int fetches = 1);
// Drops an offer not fetched (the connector it was for went away); a fetched or unknown ticket is ignored.
void withdrawFd(const FdTicket& t);
// Fetches the descriptors `t` offers, in the offer's order: new descriptors (close-on-exec) the caller owns, and the
// offer's info in *info when given. Waits at most timeoutSec for the owner. Errors name the owner's pid and what
// failed: no such server (the process is gone, or is in another network namespace), an unknown or already fetched
// token, a timeout.
Result<std::vector<int>> fetchFds(const FdTicket& t, double timeoutSec, std::string* info = nullptr);
// fetchFds of an offer of exactly one descriptor.
Result<int> fetchFd(const FdTicket& t, double timeoutSec);
// Offers not fetched yet (tests: a connection that completed leaves none).
size_t pendingFdOffers();

// A service's handler: the request's descriptors (none, or as many as the caller sent, in order; the server closes
// them after the call) and bytes; the answer's bytes, or an error the caller receives as its message.
using FdServiceFn = std::function<Result<std::string>(const std::vector<int>& fds, const std::string& request)>;
// Serves `fn` under a new random key: the ticket (this process's server, token = the key) is what callers need.
Result<FdTicket> serveFdService(FdServiceFn fn);
// Stops serving the key of `t`; returns after a call in progress ended, and no call starts after.
void stopFdService(const FdTicket& t);
// Calls the service `t` names with `request` (at most 4096 bytes) and `fds` (at most kMaxFdsPerMessage; the caller
// keeps its own), waiting at most timeoutSec. Errors name the process: no server, an unknown or stopped service
// (*absent set true for these two, when given: nothing serves there any more), a timeout, or the handler's own
// error.
Result<std::string> callFdService(const FdTicket& t, const std::vector<int>& fds, const std::string& request,
                                  double timeoutSec, bool* absent = nullptr);

}  // namespace braid
