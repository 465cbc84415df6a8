// The default backend: braid itself, through the public nccl.h API only (what an application sees).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "perf/common/backend.h"
#include "perf/common/cuda_runtime.h"

namespace braid::perf {
namespace {

std::string describe(const char* what, ncclResult_t r, ncclComm_t comm) {
  std::string s = std::string(what) + " failed: " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') s += std::string(": ") + last;
  return s;
}

class BraidComms final : public ThreadComms {
 public:
  explicit BraidComms(std::vector<ncclComm_t> comms) : comms_(std::move(comms)) {}
  ~BraidComms() override {
    for (ncclComm_t c : comms_) {
      if (c != nullptr) (void)ncclCommAbort(c);
    }
  }

  bool supports(CollKind, const TypeInfo&, const OpInfo&, std::string*) const override { return true; }

  bool run(CollKind kind, const std::vector<RunArgs>& args, std::string* error) override {
    // Several ranks in one thread must be issued as one group, or the first call would wait for the others.
    const bool grouped = comms_.size() > 1;
    if (grouped && !check(ncclGroupStart(), "ncclGroupStart", nullptr, error)) return false;
    for (size_t i = 0; i < comms_.size(); ++i) {
      if (!issue(kind, args[i], comms_[i], error)) {
        if (grouped) (void)ncclGroupEnd();
        return false;
      }
    }
    return !grouped || check(ncclGroupEnd(), "ncclGroupEnd", comms_[0], error);
  }

  bool groupStart(std::string* error) override { return check(ncclGroupStart(), "ncclGroupStart", nullptr, error); }
  bool groupEnd(std::string* error) override { return check(ncclGroupEnd(), "ncclGroupEnd", comms_[0], error); }

  bool allReduce(const std::vector<void*>& bufs, size_t count, ncclDataType_t type, ncclRedOp_t op,
                 const std::vector<cudaStream_t>& streams, std::string* error) override {
    if (!check(ncclGroupStart(), "ncclGroupStart", nullptr, error)) return false;
    for (size_t i = 0; i < comms_.size(); ++i) {
      cudaStream_t stream = streams.empty() ? nullptr : streams[i];
      if (!check(ncclAllReduce(bufs[i], bufs[i], count, type, op, comms_[i], stream), "ncclAllReduce", comms_[i],
                 error)) {
        (void)ncclGroupEnd();
        return false;
      }
    }
    return check(ncclGroupEnd(), "ncclGroupEnd", comms_[0], error);
  }

  int device(size_t i) const override {
    int dev = -1;
    (void)ncclCommCuDevice(comms_[i], &dev);
    return dev;
  }

  bool registerBuffers(size_t i, const std::vector<std::pair<void*, size_t>>& buffers, bool windows,
                       std::string* error) override {
    for (const auto& [p, bytes] : buffers) {
      if (windows) {
        // Written at ncclGroupEnd when the caller groups the calls: the slot must stay where it is until then.
        windows_.push_back(std::make_unique<Win>(Win{comms_[i], nullptr}));
        if (!check(ncclCommWindowRegister(comms_[i], p, bytes, &windows_.back()->win, NCCL_WIN_COLL_SYMMETRIC),
                   "ncclCommWindowRegister", comms_[i], error)) {
          return false;
        }
        continue;
      }
      void* handle = nullptr;
      if (!check(ncclCommRegister(comms_[i], p, bytes, &handle), "ncclCommRegister", comms_[i], error)) return false;
      handles_.emplace_back(comms_[i], handle);
    }
    return true;
  }

  bool close(std::string* error) override {
    bool ok = true;
    for (const auto& [c, h] : handles_) ok = check(ncclCommDeregister(c, h), "ncclCommDeregister", c, error) && ok;
    handles_.clear();
    for (const auto& w : windows_) {
      ok = check(ncclCommWindowDeregister(w->comm, w->win), "ncclCommWindowDeregister", w->comm, error) && ok;
    }
    windows_.clear();
    for (ncclComm_t& c : comms_) {
      if (c == nullptr) continue;
      ok = check(ncclCommDestroy(c), "ncclCommDestroy", c, error) && ok;
      c = nullptr;
    }
    return ok;
  }

