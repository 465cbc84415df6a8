// Communicator lifetime, queries and errors.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "braid_build_config.h"
#include "src/api/api.h"
#include "src/common/params.h"
#include "src/common/shareable_mem.h"
#include "src/common/tls.h"
#include "src/core/elastic.h"
#include "src/core/enqueue.h"
#include "src/core/group.h"
#include "src/core/rma.h"

namespace braid {

Status checkNotNull(const void* p, const char* fn, const char* arg) {
  if (p == nullptr) return invalidArgument("%s is NULL", arg);
  return Status::ok();
}

Status notSupported(const char* fn, const char* why) {
  return invalidUsage("%s is not supported by braid yet%s%s", fn, why[0] ? ": " : "", why);
}

namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

static_assert(kNvlsHostNoTransport == ncclNvlsHostModeDisableTransport &&
                  kNvlsHostNoSymmetricMultimem == ncclNvlsHostModeDisableSymmetricMultimem,
              "the backend's nvlsHostMode bits are nccl.h's");

Result<CommConfig> parseConfig(const ncclConfig_t* config) {
  CommConfig c;
  if (config == nullptr) return c;
  if (config->magic != kConfigMagic) {
    return invalidArgument("config->magic=0x%x: the ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER",
                           config->magic);
  }
  if (config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    return invalidArgument("config->size=%zu is too small for an ncclConfig_t", config->size);
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1) {
      return invalidArgument("config->blocking=%d must be 0 or 1", config->blocking);
    }
    c.blocking = config->blocking;
  }
  auto field = [&](size_t off) { return config->size >= off + sizeof(int); };
  if (field(offsetof(ncclConfig_t, minCTAs)) && config->minCTAs != NCCL_CONFIG_UNDEF_INT) {
    if (config->minCTAs < 1 || config->minCTAs > 64) {
      return invalidArgument("config->minCTAs=%d must be in 1..64", config->minCTAs);
    }
    c.minChannels = config->minCTAs;
  }
  if (field(offsetof(ncclConfig_t, maxCTAs)) && config->maxCTAs != NCCL_CONFIG_UNDEF_INT) {
    if (config->maxCTAs < 1 || config->maxCTAs > 64) {
      return invalidArgument("config->maxCTAs=%d must be in 1..64", config->maxCTAs);
    }
    c.maxChannels = config->maxCTAs;
  }
  if (config->size >= offsetof(ncclConfig_t, commName) + sizeof(char*) && config->commName != nullptr) {
    c.commName = config->commName;
  }
  if (field(offsetof(ncclConfig_t, trafficClass)) && config->trafficClass != NCCL_CONFIG_UNDEF_INT) {
    c.trafficClass = config->trafficClass;
  }
  if (field(offsetof(ncclConfig_t, splitShare)) && config->splitShare != NCCL_CONFIG_UNDEF_INT) {
    c.splitShare = config->splitShare;
  }
  // NCCL 2.31's one-sided fields (a program built against an older header passes a smaller struct: defaults).
  if (field(offsetof(ncclConfig_t, numRmaCtx)) && config->numRmaCtx != NCCL_CONFIG_UNDEF_INT) {
    if (config->numRmaCtx < 0 || config->numRmaCtx > kMaxRmaCtx) {
      return invalidArgument("config->numRmaCtx=%d must be in 0..%d (0 turns one-sided operations off)",
                             config->numRmaCtx, kMaxRmaCtx);
    }
    c.numRmaCtx = config->numRmaCtx;
  }
  if (field(offsetof(ncclConfig_t, numRmaSig)) && config->numRmaSig != NCCL_CONFIG_UNDEF_INT) {
    if (config->numRmaSig < 1 || config->numRmaSig > kMaxRmaSig) {
      return invalidArgument("config->numRmaSig=%d must be in 1..%d", config->numRmaSig, kMaxRmaSig);
    }
    c.numRmaSig = config->numRmaSig;
  }
  if (field(offsetof(ncclConfig_t, rmaEagerInit)) && config->rmaEagerInit != NCCL_CONFIG_UNDEF_INT) {
    if (config->rmaEagerInit != 0 && config->rmaEagerInit != 1) {
      return invalidArgument("config->rmaEagerInit=%d must be 0 or 1", config->rmaEagerInit);
    }
    c.rmaEagerInit = config->rmaEagerInit;
  }
  // NCCL 2.32's host NVLS components: ncclNvlsHostModeDefault, Enable (0), Disable (all), or the component flags.
  if (field(offsetof(ncclConfig_t, nvlsHostMode)) && config->nvlsHostMode != NCCL_CONFIG_UNDEF_INT) {
    const int m = config->nvlsHostMode;
    const int known = ncclNvlsHostModeDisableTransport | ncclNvlsHostModeDisableSymmetricMultimem;
    if (m != ncclNvlsHostModeDisable && (m < 0 || (m & ~known) != 0)) {
      return invalidArgument(
          "config->nvlsHostMode=%d is not an ncclNvlsHostMode_t (0, INT_MAX, or an OR of "
          "ncclNvlsHostModeDisableTransport 1 and ncclNvlsHostModeDisableSymmetricMultimem 2)",
          m);
    }
    c.nvlsHostMode = m == ncclNvlsHostModeDisable ? kNvlsHostNoTransport | kNvlsHostNoSymmetricMultimem : m;
  }
  return c;
}

