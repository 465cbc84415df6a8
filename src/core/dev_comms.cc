#include "src/core/dev_comms.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "src/common/logging.h"
#include "src/core/comm.h"
#include "src/core/teams.h"
#include "src/core/windows.h"

namespace braid {
namespace {

size_t roundUp(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

DevComms::~DevComms() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : records_) {
    e.second->extra.reset();
    (void)comm_->windows().remove(e.second->window);
    comm_->backend().freeWindowMemory(e.second->memory);
  }
  records_.clear();
}

Result<DevCommMade> DevComms::create(const DevCommRequest& req) {
  const Team lsa = lsaTeam(*comm_);
  const int me = comm_->rank(), n = comm_->nranks();
  DevCommMade made;
  size_t offset = req.barrierBytes;
  for (size_t i = 0; i < req.buffers.size(); ++i) {
    const DevCommRequest::Buffer& b = req.buffers[i];
    const size_t align = std::max(b.align, kHandleUnit);
    if ((align & (align - 1)) != 0 || align > kMaxAlign) {
      return invalidArgument("resource requirement %zu: bufferAlign %zu must be a power of two of at most %zu bytes", i,
                             b.align, kMaxAlign);
    }
    offset = roundUp(offset, align);
    if (offset / kHandleUnit > UINT32_MAX || b.bytes > (size_t(1) << 44)) {
      return invalidArgument("resource requirement %zu: bufferSize %zu makes the resource window too large", i,
                             b.bytes);
    }
    made.offsets.push_back(offset);
    offset += b.bytes;
  }
  const size_t bytes = roundUp(std::max<size_t>(offset, 1), kMaxAlign);
  // Whether to bind the resource window to a multicast object decides whether the registration below runs the
  // binding's collective rounds: every rank must ask alike, so the ranks compare first.
  struct Ask {
    uint64_t layoutBytes;
    int32_t multimem;
  };
  std::vector<Ask> asks(static_cast<size_t>(n));
  asks[static_cast<size_t>(me)] = Ask{bytes, req.multimem ? 1 : 0};
  BRAID_RETURN_IF_ERROR(comm_->bootstrap()->allGather(asks.data(), sizeof(Ask)).withContext("comparing requirements"));
  for (int q = 0; q < n; ++q) {
    const Ask& a = asks[static_cast<size_t>(q)];
    if (a.layoutBytes != bytes || (a.multimem != 0) != req.multimem) {
      return invalidUsage(
          "rank %d's requirements (a %llu-byte resource window, multimem %s) differ from rank %d's (%zu bytes, "
          "multimem %s): every rank must pass the same ncclDevCommRequirements",
          q, static_cast<unsigned long long>(a.layoutBytes), a.multimem != 0 ? "on" : "off", me, bytes,
          req.multimem ? "on" : "off");
    }
  }
  BRAID_ASSIGN_OR_RETURN(void* memory, comm_->backend().allocWindowMemory(bytes));
  auto fail = [&](Status st) {
    comm_->backend().freeWindowMemory(memory);
    return st;
  };
  Result<ncclWindow_vidmem*> win = comm_->windows().add(memory, bytes, 0, req.multimem);
  if (!win.isOk()) return fail(win.status().withContext("registering the device communicator's resource window"));
  if (win.value() == nullptr) {
    return fail(invalidUsage(
        "windows are disabled (NCCL_WIN_ENABLE=0 on some rank), and a device communicator lives in one: unset it"));
  }
  ncclWindow_vidmem* handle = win.value();
  auto unregister = [&](Status st) {
    (void)comm_->windows().remove(handle);
    return fail(st);
  };
  // Every rank checks that it reaches its LSA team's windows and that all asked for the same layout, and all learn
  // the outcome: a device communicator that works on some ranks only would leave kernels waiting on the others.
  Result<const Window*> w = comm_->windows().find(handle, "the resource window");
  if (!w.isOk()) return unregister(w.status());
  // (The layouts were compared before the window was made.)
  Status reach;
  const int first = me - lsa.rank * lsa.stride;
  for (int i = 0; i < lsa.nRanks && reach.isOk(); ++i) {
    const WindowPeer& p = w.value()->peers[static_cast<size_t>(first + i * lsa.stride)];
    if (p.at == nullptr) {
      reach = invalidUsage("LSA member %d (rank %d) is out of its load/store reach: %s", i, first + i * lsa.stride,
                           p.why.c_str());
    }
  }
  Status st =
      comm_->bootstrap()->agreeAllOrNothing(reach, "agreeing on a device comm", [](int q, const Status& theirs) {
        return invalidUsage("ncclDevCommCreate failed on rank %d: %s", q, theirs.message().c_str());
      });
  if (!st.isOk()) return unregister(st);
  Result<const void*> table = comm_->windows().deviceTable();
  if (!table.isOk()) return unregister(table.status());
  made.windowTable = table.value();
  auto rec = std::make_unique<Record>();
  rec->memory = memory;
  rec->window = handle;
  made.record = rec.get();
  made.window = handle;
  made.bytes = bytes;
  BRAID_INFO(kLogInit, "rank %d: device communicator: %zu-byte resource window, %zu buffers, LSA rank %d of %d", me,
             bytes, req.buffers.size(), lsa.rank, lsa.nRanks);
  std::lock_guard<std::mutex> lock(mu_);
  records_[rec.get()] = std::move(rec);
  return made;
}

void DevComms::attach(const void* record, std::shared_ptr<void> extra) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(record);
  if (it != records_.end()) it->second->extra = std::move(extra);
}

Status DevComms::destroy(const void* record, const ncclWindow_vidmem* window) {
  std::unique_ptr<Record> rec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(record);
    if (it == records_.end() || it->second->window != window) {
      return invalidArgument(
          "devComm (braidState %p) was not created by ncclDevCommCreate on this communicator (rank "
          "%d), or was destroyed already",
          record, comm_->rank());
    }
    rec = std::move(it->second);
    records_.erase(it);
  }
  rec->extra.reset();
  Status st = comm_->windows().remove(rec->window);
  comm_->backend().freeWindowMemory(rec->memory);
  return st;
}

}  // namespace braid
