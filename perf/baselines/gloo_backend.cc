// --baseline gloo: the same table through Gloo's own collectives (Debian's libgloo, TCP transport), one Gloo
// context per rank. Rendezvous goes through a TCP store served by rank 0 at MASTER_ADDR:MASTER_PORT; Gloo's TCP
// device binds GLOO_SOCKET_IFNAME when set (as in PyTorch), else the address MASTER_ADDR routes from.
//
// Semantics follow the NCCL call each row stands for. Where Gloo's API differs, the adaptation is part of the
// timed operation:
//   reduce_scatter: Gloo has only the in-place ReduceScatterHalvingDoubling algorithm, which leaves the result at
//                   the start of the buffer; out of place, the input is first copied into a scratch buffer; the
//                   block is then moved to the receive buffer (in place: to rank * count).
//   alltoall in place: Gloo needs distinct buffers; the input is copied to a scratch buffer first.
// Types and ops Gloo does not have (bfloat16, fp8, avg) are refused before anything runs.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "perf/baselines/tcp_store.h"
#include "perf/common/backend.h"

namespace braid::perf {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn reduceFnFor(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return &gloo::sum<T>;
    case ncclProd:
      return &gloo::product<T>;
    case ncclMax:
      return &gloo::max<T>;
    case ncclMin:
      return &gloo::min<T>;
    default:
      return nullptr;
  }
}

ReduceFn reduceFn(ncclDataType_t type, ncclRedOp_t op) {
  switch (type) {
    case ncclInt8:
      return reduceFnFor<int8_t>(op);
    case ncclUint8:
      return reduceFnFor<uint8_t>(op);
    case ncclInt32:
      return reduceFnFor<int32_t>(op);
    case ncclUint32:
      return reduceFnFor<uint32_t>(op);
    case ncclInt64:
      return reduceFnFor<int64_t>(op);
    case ncclUint64:
      return reduceFnFor<uint64_t>(op);
    case ncclFloat16:
      return reduceFnFor<gloo::float16>(op);
    case ncclFloat32:
      return reduceFnFor<float>(op);
    case ncclFloat64:
      return reduceFnFor<double>(op);
    default:
      return nullptr;
  }
}

bool glooHasType(ncclDataType_t type) {
  return reduceFn(type, ncclSum) != nullptr;
}

// Gloo's option setters are templates on the element type; bytes are all they keep, so one byte-sized stand-in
// type per element size is enough for data movement.
template <typename Opts>
void setIn(Opts& o, const void* p, size_t elems, size_t ts) {
  o.template setInput<char>(static_cast<char*>(const_cast<void*>(p)), elems * ts);
}
template <typename Opts>
void setOut(Opts& o, void* p, size_t elems, size_t ts) {
  o.template setOutput<char>(static_cast<char*>(p), elems * ts);
}

// Element-typed setters, for the reductions (Gloo passes element counts to the reduce function).
template <typename T, typename Opts>
void setTyped(Opts& o, const void* in, void* out, size_t elems) {
  if (in != nullptr) o.template setInput<T>(static_cast<T*>(const_cast<void*>(in)), elems);
  o.template setOutput<T>(static_cast<T*>(out), elems);
}

template <typename Opts>
void setTypedBuffers(Opts& o, ncclDataType_t type, const void* in, void* out, size_t elems) {
  switch (type) {
    case ncclInt8:
      setTyped<int8_t>(o, in, out, elems);
      break;
    case ncclUint8:
      setTyped<uint8_t>(o, in, out, elems);
      break;
    case ncclInt32:
      setTyped<int32_t>(o, in, out, elems);
      break;
    case ncclUint32:
      setTyped<uint32_t>(o, in, out, elems);
      break;
    case ncclInt64:
      setTyped<int64_t>(o, in, out, elems);
      break;
    case ncclUint64:
      setTyped<uint64_t>(o, in, out, elems);
      break;
    case ncclFloat16:
      setTyped<gloo::float16>(o, in, out, elems);
      break;
    case ncclFloat32:
      setTyped<float>(o, in, out, elems);
      break;
    default:
      setTyped<double>(o, in, out, elems);
      break;
  }
}

