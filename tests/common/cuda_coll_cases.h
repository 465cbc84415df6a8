// Collective cases with exact inputs for CUDA communicators on the fake driver (tests/fake_cuda): device buffers
// filled and read back through the rank's stream, every element checked bitwise (tests/common/harness.h's values),
// shared by the direct (NVLS-style) and the algorithm x protocol matrix suites.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace braid_test {

enum class Kind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv
};

// Broadcast, reduce, gather and scatter use root 1 (0 with one rank). Send/recv is a ring shift: each rank sends its
// buffer to the next and receives the previous one's. The copies (all-to-all, gather, scatter, send/recv) run out
// of place and ignore the op.
struct Case {
  Kind kind;
  ncclDataType_t type;
  ncclRedOp_t op;  // ncclNumOps: a PreMulSum with this rank's scalar, rank + 2 (a per-rank scalar)
  size_t count;
  bool inPlace;
  bool deviceScalar = false;  // PreMulSum's scalar in device memory (ncclScalarDevice), read when the kernel runs
};

inline int rootOf(int n) {
  return n > 1 ? 1 : 0;
}

inline std::string describe(const Case& c) {
  const char* names[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce",
                         "AllToAll",  "Gather",        "Scatter",   "SendRecv"};
  const char* k = names[static_cast<int>(c.kind)];
  const char* op = c.op != ncclNumOps ? opName(c.op) : c.deviceScalar ? "premulsum (device scalar)" : "premulsum";
  return fmt("%s %s %s count %zu %s", k, typeName(c.type), op, c.count, c.inPlace ? "in place" : "out of place");
}

// The expected reduction of element i with PreMulSum scalars rank + 2 (inputs and sums stay tiny integers).
inline double expected(const Case& c, int n, size_t i) {
  if (c.op != ncclNumOps) return expectedReduce(c.op, c.type, n, i, 0);
  double acc = 0;
  for (int p = 0; p < n; ++p) acc += inputValue(ncclSum, c.type, p, i) * (p + 2);
  return acc;
}

// Elements of a case's send and receive buffers on rank r.
inline size_t sendCountOf(const Case& c, int n) {
  const bool many = c.kind == Kind::kReduceScatter || c.kind == Kind::kAllToAll || c.kind == Kind::kScatter;
  return many ? c.count * static_cast<size_t>(n) : c.count;
}
inline size_t recvCountOf(const Case& c, int n) {
  const bool many = c.kind == Kind::kAllGather || c.kind == Kind::kAllToAll || c.kind == Kind::kGather;
  return many ? c.count * static_cast<size_t>(n) : c.count;
}

// Elements of the larger of a case's buffers.
inline size_t bufferCount(const Case& c, int n) {
  return std::max(sendCountOf(c, n), recvCountOf(c, n));
}