// `device`: what a host communicator reports (ncclCommInitAll's devlist, else -1); `cudaDevice`: where a CUDA
// communicator goes (-1: the calling thread's current context).
Status initRank(ncclComm_t* out, int nranks, const ncclUniqueId& commId, int rank, const ncclConfig_t* config,
                int device, int cudaDevice = -1) {
  BRAID_RETURN_IF_ERROR(checkNotNull(out, "ncclCommInitRank", "comm"));
  *out = nullptr;
  if (nranks < 1) return invalidArgument("nranks=%d must be at least 1", nranks);
  if (rank < 0 || rank >= nranks) return invalidArgument("rank=%d is out of range for nranks=%d", rank, nranks);
  BRAID_ASSIGN_OR_RETURN(CommConfig cfg, parseConfig(config));
  BRAID_ASSIGN_OR_RETURN(UniqueIdInfo id, decodeUniqueId(commId.internal));
  // On this thread: its current CUDA context decides (a grouped or non-blocking init runs on another one), or the
  // device ncclCommInitAll names.
  BRAID_ASSIGN_OR_RETURN(cfg.backend, chooseBackend(cudaDevice));
  auto comm = std::make_shared<Communicator>();
  ncclComm* handle = registerComm(comm);
  *out = handle;
  auto job = [comm, id, nranks, rank, cfg, device]() -> Status {
    Status st = comm->init(id, nranks, rank, cfg, device);
    comm->asyncError().store(static_cast<int>(st.code()));
    if (!st.isOk()) BRAID_WARN("ncclCommInitRank: rank %d: %s", rank, st.message().c_str());
    return st;
  };
  if (cfg.blocking == 0) {
    comm->asyncError().store(ncclInProgress);
    comm->initThread = std::thread(job);
    return Status(Code::kInProgress, "");
  }
  if (inGroup()) {
    comm->asyncError().store(ncclInProgress);
    groupAddJob(job);
    return Status::ok();
  }
  Status st = comm->init(id, nranks, rank, cfg, device);
  if (!st.isOk()) {
    retireComm(handle);
    *out = nullptr;
  }
  return st;
}

}  // namespace
}  // namespace braid

using namespace braid;

