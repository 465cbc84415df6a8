/* braid's nccl_device/core.h: the device communicator, its requirements, and teams.
 *
 * A team is an arithmetic progression of world ranks seen from one rank: `nRanks` members, this rank is member
 * `rank`, and member i is world rank (my world rank) + (i - rank) * stride. The world team is every rank (stride 1);
 * the LSA team is this rank's block of ranks with load/store access to each other's windows (in braid: the ranks
 * of one host, as the largest block size that divides the communicator into aligned single-host blocks; 1 when
 * the ranks of a host are not contiguous); the rail team is the ranks at the same position in every LSA block
 * (stride = LSA size). All team functions are pure arithmetic and thread-safe. */
#ifndef NCCL_DEVICE_CORE_H_
#define NCCL_DEVICE_CORE_H_

#include "coop.h"
#include "portable.h"

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclMultimemHandle ncclMultimemHandle_t;
#ifdef __cplusplus
template <typename T>
struct ncclSymPtr;
#endif
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

struct ncclTeam {
  int nRanks, rank, stride;
};

struct ncclMultimemHandle {
  void* mcBasePtr; /* non-null: multicast pointers may be taken through this handle (braid: each window carries its
                    * own mapping, ncclWindow_vidmem::lsaMultimem; this is the resource window's) */
};

#ifdef __cplusplus
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};
#endif

#ifndef NCCL_API_MAGIC
#define NCCL_API_MAGIC 0xcafebeef
#endif

/* GPU-initiated networking (GIN) backends and connection shapes, and Compute Fabric Transport (CFT) capabilities:
 * NCCL's names and values, for the fields that carry them. braid's GIN is load/store within one LSA team and a CPU
 * proxy toward ranks of other hosts (nccl_device/gin.h): ncclCommQueryProperties reports NCCL_GIN_TYPE_PROXY where
 * the world spans several LSA teams and the proxy reaches them, else NCCL_GIN_TYPE_NONE; a requirement naming
 * another backend is refused. CFT is not built: a device communicator asking for it is refused by name. */
typedef enum {
  NCCL_GIN_TYPE_NONE = 0, /* in requirements: any backend */
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
  NCCL_GIN_TYPE_EFA_GDA = 5,
  NCCL_GIN_MAX_TYPES = 6
} ncclGinType_t;
typedef enum {
  NCCL_GIN_CONNECTION_NONE = 0,
  NCCL_GIN_CONNECTION_FULL = 1,
  NCCL_GIN_CONNECTION_RAIL = 2,
  NCCL_GIN_CONNECTION_CUSTOM_STRIDE = 3
} ncclGinConnectionType_t;
typedef enum { NCCL_CFT_NONE = 0x0, NCCL_CFT = 0x1, NCCL_CFT_MULTIMEM = 0x2 } ncclCftCap_t;
typedef enum { NCCL_CFT_TEAM_FLAT, NCCL_CFT_TEAM_HIER_MULTIMEM, NCCL_CFT_TEAM_HIER_LSA } ncclCftTeamMode_t;
typedef uint32_t ncclCftLeId;
typedef ncclCftLeId ncclCftLeId_t;

/* What a device communicator must hold: NCCL's versioned layout (2.29 put size/magic/version first; the fields after
 * worldGinBarrierCount are 2.30-2.31's). Start from the initializer, then set what the kernels need:
 *   ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
 * A zeroed struct (`= {}`, NCCL 2.28's way) is refused by ncclDevCommCreate, as NCCL 2.29+ refuses it. The first
 * three fields are the header's: never assign them. GIN (railGinBarrierCount, worldGinBarrierCount, ginForceEnable,
 * ginSignalCount, ginCounterCount, ginConnectionType, GIN counts in resource requirements, and barrierCount where
 * the world spans several LSA teams: its rail-team half) is granted where the
 * world is one LSA team, or (by proxy) where each host's ranks are exactly one LSA team, and refused
 * elsewhere (nccl_device/gin.h); ginType must be NCCL_GIN_TYPE_NONE (any backend) or NCCL_GIN_TYPE_PROXY;
 * ginContextCount is a hint (at most 4 are given); the other GIN fields (ginExclusiveContexts, ginQueueDepth,
 * ginTrafficClass, ginStrongSignalsRequired, ginVaSignalsRequired, ginCustomStride) are ignored. CFT (cftCaps,
 * cftBarrierCount) must keep the initializer's values. A list longer than 65536 entries (a cycle) is
 * ncclInvalidArgument. */
