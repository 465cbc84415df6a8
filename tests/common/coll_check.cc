#include "tests/common/coll_check.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/common/harness.h"

namespace braid_test {

const char* collName(Coll c) {
  static const char* names[] = {"AllReduce",     "Broadcast", "Bcast",  "Reduce",  "AllGather",
                                "ReduceScatter", "AlltoAll",  "Gather", "Scatter", "SendRecv"};
  return names[static_cast<int>(c)];
}

bool collHasOp(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

namespace {

// Value that rank r contributes at element i of its send buffer for data-movement collectives.
double moveValue(ncclDataType_t t, int r, size_t i) {
  double range = t == ncclFloat8e5m2 ? 8 : 16;
  return static_cast<double>((i * 5 + static_cast<size_t>(r) * 3) % static_cast<size_t>(range));
}

}  // namespace

// Heap memory, or ncclMemAlloc memory (which other processes of the communicator can map).
class TestBuffer {
 public:
  TestBuffer(size_t bytes, bool memAlloc) : memAlloc_(memAlloc) {
    if (memAlloc_) {
      void* p = nullptr;
      if (ncclMemAlloc(&p, bytes) == ncclSuccess) data_ = static_cast<char*>(p);
    } else {
      heap_.resize(bytes);
      data_ = heap_.data();
    }
  }
  ~TestBuffer() {
    if (memAlloc_ && data_ != nullptr) ncclMemFree(data_);
  }
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;
  char* data() { return data_; }

 private:
  bool memAlloc_;
  std::vector<char> heap_;
  char* data_ = nullptr;
};

std::string runCase(const CollCase& c, int rank, int n, ncclComm_t comm) {
  const size_t es = typeSize(c.type);
  const size_t cnt = c.count;
  const size_t nn = static_cast<size_t>(n);
  size_t sendElems = cnt, recvElems = cnt;
  switch (c.coll) {
    case Coll::kAllGather:
      recvElems = cnt * nn;
      break;
    case Coll::kReduceScatter:
      sendElems = cnt * nn;
      break;
    case Coll::kAlltoAll:
      sendElems = recvElems = cnt * nn;
      break;
    case Coll::kGather:
      recvElems = cnt * nn;
      break;
    case Coll::kScatter:
      sendElems = cnt * nn;
      break;
    default:
      break;
  }
  // One allocation holds both buffers so the in-place layouts can be expressed; +1 element guards.
  TestBuffer recvStore((recvElems + 1) * es + 64, c.memAlloc), sendStore((sendElems + 1) * es + 64, c.memAlloc);
  if (recvStore.data() == nullptr || sendStore.data() == nullptr) return "cannot allocate the test buffers";
  char* recv = recvStore.data() + 64;
  char* send = sendStore.data() + 64;
  ncclRedOp_t op = c.op;
  double scalar = 1;
  if (collHasOp(c.coll) && c.op == ncclNumOps) {
    scalar = 2;
    char s[8];
    storeValue(c.type, s, 0, scalar);
    if (ncclRedOpCreatePreMulSum(&op, s, c.type, ncclScalarHostImmediate, comm) != ncclSuccess) {
      return "ncclRedOpCreatePreMulSum failed";
    }
  }
  const ncclRedOp_t inputOp = collHasOp(c.coll) ? c.op : ncclSum;
  for (size_t i = 0; i < sendElems; ++i) {
    double v = collHasOp(c.coll) ? inputValue(inputOp, c.type, rank, c.coll == Coll::kReduceScatter ? i : i)
                                 : moveValue(c.type, rank, i);
    storeValue(c.type, send, i, v);
  }
  memset(recv, 0xEE, recvElems * es);
  // In place: the send data is placed where NCCL's rule says and the send pointer aliases the receive buffer.
  const void* sendPtr = send;
  if (c.inPlace) {
    switch (c.coll) {
      case Coll::kAllReduce:
      case Coll::kBroadcast:
      case Coll::kBcast:
      case Coll::kReduce:
        memcpy(recv, send, cnt * es);
        sendPtr = recv;
        break;
      case Coll::kAllGather:
        memcpy(recv + static_cast<size_t>(rank) * cnt * es, send, cnt * es);
        sendPtr = recv + static_cast<size_t>(rank) * cnt * es;
        break;
      case Coll::kGather:
        if (rank == c.root) {
          memcpy(recv + static_cast<size_t>(rank) * cnt * es, send, cnt * es);
          sendPtr = recv + static_cast<size_t>(rank) * cnt * es;
        }
        break;
      case Coll::kAlltoAll:  // one buffer: each block is sent from and received into the same place
        memcpy(recv, send, static_cast<size_t>(n) * cnt * es);
        sendPtr = recv;
        break;
      default:
        break;
    }
  }
  void* recvPtr = recv;
  if (c.inPlace && c.coll == Coll::kReduceScatter) recvPtr = send + static_cast<size_t>(rank) * cnt * es;
  if (c.inPlace && c.coll == Coll::kScatter && rank == c.root) recvPtr = send + static_cast<size_t>(rank) * cnt * es;

  ncclResult_t res = ncclSuccess;
  switch (c.coll) {
    case Coll::kAllReduce:
      res = ncclAllReduce(sendPtr, recvPtr, cnt, c.type, op, comm, nullptr);
      break;
    case Coll::kBroadcast:
      res = ncclBroadcast(sendPtr, recvPtr, cnt, c.type, c.root, comm, nullptr);
      break;
    case Coll::kBcast:
      if (rank == c.root) memcpy(recv, send, cnt * es);
      res = ncclBcast(recvPtr, cnt, c.type, c.root, comm, nullptr);
      break;
    case Coll::kReduce:
      res = ncclReduce(sendPtr, recvPtr, cnt, c.type, op, c.root, comm, nullptr);
      break;
    case Coll::kAllGather:
      res = ncclAllGather(sendPtr, recvPtr, cnt, c.type, comm, nullptr);
      break;
    case Coll::kReduceScatter:
      res = ncclReduceScatter(sendPtr, recvPtr, cnt, c.type, op, comm, nullptr);
      break;
    case Coll::kAlltoAll:
      res = ncclAlltoAll(sendPtr, recvPtr, cnt, c.type, comm, nullptr);
      break;
    case Coll::kGather:
      res = ncclGather(sendPtr, recvPtr, cnt, c.type, c.root, comm, nullptr);
      break;
    case Coll::kScatter:
      res = ncclScatter(sendPtr, recvPtr, cnt, c.type, c.root, comm, nullptr);
      break;
    case Coll::kSendRecv: {
      // A ring shift: send to rank+1, receive from rank-1, grouped so neither blocks the other.
      ncclGroupStart();
      ncclResult_t a = ncclSend(sendPtr, cnt, c.type, (rank + 1) % n, comm, nullptr);
      ncclResult_t b = ncclRecv(recvPtr, cnt, c.type, (rank + n - 1) % n, comm, nullptr);
      res = ncclGroupEnd();
      if (a != ncclSuccess) res = a;
      if (b != ncclSuccess) res = b;
      break;
    }
  }
  if (op >= ncclNumOps) ncclRedOpDestroy(op, comm);
  if (res != ncclSuccess) return std::string("call failed: ") + ncclGetErrorString(res) + ": " + ncclGetLastError(comm);

  const char* out = static_cast<const char*>(recvPtr);
  size_t wrong = 0;
  size_t checked = recvElems;
  auto expectMove = [&](int r, size_t i) { return moveValue(c.type, r, i); };
  switch (c.coll) {
    case Coll::kAllReduce:
      wrong = countWrong(c.type, out, cnt, [&](size_t i) { return expectedReduce(c.op, c.type, n, i, scalar); });
      break;
    case Coll::kReduce:
      if (rank != c.root) return "";
      wrong = countWrong(c.type, out, cnt, [&](size_t i) { return expectedReduce(c.op, c.type, n, i, scalar); });
      break;
    case Coll::kReduceScatter:
      wrong = countWrong(c.type, out, cnt, [&](size_t i) {
        return expectedReduce(c.op, c.type, n, static_cast<size_t>(rank) * cnt + i, scalar);
      });
      break;
    case Coll::kBroadcast:
    case Coll::kBcast:
      wrong = countWrong(c.type, out, cnt, [&](size_t i) { return expectMove(c.root, i); });
      break;
    case Coll::kAllGather:
      wrong =
          countWrong(c.type, out, cnt * nn, [&](size_t i) { return expectMove(static_cast<int>(i / cnt), i % cnt); });
      break;
    case Coll::kAlltoAll:
      // Block j of my output came from rank j's send block `rank`.
      wrong = countWrong(c.type, out, cnt * nn, [&](size_t i) {
        return expectMove(static_cast<int>(i / cnt), static_cast<size_t>(rank) * cnt + i % cnt);
      });
      break;
    case Coll::kGather:
      if (rank != c.root) return "";
      wrong =
          countWrong(c.type, out, cnt * nn, [&](size_t i) { return expectMove(static_cast<int>(i / cnt), i % cnt); });
      break;
    case Coll::kScatter:
      wrong = countWrong(c.type, out, cnt,
                         [&](size_t i) { return expectMove(c.root, static_cast<size_t>(rank) * cnt + i); });
      break;
    case Coll::kSendRecv:
      wrong = countWrong(c.type, out, cnt, [&](size_t i) { return expectMove((rank + n - 1) % n, i); });
      break;
  }
  (void)checked;
  if (wrong != 0) {
    return std::string(collName(c.coll)) + " " + typeName(c.type) + " " + opName(c.op) + " count " +
           std::to_string(cnt) + (c.inPlace ? " in-place" : "") + " root " + std::to_string(c.root) + ": rank " +
           std::to_string(rank) + " has " + std::to_string(wrong) + " wrong elements";
  }
  return "";
}

}  // namespace braid_test