// Runs one case on this rank through device buffers a and b (each large enough; a alone in place) on `stream`, a
// device scalar (c.deviceScalar) in the 8 device bytes at `scalar`; "" or what went wrong. The buffers are
// allocated once per rank: cuMemFree waits for everything queued on the device, including a kernel of a rank
// sharing the GPU that waits for this rank's next call.
inline std::string runCase(const Case& c, int r, int n, ncclComm_t comm, cudaStream_t stream, char* a, char* b,
                           char* scalar = nullptr) {
  const Driver& drv = Driver::get();
  const size_t es = typeSize(c.type);
  const size_t sendCount = sendCountOf(c, n);
  const size_t recvCount = recvCountOf(c, n);
  const ncclRedOp_t inputOp = c.op == ncclNumOps ? ncclSum : c.op;
  std::vector<unsigned char> in(sendCount * es), out(recvCount * es, 0xA5);
  for (size_t i = 0; i < sendCount; ++i) storeValue(c.type, in.data(), i, inputValue(inputOp, c.type, r, i));
  if (c.inPlace) b = a;
  char* send = a;
  char* recv = b;
  if (c.inPlace && c.kind == Kind::kReduceScatter) recv = a + static_cast<size_t>(r) * c.count * es;
  if (c.inPlace && c.kind == Kind::kAllGather) send = a + static_cast<size_t>(r) * c.count * es;
  drv.copy(recv, out.data(), recvCount * es, stream);
  drv.copy(send, in.data(), sendCount * es, stream);
  ncclRedOp_t op = c.op;
  std::vector<unsigned char> s(8);  // lives until the stream synchronises: the copy to the device reads it then
  if (c.op == ncclNumOps) {
    storeValue(c.type, s.data(), 0, static_cast<float>(r + 2));
    const void* where = s.data();
    if (c.deviceScalar) {
      if (scalar == nullptr) return "a device scalar case without the 8 device bytes for it";
      drv.copy(scalar, s.data(), 8, stream);  // ordered before the collective on the same stream
      where = scalar;
    }
    if (ncclRedOpCreatePreMulSum(&op, const_cast<void*>(where), c.type,
                                 c.deviceScalar ? ncclScalarDevice : ncclScalarHostImmediate, comm) != ncclSuccess) {
      return "ncclRedOpCreatePreMulSum: " + std::string(ncclGetLastError(comm));
    }
  }
  ncclResult_t st = ncclSuccess;
  switch (c.kind) {
    case Kind::kAllReduce:
      st = ncclAllReduce(send, recv, c.count, c.type, op, comm, stream);
      break;
    case Kind::kReduceScatter:
      st = ncclReduceScatter(send, recv, c.count, c.type, op, comm, stream);
      break;
    case Kind::kAllGather:
      st = ncclAllGather(send, recv, c.count, c.type, comm, stream);
      break;
    case Kind::kBroadcast:
      st = ncclBroadcast(send, recv, c.count, c.type, rootOf(n), comm, stream);
      break;
    case Kind::kReduce:
      st = ncclReduce(send, recv, c.count, c.type, op, rootOf(n), comm, stream);
      break;
    case Kind::kAllToAll:
      st = ncclAlltoAll(send, recv, c.count, c.type, comm, stream);
      break;
    case Kind::kGather:
      st = ncclGather(send, recv, c.count, c.type, rootOf(n), comm, stream);
      break;
    case Kind::kScatter:
      st = ncclScatter(send, recv, c.count, c.type, rootOf(n), comm, stream);
      break;
    case Kind::kSendRecv:
      st = ncclGroupStart();
      if (st == ncclSuccess) st = ncclSend(send, c.count, c.type, (r + 1) % n, comm, stream);
      if (st == ncclSuccess) st = ncclRecv(recv, c.count, c.type, (r + n - 1) % n, comm, stream);
      if (ncclResult_t end = ncclGroupEnd(); st == ncclSuccess) st = end;
      break;
  }
  std::string err;
  if (st != ncclSuccess) err = fmt("returned %d: %s", st, ncclGetLastError(comm));
  drv.copy(out.data(), recv, recvCount * es, stream);
  if (drv.streamSync(stream) != 0 && err.empty()) err = "the stream failed";
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess && err.empty()) err = fmt("async error %d: %s", async, ncclGetLastError(comm));
  if (c.op == ncclNumOps) ncclRedOpDestroy(op, comm);
  if (!err.empty()) return err;
  size_t wrong = 0, first = recvCount;
  // A reduce's and a gather's results are the root's alone (the other ranks' receive buffers are NCCL's to leave
  // alone).
  const bool rootOnly = c.kind == Kind::kReduce || c.kind == Kind::kGather;
  const size_t checked = rootOnly && r != rootOf(n) ? 0 : recvCount;
  for (size_t i = 0; i < checked; ++i) {
    double want = 0;
    if (c.kind == Kind::kAllGather || c.kind == Kind::kGather) {
      want = inputValue(inputOp, c.type, static_cast<int>(i / c.count), i % c.count);
    } else if (c.kind == Kind::kBroadcast) {
      want = inputValue(inputOp, c.type, rootOf(n), i);
    } else if (c.kind == Kind::kAllToAll) {
      // Block p came from rank p, which sent its block r there.
      want = inputValue(inputOp, c.type, static_cast<int>(i / c.count), static_cast<size_t>(r) * c.count + i % c.count);
    } else if (c.kind == Kind::kScatter) {
      want = inputValue(inputOp, c.type, rootOf(n), static_cast<size_t>(r) * c.count + i);
    } else if (c.kind == Kind::kSendRecv) {
      want = inputValue(inputOp, c.type, (r + n - 1) % n, i);
    } else {
      want = expected(c, n, c.kind == Kind::kReduceScatter ? static_cast<size_t>(r) * c.count + i : i);
    }
    if (!sameBits(c.type, out.data(), i, want)) {
      if (wrong++ == 0) first = i;
    }
  }
  if (wrong == 0) return "";
  return fmt("%zu of %zu elements wrong, the first at %zu", wrong, recvCount, first);
}