class GlooComms final : public ThreadComms {
 public:
  GlooComms(std::shared_ptr<gloo::Context> ctx, std::unique_ptr<TcpStore> store)
      : ctx_(std::move(ctx)), store_(std::move(store)) {}

  bool supports(CollKind kind, const TypeInfo& type, const OpInfo& op, std::string* why) const override {
    if (!glooHasType(type.type)) {
      *why = std::string("Gloo has no datatype for ") + type.name + " (use int8..uint64, half, float or double)";
      return false;
    }
    const bool reduces = kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter || kind == CollKind::kReduce;
    if (reduces && reduceFn(type.type, op.op) == nullptr) {
      *why = std::string("Gloo has no reduction op ") + op.name + " (use -o sum, prod, max or min)";
      return false;
    }
    return true;
  }

  bool run(CollKind kind, const std::vector<RunArgs>& args, std::string* error) override {
    // Gloo's algorithms divide by the element count; an empty operation has nothing to move anyway.
    if (args[0].counts.paramCount == 0) return true;
    try {
      issue(kind, args[0]);
      return true;
    } catch (const std::exception& e) {
      *error = std::string("Gloo: ") + e.what();
      return false;
    }
  }

  bool groupStart(std::string*) override { return true; }
  bool groupEnd(std::string*) override { return true; }

  bool allReduce(const std::vector<void*>& bufs, size_t count, ncclDataType_t type, ncclRedOp_t op,
                 const std::vector<cudaStream_t>&, std::string* error) override {
    try {
      gloo::AllreduceOptions o(ctx_);
      o.setTag(kBookkeepingTag);
      if (type == ncclUint8) {
        o.setOutput<uint8_t>(static_cast<uint8_t*>(bufs[0]), count);
      } else if (type == ncclInt64) {
        o.setOutput<int64_t>(static_cast<int64_t*>(bufs[0]), count);
      } else {
        o.setOutput<double>(static_cast<double*>(bufs[0]), count);
      }
      o.setReduceFunction(reduceFn(type, op));
      gloo::allreduce(o);
      return true;
    } catch (const std::exception& e) {
      *error = std::string("Gloo allreduce (bookkeeping): ") + e.what();
      return false;
    }
  }

  int device(size_t) const override { return -1; }

  bool close(std::string* error) override {
    try {
      reduceScatters_.clear();
      ctx_.reset();
      store_.reset();
      return true;
    } catch (const std::exception& e) {
      *error = std::string("Gloo: ") + e.what();
      return false;
    }
  }

 private:
  static constexpr uint32_t kBookkeepingTag = 1;