struct ncclDevCommRequirements {
  size_t size;          /* the initializer's: sizeof(ncclDevCommRequirements) of the caller's header */
  unsigned int magic;   /* NCCL_API_MAGIC */
  unsigned int version; /* NCCL_VERSION_CODE of the caller's header */

  ncclDevResourceRequirements_t* resourceRequirementsList; /* buffers the kernels need, chained by `next` */
  ncclTeamRequirements_t* teamRequirementsList;            /* teams that need multimem, chained by `next` */
  bool lsaMultimem;                                        /* multicast over the LSA team */
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount; /* a hint (NCCL may give fewer); braid gives up to 4 where the world is one LSA team */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
  int ginCustomStride; /* with NCCL_GIN_CONNECTION_CUSTOM_STRIDE */
  ncclGinType_t ginType;
  bool useRuntimeVersion; /* device code built for this library (JIT): braid's layouts are one, so no difference */
  int cftCaps;            /* ncclCftCap_t bits */
  int cftBarrierCount;
};

/* Every field named, so that -Wextra builds stay quiet. NCCL's defaults: 4 GIN contexts, the traffic class undefined,
 * strong and VA signals required, custom stride 1. */
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                                                        \
  {                                                                                                                   \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, 0, 0, 0, 0, 0, false, 4, \
        0, 0, NCCL_GIN_CONNECTION_NONE, false, 0, NCCL_CONFIG_UNDEF_INT, 0, true, true, 1, NCCL_GIN_TYPE_NONE, false, \
        NCCL_CFT_NONE, 0                                                                                              \
  }

/* A buffer in the device communicator's resource window; its handle is written to *outBufferHandle at
 * ncclDevCommCreate. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

/* Barriers among the LSA team (lsa_barrier.h): which resource buffer holds them and how many there are. */
struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle; /* written at ncclDevCommCreate */
  int nBarriers;
};

/* GIN barriers over a team of n ranks: barrier b uses the signals signal0 + b * n .. signal0 + b * n + n - 1 (see
 * nccl_device/gin_barrier.h). */
struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;           /* written at ncclDevCommCreate */
  ncclDevResourceHandle_t bufHandle; /* NCCL's field; braid's GIN barriers keep their state in signal shadows */
};

/* What ncclWindow_t points to: a window as device code reads it, written once at ncclCommWindowRegister (and at
 * ncclDevCommCreate for the device communicator's own window). In device memory on a CUDA communicator, in host
 * memory on a host one; host code never needs to read it. braid's layout. */
struct ncclWindow_vidmem {
  void* winHost;         /* braid's host record of the window */
  char* localBase;       /* this rank's buffer */
  char* const* lsaBases; /* [lsaSize]: LSA member i's buffer as this rank reaches it (null: out of reach) */
  size_t size;           /* this rank's buffer, in bytes */
  int worldRank;         /* this rank, in the world team */
  int lsaRank, lsaSize;  /* this rank's place in the LSA team, and its size */
  uint32_t braidMagic;
  char* lsaMultimem;     /* this process's multicast mapping of every LSA member's buffer (NVLS), or null: none */
  uint32_t registration; /* the window's registration number, the same on every rank (GIN messages name it) */
};

/* The windows of the communicator, for ncclFindWindow: chunks of entries (a null window is a free entry). */
#define NCCL_DEV_COMM_WINDOW_TABLE_ENTRIES 32
typedef struct ncclDevCommWindowEntry {
  uintptr_t base, size; /* the window's buffer on this rank */
  ncclWindow_t window;
} ncclDevCommWindowEntry;
struct ncclDevCommWindowTable {
  ncclDevCommWindowEntry entries[NCCL_DEV_COMM_WINDOW_TABLE_ENTRIES];
  struct ncclDevCommWindowTable* next;
};