BRAID_API(ncclResult_t, ncclGetVersion, int* version) {
  return apiCall("ncclGetVersion", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(version, "ncclGetVersion", "version"));
    *version = NCCL_VERSION_CODE;
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  return apiCall("ncclGetUniqueId", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(uniqueId, "ncclGetUniqueId", "uniqueId"));
    BRAID_ASSIGN_OR_RETURN(UniqueIdInfo info, createUniqueId());
    encodeUniqueId(info, uniqueId->internal);
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclSetEncryption, const ncclEncryptionConfig_t* config) {
  return apiCall("ncclSetEncryption", [&]() -> Status {
    if (config == nullptr) {
      clearSocketEncryption();
      return Status::ok();
    }
    if (config->magic != 0xcafebeef || config->size < offsetof(ncclEncryptionConfig_t, psk) + sizeof(config->psk)) {
      return invalidArgument(
          "config=%p was not initialized with NCCL_ENCRYPTION_CONFIG_INITIALIZER (size %zu, magic 0x%x)",
          static_cast<const void*>(config), config->size, config->magic);
    }
    if (config->mode == NCCL_ENCRYPTION_MODE_NONE) {
      clearSocketEncryption();
      BRAID_INFO(kLogInit | kLogNet, "ncclSetEncryption: plain TCP for connections made from now on");
      return Status::ok();
    }
    if (config->mode != NCCL_ENCRYPTION_MODE_PSK) {
      return invalidArgument("config->mode=%d is not NCCL_ENCRYPTION_MODE_NONE (%d) or NCCL_ENCRYPTION_MODE_PSK (%d)",
                             config->mode, NCCL_ENCRYPTION_MODE_NONE, NCCL_ENCRYPTION_MODE_PSK);
    }
    BRAID_RETURN_IF_ERROR(setSocketEncryption(config->psk));
    BRAID_INFO(kLogInit | kLogNet,
               "ncclSetEncryption: TLS 1.3 with a pre-shared key for the bootstrap and Socket-network connections made "
               "from now on");
    return Status::ok();
  });
}

extern "C" __attribute__((visibility("default"))) ncclResult_t braidGetLaunchEnv(braidLaunchEnv_t* env) {
  return apiCall("braidGetLaunchEnv", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(env, "braidGetLaunchEnv", "env"));
    BRAID_ASSIGN_OR_RETURN(LaunchEnv found, detectLaunchEnv());
    *env = braidLaunchEnv_t{};
    env->rank = found.rank;
    env->nranks = found.nranks;
    env->localRank = found.localRank;
    env->localSize = found.localSize;
    env->torchrun = found.torchrun ? 1 : 0;
    env->commIdFromUser = found.commIdFromUser ? 1 : 0;
    env->masterPort = found.masterPort;
    // Texts that do not fit their field are errors rather than silently cut addresses.
    const struct {
      const std::string& text;
      char* field;
      size_t size;
      const char* name;
    } texts[] = {{found.source, env->source, sizeof(env->source), "source"},
                 {found.masterAddr, env->masterAddr, sizeof(env->masterAddr), "MASTER_ADDR"},
                 {found.commId, env->commId, sizeof(env->commId), "the rendezvous address"}};
    for (const auto& t : texts) {
      if (t.text.size() >= t.size) {
        return invalidArgument("%s is %zu characters long (at most %zu): '%.64s...'", t.name, t.text.size(), t.size - 1,
                               t.text.c_str());
      }
      std::memcpy(t.field, t.text.c_str(), t.text.size() + 1);
    }
    snprintf(env->rendezvousError, sizeof(env->rendezvousError), "%s", found.rendezvousError.c_str());
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return apiCall("ncclCommInitRank", [&]() { return initRank(comm, nranks, commId, rank, nullptr, -1); });
}

BRAID_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
          ncclConfig_t* config) {
  return apiCall("ncclCommInitRankConfig", [&]() { return initRank(comm, nranks, commId, rank, config, -1); });
}