  void* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  void issue(CollKind kind, const RunArgs& a) {
    const size_t ts = a.type->size;
    const size_t n = a.counts.paramCount;
    const int nranks = a.nranks;
    switch (kind) {
      case CollKind::kAllReduce: {
        gloo::AllreduceOptions o(ctx_);
        setTypedBuffers(o, a.type->type, a.inPlace ? nullptr : a.send, a.recv, n);
        o.setReduceFunction(reduceFn(a.type->type, a.op->op));
        gloo::allreduce(o);
        return;
      }
      case CollKind::kAllGather: {
        gloo::AllgatherOptions o(ctx_);
        if (!a.inPlace) setIn(o, a.send, n, ts);  // in place: Gloo takes the rank's block from the output
        setOut(o, a.recv, n * static_cast<size_t>(nranks), ts);
        gloo::allgather(o);
        return;
      }
      case CollKind::kReduceScatter:
        reduceScatter(a);
        return;
      case CollKind::kAlltoAll: {
        gloo::AlltoallOptions o(ctx_);
        const size_t bytes = n * static_cast<size_t>(nranks) * ts;
        const void* in = a.send;
        if (a.inPlace) {
          in = scratch(bytes);
          std::memcpy(const_cast<void*>(in), a.send, bytes);
        }
        setIn(o, in, n * static_cast<size_t>(nranks), ts);
        setOut(o, a.recv, n * static_cast<size_t>(nranks), ts);
        gloo::alltoall(o);
        return;
      }
      case CollKind::kBroadcast: {
        gloo::BroadcastOptions o(ctx_);
        if (a.rank == a.root && !a.inPlace) setIn(o, a.send, n, ts);
        setOut(o, a.recv, n, ts);
        o.setRoot(a.root);
        gloo::broadcast(o);
        return;
      }
      case CollKind::kReduce: {
        gloo::ReduceOptions o(ctx_);
        setTypedBuffers(o, a.type->type, a.inPlace ? nullptr : a.send, a.recv, n);
        o.setReduceFunction(reduceFn(a.type->type, a.op->op));
        o.setRoot(a.root);
        gloo::reduce(o);
        return;
      }
      case CollKind::kGather: {
        gloo::GatherOptions o(ctx_);
        setIn(o, a.send, n, ts);
        if (a.rank == a.root) setOut(o, a.recv, n * static_cast<size_t>(nranks), ts);
        o.setRoot(a.root);
        gloo::gather(o);
        return;
      }
      case CollKind::kScatter: {
        gloo::ScatterOptions o(ctx_);
        if (a.rank == a.root) {
          std::vector<char*> blocks;
          for (int r = 0; r < nranks; ++r) {
            blocks.push_back(static_cast<char*>(const_cast<void*>(a.send)) + static_cast<size_t>(r) * n * ts);
          }
          o.setInputs<char>(blocks, n * ts);
        }
        setOut(o, a.recv, n, ts);
        o.setRoot(a.root);
        gloo::scatter(o);
        return;
      }
      case CollKind::kSendRecv: {
        if (nranks == 1) {  // Gloo has no pair to itself; the one rank's "message" is a copy
          if (a.recv != a.send) std::memmove(a.recv, a.send, n * ts);
          return;
        }
        const int next = (a.rank + 1) % nranks;
        const int prev = (a.rank - 1 + nranks) % nranks;
        const void* in = a.send;
        if (a.inPlace) {
          in = scratch(n * ts);
          std::memcpy(const_cast<void*>(in), a.send, n * ts);
        }
        auto sendBuf = ctx_->createUnboundBuffer(const_cast<void*>(in), n * ts);
        auto recvBuf = ctx_->createUnboundBuffer(a.recv, n * ts);
        const uint64_t slot = 7;
        recvBuf->recv(prev, slot);
        sendBuf->send(next, slot);
        sendBuf->waitSend();
        recvBuf->waitRecv();
        return;
      }
    }
  }

  // Gloo's ReduceScatterHalvingDoubling reduces in place and leaves each rank's block at its own offset; the
  // algorithm object (and its pairs and scratch) is built once per buffer and size, as an application would.
  void reduceScatter(const RunArgs& a) {
    const size_t ts = a.type->size;
    const size_t n = a.counts.paramCount;
    const size_t total = n * static_cast<size_t>(a.nranks);
    char* work = static_cast<char*>(const_cast<void*>(a.send));
    if (!a.inPlace) {
      work = static_cast<char*>(scratch(total * ts));
      std::memcpy(work, a.send, total * ts);
    }
    const auto key =
        std::make_tuple(static_cast<void*>(work), total, static_cast<int>(a.type->type), static_cast<int>(a.op->op));
    auto it = reduceScatters_.find(key);
    if (it == reduceScatters_.end()) {
      it = reduceScatters_.emplace(key, makeReduceScatter(a, work, total)).first;
    }
    it->second->run();
    // The algorithm leaves every rank's block at the start of its buffer, as MPI's in-place form does.
    if (a.recv != work) std::memmove(a.recv, work, n * ts);
  }