/* The device communicator: passed by value to kernels. braid's layout; the fields NCCL documents as stable across
 * versions (rank, nRanks, lsaRank, lsaSize, ginContextCount) have NCCL's names and documented types. */
struct ncclDevComm {
  int rank, nRanks;                  /* in the world team */
  int lsaRank, lsaSize;              /* in the LSA team */
  uint8_t ginContextCount;           /* GIN contexts (nccl_device/gin.h): 0 without GIN */
  ncclWindow_t resourceWindow;       /* the device communicator's own window: barriers and requested buffers */
  ncclLsaBarrierHandle_t lsaBarrier; /* reqs->lsaBarrierCount barriers over the LSA team */
  ncclMultimemHandle_t lsaMultimem;  /* reqs.lsaMultimem: set (NVLS multicast over the LSA team); else null */
  const uint32_t* abortFlag;         /* non-zero once the communicator is aborted: waits without a timeout end */
  struct ncclDevCommWindowTable* windowTable; /* every window of the communicator (ncclFindWindow) */
  void* braidState;                           /* braid's host record (ncclDevCommDestroy finds it) */
  /* GIN (nccl_device/gin.h): the signals (peers add to them), counters and signal shadows, each an array of 64-bit
   * words in the resource window; their counts; the rail and world teams' GIN barriers. */
  uint32_t ginSignalCount, ginCounterCount;
  ncclDevResourceHandle_t ginSignals, ginCounters, ginShadows;
  ncclGinBarrierHandle_t railGinBarrier, worldGinBarrier;
  /* GIN toward ranks outside the LSA team (other hosts), by braid's proxy: null where there is none. */
  struct ncclBraidGinNet* ginNet;
};

/* Creates a device communicator over `comm` with what `reqs` asks for: a resource window per rank (zeroed
 * ncclMemAlloc-kind memory registered as a window, so LSA peers reach it) holding reqs->lsaBarrierCount LSA
 * barriers and every buffer of reqs->resourceRequirementsList (their handles are written through
 * outBufferHandle). Every rank must pass the same requirements. Collective over comm's ranks, blocking.
 * Errors (the same on every rank): ncclInvalidArgument for a NULL argument, a list cycle, a bufferAlign that is not
 * a power of two up to 4096; ncclInvalidUsage for reqs not made by NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (magic)
 * or made by another header than this library's (version and size: device-API code must be compiled against the
 * nccl_device.h of the braid it runs with, since ncclDevComm's layout is braid's), a host communicator, GIN where the
 * world spans several LSA teams and GIN cannot reach them (barrierCount counts as GIN there) or for a named backend,
 * CFT requests, multimem where the resource
 * window has no multicast mapping (no multicast on the communicator, multimemSupport false, or the process's budget
 * of multicast objects spent; the WARN says why) or for a team other than LSA, LL
 * all-to-all counts
 * (reqs->lsaLLA2A*: use ncclLLA2ACreateRequirement), NCCL_WIN_ENABLE=0, an LSA member out of load/store reach, or ranks
 * asking for different layouts (the WARN names the rank). */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                                             ncclDevComm_t* outDevComm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                                              ncclDevComm_t* outDevComm);
/* Releases what ncclDevCommCreate made (local: no kernel of any rank may still use it). ncclInvalidArgument for a
 * devComm that ncclDevCommCreate did not give, or gave and was destroyed. Device communicators left go with comm. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

/* ---- Communicator properties (NCCL 2.29's query, here so that programs can test for the device API). ---- */