BRAID_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
          ncclUniqueId* commIds, ncclConfig_t* config) {
  return apiCall("ncclCommInitRankScalable", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(commIds, "ncclCommInitRankScalable", "commIds"));
    if (nId < 1) return invalidArgument("ncclCommInitRankScalable: nId=%d must be at least 1", nId);
    if (nranks >= 1 && nId > nranks) {
      return invalidArgument("ncclCommInitRankScalable: nId=%d exceeds nranks=%d (at most one id per rank)", nId,
                             nranks);
    }
    std::vector<UniqueIdInfo> others;
    for (int i = 1; i < nId; ++i) {
      Result<UniqueIdInfo> info = decodeUniqueId(commIds[i].internal);
      if (!info.isOk()) return info.status().withContext(strPrintf("ncclCommInitRankScalable: commIds[%d]", i));
      others.push_back(info.value());
    }
    // One root serves any number of ranks: every rank meets at the first id's. Once this rank is through (or failed),
    // the roots this process started for the other ids are stopped (each process holding one does the same), so
    // none waits out BRAID_TIMEOUT for ranks that never come; an id repeating the first is left alone.
    Status st = initRank(newcomm, nranks, commIds[0], myrank, config, -1);
    Result<UniqueIdInfo> first = decodeUniqueId(commIds[0].internal);
    for (size_t i = 0; i < others.size(); ++i) {
      if (first.isOk() && others[i].magic == first.value().magic) continue;
      if (stopUnusedRoot(others[i])) {
        BRAID_INFO(kLogInit | kLogBootstrap,
                   "ncclCommInitRankScalable: rank %d stopped the root of commIds[%zu]: every rank meets at "
                   "commIds[0]'s",
                   myrank, i + 1);
      }
    }
    return st;
  });
}

BRAID_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  return apiCall("ncclCommInitAll", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(comms, "ncclCommInitAll", "comm"));
    if (ndev < 1) return invalidArgument("ndev=%d must be at least 1", ndev);
    BRAID_ASSIGN_OR_RETURN(UniqueIdInfo info, createUniqueId(/*useEnv=*/false));
    ncclUniqueId id;
    encodeUniqueId(info, id.internal);
    groupStart();
    Status first;
    for (int i = 0; i < ndev; ++i) {
      // As NCCL: rank i on CUDA device devlist[i], or device i without a list.
      Status st = initRank(&comms[i], ndev, id, i, nullptr, devlist ? devlist[i] : -1, devlist ? devlist[i] : i);
      if (first.isOk() && !st.isOk()) first = st;
    }
    Status end = groupEnd();
    if (first.isOk()) first = end;
    if (!first.isOk()) {
      for (int i = 0; i < ndev; ++i) {
        if (comms[i] != nullptr) retireComm(comms[i]);
        comms[i] = nullptr;
      }
    }
    return first;
  });
}

BRAID_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return apiCall("ncclCommSplit", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto parent, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(newcomm, "ncclCommSplit", "newcomm"));
    *newcomm = nullptr;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      return invalidArgument("color=%d must be non-negative or NCCL_SPLIT_NOCOLOR", color);
    }
    CommConfig cfg = parent->config();
    if (config != nullptr) {
      BRAID_ASSIGN_OR_RETURN(cfg, parseConfig(config));
    }
    std::unique_ptr<Communicator> child;
    BRAID_RETURN_IF_ERROR(parent->split(color, key, cfg, &child));
    if (child) *newcomm = registerComm(std::shared_ptr<Communicator>(std::move(child)));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
          ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return apiCall("ncclCommShrink", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto parent, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(newcomm, "ncclCommShrink", "newcomm"));
    *newcomm = nullptr;
    if (excludeRanksCount < 0) return invalidArgument("excludeRanksCount=%d must not be negative", excludeRanksCount);
    if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
      return invalidArgument("excludeRanksList is NULL with excludeRanksCount=%d", excludeRanksCount);
    }
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
      return invalidArgument("shrinkFlags=%d: use NCCL_SHRINK_DEFAULT (0) or NCCL_SHRINK_ABORT (1)", shrinkFlags);
    }
    const int failed = parent->asyncError().load();
    if (shrinkFlags == NCCL_SHRINK_DEFAULT && failed != ncclSuccess && !parent->revoked.load()) {
      return invalidUsage("comm=%p failed earlier (%s): shrink it with NCCL_SHRINK_ABORT, which stops its work first",
                          static_cast<void*>(comm), ncclGetErrorString(static_cast<ncclResult_t>(failed)));
    }
    CommConfig cfg = parent->config();
    if (config != nullptr) {
      BRAID_ASSIGN_OR_RETURN(cfg, parseConfig(config));
    }
    const std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    // Quiet: no call but this one holds the communicator (the registry keeps one reference, this call another).
    auto quiet = [&] { return parent.use_count() <= 2; };
    std::unique_ptr<Communicator> child;
    BRAID_RETURN_IF_ERROR(shrinkComm(*parent, exclude, shrinkFlags == NCCL_SHRINK_ABORT, quiet, cfg, &child));
    *newcomm = registerComm(std::shared_ptr<Communicator>(std::move(child)));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  return apiCall("ncclCommGetUniqueId", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(uniqueId, "ncclCommGetUniqueId", "uniqueId"));
    return growId(*c, uniqueId->internal);
  });
}

