// Windows and one-sided operations (NCCL 2.27-2.31): handle lookup here; the checks and the work in the core
// (src/core/rma.h, src/core/windows.h).
#include <vector>

#include "src/api/api.h"
#include "src/core/group.h"
#include "src/core/rma.h"

namespace braid {

static_assert(kWinCollSymmetric == NCCL_WIN_COLL_SYMMETRIC && kWinStrictOrdering == NCCL_WIN_STRICT_ORDERING &&
                  kWinGinOnly == NCCL_WIN_GIN_ONLY && kWinCftCounted == NCCL_WIN_CFT_COUNTED &&
                  kWinRequiredAlignment == NCCL_WIN_REQUIRED_ALIGNMENT,
              "the core's window flags are nccl.h's");

BRAID_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
          int winFlags) {
  return apiCall("ncclCommWindowRegister", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    return registerWindow(c, comm, buff, size, win, winFlags);
  });
}

BRAID_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return apiCall("ncclCommWindowDeregister", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    return c->windows().remove(win);
  });
}

BRAID_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return apiCall("ncclWinGetUserPtr", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(outUserPtr, "ncclWinGetUserPtr", "outUserPtr"));
    BRAID_ASSIGN_OR_RETURN(const Window* w, c->windows().find(win, "win"));
    *outUserPtr = w->userPtr;
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
          ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
          cudaStream_t stream) {
  return apiCall("ncclPutSignal", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    PutRequest r;
    r.localbuff = localbuff;
    r.count = count;
    r.datatype = static_cast<int>(datatype);
    r.peer = peer;
    r.peerWin = peerWin;
    r.peerWinOffset = peerWinOffset;
    r.sigIdx = sigIdx;
    r.ctx = ctx;
    r.flags = flags;
    r.handle = comm;
    r.stream = stream;
    return putSignal(c, r);
  });
}

BRAID_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
          cudaStream_t stream) {
  return apiCall("ncclSignal", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    PutRequest r;
    r.signalOnly = true;
    r.peer = peer;
    r.sigIdx = sigIdx;
    r.ctx = ctx;
    r.flags = flags;
    r.handle = comm;
    r.stream = stream;
    return putSignal(c, r);
  });
}

BRAID_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
          cudaStream_t stream) {
  return apiCall("ncclWaitSignal", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    if (nDesc < 0) return invalidArgument("nDesc=%d is negative", nDesc);
    if (nDesc > 0 && signalDescs == nullptr) return invalidArgument("signalDescs is NULL with nDesc=%d", nDesc);
    std::vector<WaitDesc> descs;
    for (int i = 0; i < nDesc; ++i) {
      const ncclWaitSignalDesc_t& d = signalDescs[i];
      descs.push_back(WaitDesc{d.opCnt, d.peer, d.sigIdx, d.ctx});
    }
    return waitSignal(c, descs, comm, stream);
  });
}

}  // namespace braid