 private:
  static bool check(ncclResult_t r, const char* what, ncclComm_t comm, std::string* error) {
    if (r == ncclSuccess) return true;
    *error = describe(what, r, comm);
    return false;
  }

  static bool issue(CollKind kind, const RunArgs& a, ncclComm_t comm, std::string* error) {
    if (a.op->op != kMulSumOp) return issueWith(kind, a, a.op->op, comm, error);
    // nccl-tests' mulsum: a pre-multiplied sum created for each call with this rank's scalar.
    alignas(8) unsigned char scalar[8] = {0};
    storeScalar(*a.type, premulScalar(a.rank), scalar);
    ncclRedOp_t op;
    if (!check(ncclRedOpCreatePreMulSum(&op, scalar, a.type->type, ncclScalarHostImmediate, comm),
               "ncclRedOpCreatePreMulSum", comm, error)) {
      return false;
    }
    const bool ok = issueWith(kind, a, op, comm, error);
    std::string destroyError;
    const bool destroyed = check(ncclRedOpDestroy(op, comm), "ncclRedOpDestroy", comm, &destroyError);
    if (ok && !destroyed) *error = destroyError;
    return ok && destroyed;
  }

  static bool issueWith(CollKind kind, const RunArgs& a, ncclRedOp_t op, ncclComm_t comm, std::string* error) {
    const ncclDataType_t t = a.type->type;
    const CollCounts& c = a.counts;
    cudaStream_t st = a.stream;
    switch (kind) {
      case CollKind::kAllReduce:
        return check(ncclAllReduce(a.send, a.recv, c.paramCount, t, op, comm, st), "ncclAllReduce", comm, error);
      case CollKind::kAllGather:
        return check(ncclAllGather(a.send, a.recv, c.paramCount, t, comm, st), "ncclAllGather", comm, error);
      case CollKind::kReduceScatter:
        return check(ncclReduceScatter(a.send, a.recv, c.paramCount, t, op, comm, st), "ncclReduceScatter", comm,
                     error);
      case CollKind::kAlltoAll:
        return check(ncclAlltoAll(a.send, a.recv, c.paramCount, t, comm, st), "ncclAlltoAll", comm, error);
      case CollKind::kBroadcast:
        return check(ncclBroadcast(a.send, a.recv, c.paramCount, t, a.root, comm, st), "ncclBroadcast", comm, error);
      case CollKind::kReduce:
        return check(ncclReduce(a.send, a.recv, c.paramCount, t, op, a.root, comm, st), "ncclReduce", comm, error);
      case CollKind::kGather:
        return check(ncclGather(a.send, a.recv, c.paramCount, t, a.root, comm, st), "ncclGather", comm, error);
      case CollKind::kScatter:
        return check(ncclScatter(a.send, a.recv, c.paramCount, t, a.root, comm, st), "ncclScatter", comm, error);
      case CollKind::kSendRecv: {
        // nccl-tests' pattern: every rank sends to the next and receives from the previous, in one group.
        const int next = (a.rank + 1) % a.nranks;
        const int prev = (a.rank - 1 + a.nranks) % a.nranks;
        if (!check(ncclGroupStart(), "ncclGroupStart", comm, error)) return false;
        const ncclResult_t s = ncclSend(a.send, c.paramCount, t, next, comm, st);
        const ncclResult_t r = s == ncclSuccess ? ncclRecv(a.recv, c.paramCount, t, prev, comm, st) : s;
        const ncclResult_t e = ncclGroupEnd();
        if (!check(s, "ncclSend", comm, error) || !check(r, "ncclRecv", comm, error)) return false;
        return check(e, "ncclGroupEnd", comm, error);
      }
    }
    *error = "unknown collective";
    return false;
  }