typedef struct ncclCommProperties {
  size_t size; /* set by NCCL_COMM_PROPERTIES_INITIALIZER: the library writes only what fits */
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;           /* -1 on a host communicator */
  int nvmlDev;           /* -1: braid does not map CUDA ordinals to NVML indices */
  bool deviceApiSupport; /* true on a CUDA communicator (ncclDevCommCreate works there), false on a host one */
  bool multimemSupport;  /* windows and device communicators get NVLS multicast (lsaMultimem) on this communicator */
  ncclGinType_t ginType; /* NCCL_GIN_TYPE_PROXY where GIN reaches other LSA teams by braid's proxy, else NONE */
  int nLsaTeams;         /* nRanks / LSA team size */
  bool hostRmaSupport;   /* ncclPutSignal/ncclSignal/ncclWaitSignal reach every rank */
  ncclGinType_t railedGinType;
  uint64_t commHash; /* the same on every rank of the communicator */
  int ginMinStride;
  ncclGinConnectionType_t ginConnectionType;
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize; /* sizeof(ncclDevComm) of this library (for useRuntimeVersion) */
} ncclCommProperties_t;

/* Every field named, so that -Wextra builds stay quiet; the library fills all but the first three. */
#define NCCL_COMM_PROPERTIES_INITIALIZER                                                                             \
  {                                                                                                                  \
    sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, -1, -1, false, false, NCCL_GIN_TYPE_NONE, \
        0, false, NCCL_GIN_TYPE_NONE, 0, 0, NCCL_GIN_CONNECTION_NONE, {false}, 0                                     \
  }

/* Fills *props. props must come from NCCL_COMM_PROPERTIES_INITIALIZER (else ncclInvalidUsage naming the magic).
 * A props of another library's (smaller or larger) layout gets the fields every layout shares (rank through
 * multimemSupport) and zeros in the rest of its size. Thread-safe, no communication. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);

/* ---- Device pointers of a window, asked for on the host (NCCL 2.29): what ncclGetLsaPointer and its kind give a
 * kernel, for host code to pass to kernels or copies. The window names its communicator; any thread, no
 * communication. On a host communicator the pointers are host addresses. Errors: ncclInvalidArgument for a NULL
 * window or outPtr, a window no communicator of this process holds (deregistered, or its communicator destroyed), a
 * rank out of range, an offset at or past the end of that rank's buffer (of the multicast mapping, for multimem). */

/* LSA member lsaRank's byte `offset` of window. ncclInvalidUsage (naming why) when that member's buffer is out of
 * this rank's load/store reach. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                                                   void** outPtr);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                                                    void** outPtr);
/* World rank peer's byte `offset` of window: *outPtr NULL (and ncclSuccess) when peer is not in this rank's LSA
 * team or its buffer is out of reach, as the device's ncclGetPeerPointer. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                                                    void** outPtr);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                                                     void** outPtr);
/* The window's multicast pointer at `offset` (NVLS, over the LSA team): *outPtr NULL (and ncclSuccess) when the window
 * has no multicast mapping (ncclCommQueryProperties' multimemSupport, NCCL_NVLS_ENABLE, the object budget: INFO REG
 * says which). */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                                           void** outPtr);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                                            void** outPtr);
/* The same through a multimem handle (ncclDevCommCreate's): ncclInvalidArgument when multimem.mcBasePtr is NULL.
 * braid gives every window a mapping of its own, so the handle only vouches for multicast. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                                        ncclMultimemHandle_t multimem, void** outPtr);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                                         ncclMultimemHandle_t multimem, void** outPtr);

/* Compute Fabric Transport (NCCL 2.31: CUDA logical endpoints on Blackwell): declared so that programs naming it
 * compile; braid has no CFT, so each returns ncclInvalidUsage with a WARN saying so (after the usual NULL checks). */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset,
                                                                       ncclCftLeId* leId, size_t* leOffset);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset,
                                                                        ncclCftLeId* leId, size_t* leOffset);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                                                  ncclTeam_t cftTeam, ncclCftLeId* leId,
                                                                  size_t* leOffset);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                                                   ncclTeam_t cftTeam, ncclCftLeId* leId,
                                                                   size_t* leOffset);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                                                   ncclCftLeId* leId, size_t* leOffset);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                                                    ncclCftLeId* leId, size_t* leOffset);
