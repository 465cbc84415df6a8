#include "src/core/rma.h"

#include "src/common/dtype.h"
#include "src/common/params.h"
#include "src/core/comm.h"
#include "src/core/enqueue.h"
#include "src/core/group.h"

namespace braid {
namespace {

// NCCL 2.31: sigIdx in [0, numRmaSig), ctx in [0, numRmaCtx), no flags ("must be set to 0 for now").
Status checkSignalArgs(const Communicator& comm, const char* where, int sigIdx, int ctx, unsigned flags) {
  const CommConfig& c = comm.config();
  if (c.numRmaCtx == 0) {
    return invalidArgument(
        "%sctx=%d: one-sided operations are off on this communicator (numRmaCtx=0 in its config or "
        "NCCL_NUM_RMA_CTX=0)",
        where, ctx);
  }
  if (ctx < 0 || ctx >= c.numRmaCtx) {
    return invalidArgument("%sctx=%d must be in [0, %d): the communicator's numRmaCtx (config, or NCCL_NUM_RMA_CTX)",
                           where, ctx, c.numRmaCtx);
  }
  if (sigIdx < 0 || sigIdx >= c.numRmaSig) {
    return invalidArgument("%ssigIdx=%d must be in [0, %d): the communicator's numRmaSig (config)", where, sigIdx,
                           c.numRmaSig);
  }
  if (flags != 0) return invalidArgument("%sflags=0x%x: no flags are defined; pass 0", where, flags);
  return Status::ok();
}

}  // namespace

Status resolveRmaConfig(CommConfig* config) {
  const ParamValue ctx = lookupParam(params::kNumRmaCtx);
  if (ctx.isSet) {
    BRAID_ASSIGN_OR_RETURN(int64_t v, getIntParam(params::kNumRmaCtx));
    if (v < 0 || v > kMaxRmaCtx) {
      return invalidArgument("%s=%lld must be in 0..%d (0 turns one-sided operations off)", params::kNumRmaCtx.name,
                             static_cast<long long>(v), kMaxRmaCtx);
    }
    config->numRmaCtx = static_cast<int>(v);
  }
  const ParamValue eager = lookupParam(params::kRmaEagerInit);
  if (eager.isSet) {
    BRAID_ASSIGN_OR_RETURN(int64_t v, getIntParam(params::kRmaEagerInit));
    if (v != 0 && v != 1) {
      return invalidArgument("%s=%lld must be 0 or 1", params::kRmaEagerInit.name, static_cast<long long>(v));
    }
    config->rmaEagerInit = static_cast<int>(v);
  }
  return Status::ok();
}

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
  BRAID_RETURN_IF_ERROR(checkSignalArgs(*comm, "", r.sigIdx, r.ctx, r.flags));
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
  BRAID_ASSIGN_OR_RETURN(std::vector<RmaStep> steps,
                         comm->windows().putSteps(!r.signalOnly, r.localbuff, bytes, r.peer, r.peerWin, r.peerWinOffset,
                                                  SignalId{r.ctx, r.sigIdx}));
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
    BRAID_RETURN_IF_ERROR(checkSignalArgs(*comm, where.c_str(), descs[i].sigIdx, descs[i].ctx, 0));
    waits.push_back(SignalWait{descs[i].peer, descs[i].opCnt, descs[i].ctx, descs[i].sigIdx});
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
