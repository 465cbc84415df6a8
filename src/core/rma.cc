#include "src/core/rma.h"

#include "src/common/dtype.h"
#include "src/core/comm.h"
#include "src/core/enqueue.h"
#include "src/core/group.h"

namespace braid {
namespace {

// NCCL 2.29-2.31 take signal 0 of context 0 and no flags ("must be set to 0 for now").
Status checkSignalArgs(const char* where, int sigIdx, int ctx, unsigned flags) {
  if (sigIdx != 0) return invalidArgument("%ssigIdx=%d: only signal 0 exists (as in NCCL 2.29-2.31)", where, sigIdx);
  if (ctx != 0) return invalidArgument("%sctx=%d: only context 0 exists (as in NCCL 2.29-2.31)", where, ctx);
  if (flags != 0) return invalidArgument("%sflags=0x%x: no flags are defined; pass 0", where, flags);
  return Status::ok();
}

}  // namespace

Status registerWindow(const std::shared_ptr<Communicator>& comm, const void* handle, void* buff, size_t bytes,
                      ncclWindow_vidmem** win, int flags) {
  BRAID_RETURN_IF_ERROR(checkUsable(*comm, handle, nullptr));
  if (buff == nullptr) return invalidArgument("buff is NULL");
  if (win == nullptr) return invalidArgument("win is NULL");
  if (bytes == 0) return invalidArgument("size=0: a window holds at least one byte");
  BRAID_RETURN_IF_ERROR(comm->backend().checkBuffer(buff, bytes, "buff"));
  *win = nullptr;
  auto job = [comm, buff, bytes, win, flags]() -> Status {
    BRAID_ASSIGN_OR_RETURN(*win, comm->windows().add(buff, bytes, flags));
    return Status::ok();
  };
  if (!inGroup()) return job();
  groupAddJob(job, comm.get());
  return Status::ok();
}

Status putSignal(const std::shared_ptr<Communicator>& comm, const PutRequest& r) {
  BRAID_RETURN_IF_ERROR(checkUsable(*comm, r.handle, r.stream));
  BRAID_RETURN_IF_ERROR(checkSignalArgs("", r.sigIdx, r.ctx, r.flags));
  size_t bytes = 0;
  if (!r.signalOnly) {
    BRAID_RETURN_IF_ERROR(checkDatatype(r.datatype));
    const size_t es = dtypeSize(static_cast<DType>(r.datatype));
    if (r.count > static_cast<size_t>(PTRDIFF_MAX) / es) {
      return invalidArgument("count=%zu (%lld as a signed value) is negative or too large", r.count,
                             static_cast<long long>(r.count));
    }
    bytes = r.count * es;
    if (bytes > 0 && r.localbuff == nullptr) return invalidArgument("localbuff is NULL with count=%zu", r.count);
    if (bytes > 0) BRAID_RETURN_IF_ERROR(comm->backend().checkBuffer(r.localbuff, bytes, "localbuff"));
  }
  // A put of no data is still a put: its window and offset are checked.
  BRAID_ASSIGN_OR_RETURN(std::vector<RmaStep> steps, comm->windows().putSteps(!r.signalOnly, r.localbuff, bytes, r.peer,
                                                                              r.peerWin, r.peerWinOffset));
  // Puts and signals never wait for the peer's call (at most for room in a connection): they run at the call, in a
  // group too.
  BRAID_RETURN_IF_ERROR(comm->backend().runRma(steps, r.stream));
  comm->windows().commit(steps);
  return Status::ok();
}

Status waitSignal(const std::shared_ptr<Communicator>& comm, const std::vector<WaitDesc>& descs, const void* handle,
                  void* stream) {
  BRAID_RETURN_IF_ERROR(checkUsable(*comm, handle, stream));
  std::vector<SignalWait> waits;
  for (size_t i = 0; i < descs.size(); ++i) {
    const std::string where = strPrintf("signalDescs[%zu].", i);
    BRAID_RETURN_IF_ERROR(checkSignalArgs(where.c_str(), descs[i].sigIdx, descs[i].ctx, 0));
    waits.push_back(SignalWait{descs[i].peer, descs[i].opCnt});
  }
  BRAID_ASSIGN_OR_RETURN(std::vector<RmaStep> steps, comm->windows().waitSteps(waits));
  if (steps.empty()) return Status::ok();
  // A stream backend only enqueues the wait; a host one blocks, so inside a group it waits at ncclGroupEnd.
  if (!inGroup() || comm->backend().caps().streams) {
    BRAID_RETURN_IF_ERROR(comm->backend().runRma(steps, stream));
  } else {
    groupAddJob([comm, steps, stream]() { return comm->backend().runRma(steps, stream); }, comm.get());
  }
  comm->windows().commit(steps);
  return Status::ok();
}

}  // namespace braid