BRAID_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
          ncclComm_t* newcomm, ncclConfig_t* config) {
  return apiCall("ncclCommGrow", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(newcomm, "ncclCommGrow", "newcomm"));
    *newcomm = nullptr;
    if (comm == nullptr) {
      // A new rank: an ordinary init with the root's id.
      if (uniqueId == nullptr) return invalidArgument("a new rank (comm NULL) must pass the root's uniqueId");
      if (rank < 0 || rank >= nRanks) return invalidArgument("rank=%d is out of range for nRanks=%d", rank, nRanks);
      return initRank(newcomm, nRanks, *uniqueId, rank, config, -1);
    }
    BRAID_ASSIGN_OR_RETURN(auto parent, lookupComm(comm, "comm"));
    if (rank != -1) return invalidArgument("rank=%d: an existing rank passes -1 (it keeps its rank)", rank);
    CommConfig cfg = parent->config();
    if (config != nullptr) {
      BRAID_ASSIGN_OR_RETURN(cfg, parseConfig(config));
    }
    std::unique_ptr<Communicator> child;
    BRAID_RETURN_IF_ERROR(growComm(*parent, nRanks, uniqueId != nullptr ? uniqueId->internal : nullptr, cfg, &child));
    *newcomm = registerComm(std::shared_ptr<Communicator>(std::move(child)));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  return apiCall("ncclCommSuspend", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkUsable(*c, comm, nullptr));
    return c->suspend(flags);
  });
}

BRAID_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  return apiCall("ncclCommResume", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    return c->resume();
  });
}

BRAID_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return apiCall("ncclCommMemStats", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(value, "ncclCommMemStats", "value"));
    switch (stat) {
      case ncclStatGpuMemSuspend:
        *value = c->suspendableBytes();
        return Status::ok();
      case ncclStatGpuMemSuspended:
        *value = c->suspended() ? 1 : 0;
        return Status::ok();
      case ncclStatGpuMemPersist:
        *value = c->persistentBytes();
        return Status::ok();
      case ncclStatGpuMemTotal:  // what it holds now: the links are gone while suspended
        *value = c->persistentBytes() + (c->suspended() ? 0 : c->suspendableBytes());
        return Status::ok();
    }
    return invalidArgument("stat=%d is not an ncclCommMemStat_t (0..3)", static_cast<int>(stat));
  });
}

BRAID_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return apiCall("ncclCommRevoke", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    if (revokeFlags != NCCL_REVOKE_DEFAULT) {
      return invalidArgument("revokeFlags=%d must be NCCL_REVOKE_DEFAULT (0)", revokeFlags);
    }
    if (c->revoked.load()) return invalidUsage("comm=%p was already revoked", static_cast<void*>(comm));
    if (c->finalized.load())
      return invalidUsage("comm=%p was finalized: it cannot be revoked", static_cast<void*>(comm));
    auto quiet = [&] { return c.use_count() <= 2; };
    return revokeComm(*c, quiet);
  });
}

