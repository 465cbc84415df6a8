#include "src/core/elastic.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/bootstrap/bootstrap.h"
#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

// The new communicator's id, from the first remaining rank to the others (the parent's bootstrap tag space:
// comm.cc has 0x1xxxx-0x2xxxx and split 0x40000).
constexpr uint32_t kTagShrink = 0x40001;

// Waits (at most BRAID_TIMEOUT, polling) until `done` says so; false at the deadline.
bool waitUntil(const std::function<bool()>& done) {
  const double timeout = static_cast<double>(std::max<int64_t>(1, params::Timeout()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

Status revokeComm(Communicator& comm, const std::function<bool()>& quiet) {
  comm.revoked.store(true);  // from here on, collectives are refused
  // Every wait in the communicator sees the flag within milliseconds and returns; its FIFOs are marked aborted, so
  // peers waiting on this rank fail too. Kernels stop through the abort word.
  comm.abortFlag().store(true);
  comm.backend().abortWork();
  Backend& b = comm.backend();
  const bool stopped = waitUntil([&] {
    (void)comm.pollAsync();
    return quiet() && b.launchesFinished() >= b.launchesIssued();
  });
  // The bootstrap obeys the flag too, and split and shrink need it.
  comm.abortFlag().store(false);
  if (!stopped) {
    return remoteError("ncclCommRevoke: rank %d: the communicator's work did not stop within BRAID_TIMEOUT",
                       comm.rank());
  }
  // What failed because of the revocation is not an error of the revoked communicator: it is quiet now.
  comm.asyncError().store(static_cast<int>(Code::kOk));
  BRAID_INFO(kLogInit, "comm %p rank %d: revoked (destroy, split or shrink it)", static_cast<void*>(&comm),
             comm.rank());
  return Status::ok();
}

Status shrinkComm(Communicator& parent, const std::vector<int>& exclude, bool abortFirst,
                  const std::function<bool()>& quiet, const CommConfig& config, std::unique_ptr<Communicator>* out) {
  out->reset();
  const int n = parent.nranks();
  std::vector<uint8_t> excluded(static_cast<size_t>(n), 0);
  for (int r : exclude) {
    if (r < 0 || r >= n) return invalidArgument("excludeRanksList names rank %d, out of range for %d ranks", r, n);
    if (excluded[static_cast<size_t>(r)] != 0) return invalidArgument("excludeRanksList names rank %d twice", r);
    excluded[static_cast<size_t>(r)] = 1;
  }
  if (excluded[static_cast<size_t>(parent.rank())] != 0) {
    return invalidUsage("excludeRanksList names this rank (%d): only the ranks that remain call ncclCommShrink",
                        parent.rank());
  }
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    if (excluded[static_cast<size_t>(r)] == 0) members.push_back(r);
  }
  if (abortFirst) BRAID_RETURN_IF_ERROR(revokeComm(parent, quiet).withContext("NCCL_SHRINK_ABORT"));
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank()) - members.begin());
  char idBytes[kUniqueIdBytes];
  if (newRank == 0) {
    BRAID_ASSIGN_OR_RETURN(UniqueIdInfo id, createUniqueId(/*useEnv=*/false));
    encodeUniqueId(id, idBytes);
    for (size_t i = 1; i < members.size(); ++i) {
      BRAID_RETURN_IF_ERROR(parent.bootstrap()
                                ->send(members[i], kTagShrink, idBytes, sizeof(idBytes))
                                .withContext(strPrintf("ncclCommShrink: rank %d", members[i])));
    }
  } else {
    BRAID_RETURN_IF_ERROR(parent.bootstrap()
                              ->recv(members[0], kTagShrink, idBytes, sizeof(idBytes))
                              .withContext(strPrintf("ncclCommShrink: rank %d", members[0])));
  }
  BRAID_ASSIGN_OR_RETURN(UniqueIdInfo id, decodeUniqueId(idBytes));
  auto child = std::make_unique<Communicator>();
  CommConfig childConfig = config;
  childConfig.backend = parent.config().backend;  // the parent's memory, whichever thread shrinks
  BRAID_RETURN_IF_ERROR(child->init(id, static_cast<int>(members.size()), newRank, childConfig, parent.device()));
  BRAID_INFO(kLogInit, "comm %p shrunk from comm %p: %zu rank(s) excluded, rank %d -> rank %d of %zu",
             static_cast<void*>(child.get()), static_cast<void*>(&parent), exclude.size(), parent.rank(), newRank,
             members.size());
  *out = std::move(child);
  return Status::ok();
}