// Where runAll's buffers come from: cuMemAlloc (cudaMalloc), or ncclMemAlloc registered with ncclCommRegister
// (on the ranks `registers` says, all when it is null), or the program's own cuMemCreate memory (with access for
// every device), each buffer over two mappings, registered the same way.
enum class Buffers { kDevice, kRegistered, kProgramCuMem };

// Runs every case on n ranks (one communicator each, the cases in order); device deviceOf(r).
inline void runAll(int n, const std::vector<Case>& cases, const std::function<int(int)>& deviceOf = nullptr,
                   Buffers buffers = Buffers::kDevice, const std::function<bool(int)>& registers = nullptr) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<ncclResult_t> res = runCudaRanks(
      n,
      [&](int r, ncclComm_t comm, cudaStream_t stream) {
        size_t bytes = 1;
        for (const Case& c : cases) bytes = std::max(bytes, bufferCount(c, n) * typeSize(c.type));
        const Driver& drv = Driver::get();
        const bool reg = buffers != Buffers::kDevice && (!registers || registers(r));
        const bool own = buffers == Buffers::kProgramCuMem;
        std::vector<int> every;
        for (int d = 0; d < drv.devices; ++d) every.push_back(d);
        char* buf[2] = {nullptr, nullptr};
        void* handle[2] = {nullptr, nullptr};
        size_t mapped[2] = {0, 0};
        void* origin[2] = {nullptr, nullptr};
        for (int i = 0; i < 2; ++i) {
          if (!reg) {
            buf[i] = static_cast<char*>(drv.alloc(bytes));
            continue;
          }
          void* p = nullptr;
          if (own) {
            // Over two mappings: the buffer ends 4 KB into the second.
            const size_t each = (bytes + 4095) / 4096 * 4096;
            origin[i] = drv.cuMemMake(each, deviceOf ? deviceOf(r) : r, every, false, &mapped[i], 2);
            p = origin[i] != nullptr ? static_cast<char*>(origin[i]) + mapped[i] / 2 + 4096 - each : nullptr;
          } else if (ncclMemAlloc(&p, bytes) != ncclSuccess) {
            p = nullptr;
          }
          if (p == nullptr || ncclCommRegister(comm, p, bytes, &handle[i]) != ncclSuccess) {
            errors[static_cast<size_t>(r)] = fmt("allocation or ncclCommRegister: %s", ncclGetLastError(comm));
            return ncclInternalError;
          }
          buf[i] = static_cast<char*>(p);
        }
        char* scalar = static_cast<char*>(drv.alloc(8));
        ncclResult_t result = ncclSuccess;
        for (const Case& c : cases) {
          const std::string e = runCase(c, r, n, comm, stream, buf[0], buf[1], scalar);
          if (!e.empty()) {
            errors[static_cast<size_t>(r)] = describe(c) + ": " + e;
            result = ncclInternalError;
            break;
          }
        }
        drv.memFree(reinterpret_cast<unsigned long long>(scalar));
        for (int i = 0; i < 2; ++i) {
          if (!reg) {
            drv.memFree(reinterpret_cast<unsigned long long>(buf[i]));
            continue;
          }
          if (ncclCommDeregister(comm, handle[i]) != ncclSuccess) result = ncclInternalError;
          if (own) {
            drv.cuMemDrop(origin[i], mapped[i], 2);
          } else if (ncclMemFree(buf[i]) != ncclSuccess) {
            result = ncclInternalError;
          }
        }
        return result;
      },
      nullptr, deviceOf);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess)
        << "rank " << r << " of " << n << ": " << errors[static_cast<size_t>(r)];
  }
}

}  // namespace braid_test