  std::vector<ncclComm_t> comms_;
  std::vector<std::pair<ncclComm_t, void*>> handles_;  // -R 1 registrations
  struct Win {
    ncclComm_t comm;
    ncclWindow_t win;
  };
  std::vector<std::unique_ptr<Win>> windows_;  // -R 2 windows
};

class BraidBackend final : public Backend {
 public:
  const char* name() const override { return "braid"; }

  bool startProcess(LaunchInfo* launch, int /*ranksPerProcess*/, std::string* error) override {
    // Under an MPI launcher (MPI build), the id travels by MPI_Bcast as in nccl-tests: no MASTER_ADDR needed, and
    // the hostfile alone spans hosts. Otherwise every process derives the same id from NCCL_COMM_ID.
    if (launch->worldSize > 1 && mpiLaunchDetected()) {
      if (launch->procRank == 0) {
        if (ncclResult_t r = ncclGetUniqueId(&id_); r != ncclSuccess) {
          *error = describe("ncclGetUniqueId", r, nullptr);
          return false;
        }
      }
      return mpiBroadcastFromRoot(*launch, &id_, sizeof(id_), error);
    }
    if (!prepareRendezvous(launch, error)) return false;
    if (ncclResult_t r = ncclGetUniqueId(&id_); r != ncclSuccess) {
      *error = describe("ncclGetUniqueId", r, nullptr);
      return false;
    }
    return true;
  }

  bool takesDeviceBuffers() const override { return true; }

  std::unique_ptr<ThreadComms> connect(int firstRank, int count, int nranks, const std::vector<int>& devices,
                                       std::string* error) override {
    std::vector<ncclComm_t> comms(static_cast<size_t>(count), nullptr);
    // nccl-tests initializes a thread's GPUs in one group; braid's grouped init runs them concurrently.
    if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) {
      *error = describe("ncclGroupStart", r, nullptr);
      return nullptr;
    }
    ncclResult_t first = ncclSuccess;
    std::string deviceError;
    for (int i = 0; i < count && first == ncclSuccess; ++i) {
      const int device = devices[static_cast<size_t>(i)];
      if (device >= 0 && !CudaRuntime::get().setDevice(device, &deviceError)) {
        first = ncclSystemError;
        break;
      }
      first = ncclCommInitRank(&comms[static_cast<size_t>(i)], nranks, id_, firstRank + i);
    }
    const ncclResult_t end = ncclGroupEnd();
    const ncclResult_t r = first != ncclSuccess ? first : end;
    if (r != ncclSuccess) {
      *error = deviceError.empty() ? describe("ncclCommInitRank", r, nullptr) : deviceError;
      for (ncclComm_t c : comms) {
        if (c != nullptr) (void)ncclCommAbort(c);
      }
      return nullptr;
    }
    return std::make_unique<BraidComms>(std::move(comms));
  }

  void finishProcess() override { mpiFinalizeIfStarted(); }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (ncclMemAlloc(&p, bytes) != ncclSuccess) return nullptr;
    std::memset(p, 0, bytes);  // touch every page before anything is timed
    return p;
  }
  void release(void* p) override { (void)ncclMemFree(p); }

  void* allocateOnDevice(size_t bytes, std::string* error) override {
    void* p = nullptr;
    if (ncclResult_t r = ncclMemAlloc(&p, bytes); r != ncclSuccess) {
      *error = describe("ncclMemAlloc", r, nullptr);
      return nullptr;
    }
    if (!CudaRuntime::get().fill(p, 0, bytes, error)) {
      (void)ncclMemFree(p);
      return nullptr;
    }
    return p;
  }
  void releaseOnDevice(void* p) override { (void)ncclMemFree(p); }

 private:
  ncclUniqueId id_{};
};

}  // namespace

std::unique_ptr<Backend> makeBraidBackend() {
  return std::make_unique<BraidBackend>();
}

}  // namespace braid::perf