BRAID_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return apiCall("ncclCommFinalize", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    if (c->revoked.load()) {
      return invalidUsage("comm=%p was revoked: destroy, split or shrink it (ncclCommFinalize is not allowed)",
                          static_cast<void*>(comm));
    }
    // Host operations complete before their call returns, so nothing is outstanding: finalizing only closes the
    // communicator to new operations.
    c->finalized.store(true);
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return apiCall("ncclCommDestroy", [&]() -> Status {
    if (comm == nullptr) return Status::ok();  // like NCCL: destroying NULL is a no-op
    BRAID_RETURN_IF_ERROR(lookupComm(comm, "comm").status());
    // Dropping the last reference frees the communicator here, unless a call still runs on another thread.
    retireComm(comm).reset();
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return apiCall("ncclCommAbort", [&]() -> Status {
    if (comm == nullptr) return Status::ok();
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    // Any thread blocked in this communicator sees the flag within milliseconds, marks its FIFOs aborted so its
    // peers fail too, and returns; the communicator is freed when the last such call has left.
    c->abort();
    retireComm(comm);
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return apiCall("ncclCommGetAsyncError", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(asyncError, "ncclCommGetAsyncError", "asyncError"));
    // ncclInProgress while a non-blocking init runs; afterwards its result, or the error that broke the comm
    // (a CUDA communicator's kernels report theirs here, after the call that launched them returned).
    (void)c->pollAsync();
    *asyncError = static_cast<ncclResult_t>(c->asyncError().load());
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return apiCall("ncclCommCount", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(count, "ncclCommCount", "count"));
    *count = c->nranks();
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return apiCall("ncclCommCuDevice", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(device, "ncclCommCuDevice", "device"));
    *device = c->device();
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return apiCall("ncclCommUserRank", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(rank, "ncclCommUserRank", "rank"));
    *rank = c->rank();
    return Status::ok();
  });
}

BRAID_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the braid developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

BRAID_API(const char*, ncclGetLastError, ncclComm_t comm) {
  thread_local std::string text;
  text = lastErrorText();
  return text.c_str();
}

BRAID_API(void, ncclResetDebugInit) {
  logReinit();
}

BRAID_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return apiCall("ncclMemAlloc", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(ptr, "ncclMemAlloc", "ptr"));
    // A thread with a current CUDA context gets device memory of its device (as NCCL's, for CUDA communicators).
    BRAID_ASSIGN_OR_RETURN(void* dev, cudaAllocIfCurrent(size));
    if (dev != nullptr) {
      *ptr = dev;
      return Status::ok();
    }
    // Otherwise page-aligned, zeroed host memory that the other processes of a communicator can map, so
    // collectives on it load and store peers' buffers directly (no copy through a FIFO).
    bool shareable = false;
    Result<void*> p = allocShareable(size, &shareable);
    if (!p.isOk()) return p.status().withContext(strPrintf("ncclMemAlloc size=%zu", size));
    *ptr = p.take();
    if (!shareable) BRAID_INFO(kLogAlloc, "ncclMemAlloc: memfd unavailable, %zu bytes of private memory", size);
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclMemFree, void* ptr) {
  return apiCall("ncclMemFree", [&]() -> Status {
    if (ptr == nullptr) return Status::ok();  // like free(NULL)
    BRAID_ASSIGN_OR_RETURN(bool wasDevice, cudaFreeIfDevice(ptr));
    if (wasDevice) return Status::ok();
    return freeShareable(ptr);
  });
}

BRAID_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return apiCall("ncclCommRegister", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(buff, "ncclCommRegister", "buff"));
    BRAID_RETURN_IF_ERROR(checkNotNull(handle, "ncclCommRegister", "handle"));
    if (size == 0) return invalidArgument("ncclCommRegister: size=0: register at least one byte");
    BRAID_ASSIGN_OR_RETURN(*handle, c->registerBuffer(buff, size));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return apiCall("ncclCommDeregister", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    if (handle == nullptr) return Status::ok();  // as NCCL: what a registration that did nothing returned
    return c->deregisterBuffer(handle);
  });
}