/* The CFT teams: {0, 0, 0} with a WARN (braid has no CFT; a bad handle gives the same). */
#ifdef __cplusplus
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode = NCCL_CFT_TEAM_FLAT);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t pncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode = NCCL_CFT_TEAM_FLAT);
#else
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t pncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
#endif
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t pncclTeamCftMultimem(ncclComm_t comm);

/* Teams of a host communicator handle. An invalid comm gives {0, 0, 0} (and a WARN); an out-of-team rank -1. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t pncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t ncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t pncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t ncclTeamRail(ncclComm_t comm);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclTeam_t pncclTeamRail(ncclComm_t comm);
/* World (or LSA) rank of member `rank` of `team`. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C NCCL_HOST_ONLY_ int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C NCCL_HOST_ONLY_ int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C NCCL_HOST_ONLY_ int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* ---- Team algebra (host and device). ---- */

NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOf_(int nRanks, int rank, int stride) {
  ncclTeam_t t;
  t.nRanks = nRanks;
  t.rank = rank;
  t.stride = stride;
  return t;
}

/* Whether member `bPeer` of team b is a member of team a (both seen from this rank). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  int delta = (bPeer - b.rank) * b.stride; /* world-rank offset from this rank */
  if (a.stride == 0 || delta % a.stride != 0) return false;
  int index = a.rank + delta / a.stride;
  return index >= 0 && index < a.nRanks;
}

/* The index in team a of member `bPeer` of team b (meaningful when ncclTeamRankIsMember says so). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  return a.rank + (bPeer - b.rank) * b.stride / a.stride;
}

/* `parent` cut into blocks of innerSize consecutive members: this rank's block (inner) or the members at this
 * rank's position in every block (outer). innerSize must divide parent.nRanks. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeamOf_(innerSize, parent.rank % innerSize, parent.stride);
}
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeamOf_(parent.nRanks / innerSize, parent.rank / innerSize, parent.stride * innerSize);
}

/* The index-th member (as an index of `parent`) of parent minus subset, in parent order, for a subset whose
 * members are members of parent; index runs over [0, parent.nRanks - subset.nRanks). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE int ncclTeamRankInDifference(ncclTeam_t parent, ncclTeam_t subset, int index) {
  int step = subset.stride / parent.stride;     /* subset's spacing in parent indices */
  int first = parent.rank - subset.rank * step; /* parent index of subset member 0 */
  if (step < 0) {                               /* walk the subset from its lowest parent index */
    first += (subset.nRanks - 1) * step;
    step = -step;
  }
  if (index < first) return index;
  int inside = index - first; /* the gaps between subset members hold step - 1 each */
  if (step > 1 && inside < (subset.nRanks - 1) * (step - 1)) {
    return first + 1 + (inside / (step - 1)) * step + inside % (step - 1);
  }
  return index + subset.nRanks;
}

#ifdef __cplusplus
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamWorld(ncclDevComm const& comm) {
  return ncclTeamOf_(comm.nRanks, comm.rank, 1);
}
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamLsa(ncclDevComm const& comm) {
  return ncclTeamOf_(comm.lsaSize, comm.lsaRank, 1);
}
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamRail(ncclDevComm const& comm) {
  return ncclTeamOuterFactor(ncclTeamWorld(comm), comm.lsaSize);
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.rank + (rank - team.rank) * team.stride;
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.lsaRank + (rank - team.rank) * team.stride;
}
#endif

/* ---- Windows as device code reaches them. ---- */

/* Byte offset of a resource buffer in the device communicator's resource window. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) {
  return (size_t)h * 128u; /* handles count 128-byte units */
}

#if NCCL_DEVICE_HALF_
/* This rank's byte `offset` of window w. */
NCCL_DEVICE_INLINE void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) {
  return w->localBase + offset;
}
/* LSA member `peer`'s byte `offset` of window w (peer: an LSA rank, 0..lsaSize-1); null when that member's buffer
 * is out of this rank's reach. */