Status growId(Communicator& comm, char out[kUniqueIdBytes]) {
  std::lock_guard<std::mutex> lock(comm.grow.mu);
  if (comm.grow.pending) {
    return invalidUsage("comm=%p: the id of the previous ncclCommGetUniqueId has not been used by an ncclCommGrow yet",
                        static_cast<void*>(&comm));
  }
  BRAID_ASSIGN_OR_RETURN(UniqueIdInfo id, createUniqueId(/*useEnv=*/false));
  encodeUniqueId(id, comm.grow.id);
  memcpy(out, comm.grow.id, kUniqueIdBytes);
  comm.grow.pending = true;
  return Status::ok();
}

Status growComm(Communicator& parent, int nRanks, const char* id, const CommConfig& config,
                std::unique_ptr<Communicator>* out) {
  out->reset();
  if (nRanks <= parent.nranks()) {
    return invalidArgument("nRanks=%d must be more than the communicator's %d ranks", nRanks, parent.nranks());
  }
  // The root's id, to every existing rank: each says whether it has one (and which).
  struct Offer {
    int32_t has;
    char id[kUniqueIdBytes];
  };
  std::vector<Offer> all(static_cast<size_t>(parent.nranks()));
  Offer& mine = all[static_cast<size_t>(parent.rank())];
  mine.has = id != nullptr ? 1 : 0;
  if (id != nullptr) memcpy(mine.id, id, kUniqueIdBytes);
  BRAID_RETURN_IF_ERROR(parent.bootstrap()->allGather(all.data(), sizeof(Offer)).withContext("ncclCommGrow"));
  std::vector<int> roots;
  for (int r = 0; r < parent.nranks(); ++r) {
    if (all[static_cast<size_t>(r)].has != 0) roots.push_back(r);
  }
  if (roots.size() != 1) {
    return invalidUsage(
        "ncclCommGrow: %zu existing ranks passed a uniqueId: exactly one (the root, whose "
        "ncclCommGetUniqueId made it) must, the others pass NULL",
        roots.size());
  }
  const Offer& root = all[static_cast<size_t>(roots[0])];
  if (id != nullptr) {
    std::lock_guard<std::mutex> lock(parent.grow.mu);
    if (!parent.grow.pending || memcmp(parent.grow.id, id, kUniqueIdBytes) != 0) {
      return invalidArgument("uniqueId is not the one ncclCommGetUniqueId gave this communicator (or it was used)");
    }
    parent.grow.pending = false;  // used, whatever the grow's outcome
  }
  BRAID_ASSIGN_OR_RETURN(UniqueIdInfo info, decodeUniqueId(root.id));
  auto child = std::make_unique<Communicator>();
  CommConfig childConfig = config;
  childConfig.backend = parent.config().backend;
  BRAID_RETURN_IF_ERROR(child->init(info, nRanks, parent.rank(), childConfig, parent.device()));
  BRAID_INFO(kLogInit, "comm %p grown from comm %p: %d -> %d ranks (rank %d)", static_cast<void*>(child.get()),
             static_cast<void*>(&parent), parent.nranks(), nRanks, parent.rank());
  *out = std::move(child);
  return Status::ok();
}

}  // namespace braid
