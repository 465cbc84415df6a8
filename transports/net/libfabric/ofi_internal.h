// Internals of the OFI network shared by ofi_net.cc (the ABI functions) and ofi_endpoint.cc (endpoints,
// completion handling, control messages). The design is described at the top of ofi_net.cc.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "include/nccl_net.h"
#include "src/common/status.h"
#include "src/common/wait.h"
#include "transports/net/libfabric/ofi_lib.h"

namespace braid {
namespace net {
namespace ofi {

inline constexpr uint64_t kCtrlBit = 1ull << 63;
inline constexpr uint64_t kCommIdMask = 0x7fffffffull;
inline constexpr uint32_t kConnectKind = 1;
inline constexpr uint32_t kCloseKind = 2;
inline constexpr uint64_t kHandleMagic = 0x62726169642d4f46ULL;
inline constexpr int kMaxGroup = 8;
inline constexpr int kCtrlRecvs = 8;  // control receives kept posted on a listening endpoint
inline constexpr size_t kMaxName = 96;

inline uint64_t dataTag(uint32_t commId, int tag) {
  return (uint64_t{commId} << 32) | static_cast<uint32_t>(tag);
}
inline uint64_t ctrlTag(uint32_t commId, uint32_t kind) {
  return kCtrlBit | (uint64_t{commId} << 32) | kind;
}

struct Device {
  fi_info* info = nullptr;  // owned (fi_dupinfo)
  std::string name;         // "<provider>/<domain>"
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
};

// The listen handle. connect() keeps a connection in progress in `pending` (the ABI lets it use the handle).
struct Handle {
  uint64_t magic;
  uint32_t dev;
  uint32_t nameLen;
  char name[kMaxName];
  uint64_t reserved;
  void* pending;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "OFI handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct CtrlMsg {
  uint64_t magic;
  uint32_t commId;
  uint32_t kind;
  uint64_t sendsCompleted;  // CLOSE: sends the peer saw complete
  uint32_t nameLen;         // CONNECT: the sender's endpoint address
  char name[kMaxName];
};

struct MemHandle {
  fid_mr* mr = nullptr;
  void* desc = nullptr;
};

struct Comm;
struct Request;

enum class OpKind { kData, kCtrlRecv, kCtrlSend };

// Context of one posted libfabric operation. fi_context2 must come first (FI_CONTEXT2 mode).
struct Op {
  fi_context2 ctx;
  OpKind kind = OpKind::kData;
  Request* req = nullptr;
  int slot = 0;
  bool posted = false;
  bool done = false;
  int ctrlIndex = 0;  // kCtrlRecv: which buffer of the endpoint
};

struct Request {
  Comm* comm = nullptr;
  bool used = false;
  bool abandoned = false;
  int n = 0;
  char* data[kMaxGroup] = {};
  size_t cap[kMaxGroup] = {};
  int tags[kMaxGroup] = {};
  void* desc[kMaxGroup] = {};
  size_t got[kMaxGroup] = {};
  Op ops[kMaxGroup];
  Status error;
  int outstanding() const {
    int k = 0;
    for (int i = 0; i < n; ++i) k += ops[i].posted && !ops[i].done ? 1 : 0;
    return k;
  }
};

// One libfabric endpoint with its completion queue and address vector. A send comm owns one; a listener's is
// shared by the receive comms accepted from it. `mu` guards the endpoint and every comm and request on it.
struct Endpoint {
  Device* dev = nullptr;
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  std::mutex mu;
  std::string name;  // printable address
  std::vector<char> rawName;
  // Listening endpoints only.
  CtrlMsg ctrlBufs[kCtrlRecvs];
  MemHandle ctrlMr;
  Op ctrlOps[kCtrlRecvs];
  std::deque<CtrlMsg> connects;         // CONNECTs not yet accepted
  std::map<uint32_t, Comm*> recvComms;  // by comm id
  std::map<uint32_t, CtrlMsg> earlyCloses;
  std::vector<std::unique_ptr<Comm>> graveyard;  // closed receive comms with operations still posted
  ~Endpoint();
};

struct Comm {
  bool isSend = false;
  uint32_t commId = 0;
  std::shared_ptr<Endpoint> ep;
  fi_addr_t peerAddr = FI_ADDR_UNSPEC;  // send comms: the listener
  std::string peer;
  Request reqs[NCCL_NET_MAX_REQUESTS];
  uint64_t completed = 0;  // messages completed on this comm
  bool peerClosed = false;
  uint64_t peerSends = 0;  // receive comms: the sender's completed sends at CLOSE
  CtrlMsg ctrlOut[2]{};    // send comms: [0] CONNECT, [1] CLOSE payloads (one registration)
  Op ctrlOp[2];
  MemHandle ctrlMr;
  WaitContext connectWait;  // send comms: deadline of the CONNECT
};

// Devices found by init (live until exit), guarded by gMu.
extern std::mutex gMu;
extern std::vector<Device> gDevices;
extern std::atomic<uint64_t> gNextKey;
// Send comms closed with sends in flight (see ofiCloseSend); never freed.
extern std::vector<Comm*> gOrphans;
// Send comms whose CONNECT is not posted yet; a handle's `pending` is trusted only when it is one of these.
extern std::mutex gPendingMu;
extern std::set<void*> gPending;

Status ofiError(int rc, const char* what);
// Registers buf when the provider needs local registration (FI_MR_LOCAL); otherwise an empty handle.
Result<MemHandle> registerMem(Device* dev, void* buf, size_t len);
// Opens an endpoint (with its CQ and AV) on device devIndex, opening the device's fabric and domain first.
Result<std::shared_ptr<Endpoint>> openEndpoint(int devIndex);
// Printable form of a raw endpoint address.
std::string straddr(Endpoint& e, const char* raw);
// (Re)posts control receive i of a listening endpoint; e.mu held.
Status postCtrlRecv(Endpoint& e, int i);
// Reads the completion queue, completing operations and handling control messages; e.mu held.
Status progress(Endpoint& e);
// Posts the request's operations not posted yet (FI_EAGAIN leaves them for the next test); e.mu held.
Status postPending(Endpoint& e, Request& r);
// Polls for at most timeoutMs until no operation of c (only its control message with ctrlOnly) is outstanding,
// cancelling its posted receives first; e.mu held.
void drain(Comm& c, int timeoutMs, bool ctrlOnly);

}  // namespace ofi
}  // namespace net
}  // namespace braid