NCCL_DEVICE_INLINE void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  char* base = w->lsaBases[peer];
  return base != nullptr ? base + offset : nullptr;
}
/* World rank `peer`'s byte `offset` of window w: null when peer is not in this rank's LSA team. */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  const int lsa = peer - w->worldRank + w->lsaRank;
  return lsa >= 0 && lsa < w->lsaSize ? ncclGetLsaPointer(w, offset, lsa) : nullptr;
}
/* Member `peer` of team tm (seen from this rank). */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam tm, int peer) {
  return ncclGetPeerPointer(w, offset, w->worldRank + (peer - tm.rank) * tm.stride);
}
/* Whether this rank reaches world rank `peer`'s memory by load/store (NCCL 2.32): it is an LSA member whose buffers
 * are in reach (the device communicator's resource window stands for them). Flow connections go over GIN where not. */
NCCL_DEVICE_INLINE bool ncclDevCommCanGetPeerPointer(ncclDevComm const& comm, int peer) {
  return comm.resourceWindow != nullptr && ncclGetPeerPointer(comm.resourceWindow, 0, peer) != nullptr;
}
/* Multicast pointers (NVLS): byte `offset` of window w as every LSA member's buffer at once. A load-reduce through it
 * (ncclMultimemReduceSum, reduce_copy.h) reads the sum of every member's value there, a store (ncclMultimemCopy)
 * writes every member's. Null when mm was not set up (a device communicator created without lsaMultimem) or the
 * window has no multicast mapping (no NVSwitch, NCCL_NVLS_ENABLE=0, the multicast budget spent: INFO REG says). */
NCCL_DEVICE_INLINE void* ncclGetMultimemPointer(ncclWindow_t w, size_t offset, ncclMultimemHandle mm) {
  return mm.mcBasePtr != nullptr && w->lsaMultimem != nullptr ? w->lsaMultimem + offset : nullptr;
}
NCCL_DEVICE_INLINE void* ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset, ncclDevComm const& comm) {
  return ncclGetMultimemPointer(w, offset, comm.lsaMultimem);
}

namespace nccl_braid_ {
/* Whether comm's communicator was aborted (what every wait of the device half checks now and then). */
NCCL_DEVICE_INLINE bool aborted(ncclDevComm const& comm) {
  return comm.abortFlag != nullptr && atomicLoad(comm.abortFlag, cuda::memory_order_relaxed) != 0;
}
}  // namespace nccl_braid_

/* The window of comm whose buffer on this rank holds ptr, or null. Every thread of coop calls it alike (each gets
 * the answer). Windows registered after the kernel started may be missed. */
template <typename Coop>
NCCL_DEVICE_INLINE ncclWindow_t ncclFindWindow(Coop coop, ncclDevComm const& comm, void const* ptr) {
  (void)coop;
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  for (const ncclDevCommWindowTable* t = comm.windowTable; t != nullptr; t = t->next) {
    for (int i = 0; i < NCCL_DEV_COMM_WINDOW_TABLE_ENTRIES; ++i) {
      const ncclDevCommWindowEntry e = t->entries[i];
      if (e.window != nullptr && p - e.base < e.size) return e.window;
    }
  }
  return nullptr;
}

NCCL_DEVICE_INLINE void* ncclGetResourceBufferLocalPointer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return ncclGetLocalPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h));
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaPointer(ncclDevComm const& comm, ncclDevResourceHandle h, int peer) {
  return ncclGetLsaPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), peer);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferPeerPointer(ncclDevComm const& comm, ncclDevResourceHandle h,
                                                          ncclTeam team, int peer) {
  return ncclGetPeerPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), team, peer);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferMultimemPointer(ncclDevComm const& comm, ncclDevResourceHandle h,
                                                              ncclMultimemHandle mm) {
  return ncclGetMultimemPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), mm);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return ncclGetLsaMultimemPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), comm);
}
#endif /* NCCL_DEVICE_HALF_ */

#endif /* NCCL_DEVICE_CORE_H_ */