  template <typename T>
  std::unique_ptr<gloo::Algorithm> makeReduceScatterT(const RunArgs& a, char* work, size_t total) {
    const std::vector<T*> ptrs{reinterpret_cast<T*>(work)};
    const std::vector<int> recvElems(static_cast<size_t>(a.nranks), static_cast<int>(a.counts.paramCount));
    const gloo::ReductionFunction<T>* fn = nullptr;
    switch (a.op->op) {
      case ncclProd:
        fn = gloo::ReductionFunction<T>::product;
        break;
      case ncclMax:
        fn = gloo::ReductionFunction<T>::max;
        break;
      case ncclMin:
        fn = gloo::ReductionFunction<T>::min;
        break;
      default:
        fn = gloo::ReductionFunction<T>::sum;
        break;
    }
    return std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(ctx_, ptrs, static_cast<int>(total), recvElems, fn);
  }

  std::unique_ptr<gloo::Algorithm> makeReduceScatter(const RunArgs& a, char* work, size_t total) {
    switch (a.type->type) {
      case ncclInt8:
        return makeReduceScatterT<int8_t>(a, work, total);
      case ncclUint8:
        return makeReduceScatterT<uint8_t>(a, work, total);
      case ncclInt32:
        return makeReduceScatterT<int32_t>(a, work, total);
      case ncclUint32:
        return makeReduceScatterT<uint32_t>(a, work, total);
      case ncclInt64:
        return makeReduceScatterT<int64_t>(a, work, total);
      case ncclUint64:
        return makeReduceScatterT<uint64_t>(a, work, total);
      case ncclFloat16:
        return makeReduceScatterT<gloo::float16>(a, work, total);
      case ncclFloat32:
        return makeReduceScatterT<float>(a, work, total);
      default:
        return makeReduceScatterT<double>(a, work, total);
    }
  }

  std::shared_ptr<gloo::Context> ctx_;
  std::unique_ptr<TcpStore> store_;
  std::vector<char> scratch_;
  std::map<std::tuple<void*, size_t, int, int>, std::unique_ptr<gloo::Algorithm>> reduceScatters_;
};

const char* envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

class GlooBackend final : public Backend {
 public:
  const char* name() const override { return "gloo"; }
  int maxRanksPerThread() const override { return 1; }

  bool startProcess(LaunchInfo* launch, int, std::string* error) override {
    if (!launch->masterPortError.empty()) {
      *error = "Gloo's store: " + launch->masterPortError;
      return false;
    }
    nprocs_ = launch->worldSize;
    host_ = launch->masterAddr;
    port_ = launch->masterPort;
    return true;
  }

  std::unique_ptr<ThreadComms> connect(int firstRank, int, int nranks, const std::vector<int>&,
                                       std::string* error) override {
    try {
      const std::string& host = host_;
      const int port = port_;
      const auto timeout = std::chrono::seconds(std::atoi(envOr("BRAID_TIMEOUT", "60")));
      auto store = std::make_unique<TcpStore>(host, port, firstRank == 0, nranks, timeout);
      gloo::transport::tcp::attr attr;
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
        attr.iface = ifname;
      } else {
        attr.hostname = host == "localhost" || host.rfind("127.", 0) == 0 ? "127.0.0.1" : hostName();
      }
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(firstRank, nranks);
      ctx->setTimeout(timeout);
      ctx->connectFullMesh(*store, device);
      return std::make_unique<GlooComms>(std::move(ctx), std::move(store));
    } catch (const std::exception& e) {
      *error = std::string("Gloo rendezvous: ") + e.what();
      return nullptr;
    }
  }

 private:
  static std::string hostName() {
    char name[256] = {0};
    if (gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
    return name;
  }
  int nprocs_ = 1;
  std::string host_;  // the store's address: rank 0's host and port (LaunchInfo)
  int port_ = 0;
};

}  // namespace

std::unique_ptr<Backend> makeGlooBackend() {
  return std::make_unique<GlooBackend>();
}

}  // namespace braid::perf
