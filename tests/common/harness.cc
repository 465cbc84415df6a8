#include "tests/common/harness.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "src/common/dtype.h"

namespace braid_test {

std::vector<ncclResult_t> runThreads(int n, const std::function<ncclResult_t(int, ncclComm_t)>& fn) {
  ncclUniqueId id;
  std::vector<ncclResult_t> results(static_cast<size_t>(n), ncclInternalError);
  if (ncclGetUniqueId(&id) != ncclSuccess) return results;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ncclResult_t res = ncclCommInitRank(&comm, n, id, r);
      if (res == ncclSuccess) res = fn(r, comm);
      if (comm != nullptr) {
        ncclResult_t d = ncclCommDestroy(comm);
        if (res == ncclSuccess) res = d;
      }
      results[static_cast<size_t>(r)] = res;
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<std::string> runThreadsChecked(int n, const std::function<std::string(int, ncclComm_t)>& fn,
                                           const std::vector<ncclConfig_t>& configs, bool destroy) {
  std::vector<std::string> out(static_cast<size_t>(n));
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    out.assign(static_cast<size_t>(n), std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr));
    return out;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ncclConfig_t cfg = configs.empty() ? ncclConfig_t(NCCL_CONFIG_INITIALIZER) : configs[static_cast<size_t>(r)];
      const ncclResult_t init =
          configs.empty() ? ncclCommInitRank(&comm, n, id, r) : ncclCommInitRankConfig(&comm, n, id, r, &cfg);
      if (init != ncclSuccess) {
        out[static_cast<size_t>(r)] = std::string("init: ") + ncclGetLastError(nullptr);
        return;
      }
      out[static_cast<size_t>(r)] = fn(r, comm);
      if (destroy) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<int> runProcesses(int n, const std::function<int(int, ncclComm_t)>& fn, double timeoutSec,
                              std::vector<pid_t>* pidsOut,
                              const std::function<void(const std::vector<pid_t>&)>& whileRunning,
                              const std::function<void(int rank)>& beforeInit) {
  ncclUniqueId id;
  std::vector<int> status(static_cast<size_t>(n), -1);
  if (ncclGetUniqueId(&id) != ncclSuccess) return status;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      if (beforeInit) beforeInit(r);
      ncclComm_t comm = nullptr;
      int rc = 1;
      if (ncclCommInitRank(&comm, n, id, r) == ncclSuccess) {
        rc = fn(r, comm);
        if (ncclCommDestroy(comm) != ncclSuccess && rc == 0) rc = 2;
      }
      fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  if (pidsOut != nullptr) *pidsOut = pids;
  if (whileRunning) whileRunning(pids);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1 || pids[i] <= 0) continue;
      int ws = 0;
      pid_t w = waitpid(pids[i], &ws, WNOHANG);
      if (w == pids[i]) {
        status[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (status[i] == -1) kill(pids[i], SIGKILL);
      }
      timeoutSec = 1e9;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

std::string readFileText(const std::string& path) {
  std::string text;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  fclose(f);
  return text;
}

size_t typeSize(ncclDataType_t t) {
  return braid::dtypeSize(static_cast<braid::DType>(t));
}
const char* typeName(ncclDataType_t t) {
  return braid::dtypeName(static_cast<braid::DType>(t));
}

const char* opName(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op < 5 ? names[op] : "premulsum";
}

static bool isSigned(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || t >= ncclFloat16;
}
static bool isFloat(ncclDataType_t t) {
  return t >= ncclFloat16;
}

double inputValue(ncclRedOp_t op, ncclDataType_t t, int rank, size_t i) {
  const size_t r = static_cast<size_t>(rank);
  switch (op) {
    case ncclProd:
      return ((i * 3 + r) % 5 == 0) ? 2.0 : 1.0;  // products stay tiny powers of two
    case ncclMax:
    case ncclMin: {
      // e5m2 is exact for integers up to 8 only.
      double range = t == ncclFloat8e5m2 ? 8 : 16;
      double v = static_cast<double>((i * 7 + r * 13) % static_cast<size_t>(range));
      return isSigned(t) ? v - range / 2 : v;
    }
    default:  // sum, avg, premulsum: partial sums of up to 8 ranks stay within [-8, 8]
      if (isSigned(t)) return static_cast<double>((i + 2 * r) % 3) - 1.0;
      return static_cast<double>((i + r) % 2);
  }
}

static double roundToType(ncclDataType_t t, double v) {
  switch (t) {
    case ncclFloat16:
      return braid::halfToFloat(braid::floatToHalf(static_cast<float>(v)));
    case ncclBfloat16:
      return braid::bf16ToFloat(braid::floatToBf16(static_cast<float>(v)));
    case ncclFloat8e4m3:
      return braid::fp8e4m3ToFloat(braid::floatToFp8e4m3(static_cast<float>(v)));
    case ncclFloat8e5m2:
      return braid::fp8e5m2ToFloat(braid::floatToFp8e5m2(static_cast<float>(v)));
    case ncclFloat32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

double expectedReduce(ncclRedOp_t op, ncclDataType_t t, int nranks, size_t i, double premulScalar) {
  double acc = inputValue(op, t, 0, i);
  if (op >= ncclNumOps) acc *= premulScalar;
  for (int r = 1; r < nranks; ++r) {
    double v = inputValue(op, t, r, i);
    switch (op) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = std::max(acc, v);
        break;
      case ncclMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += op >= ncclNumOps ? v * premulScalar : v;
        break;
    }
  }
  if (op == ncclAvg) {
    if (isFloat(t)) {
      // The library divides the (exact) sum once, in float for narrow types and in the type itself otherwise.
      if (t == ncclFloat64) return acc / nranks;
      return roundToType(t, static_cast<float>(acc) / static_cast<float>(nranks));
    }
    return std::trunc(acc / nranks);
  }
  return acc;
}

void storeValue(ncclDataType_t t, void* dst, size_t i, double v) {
  char* p = static_cast<char*>(dst);
  switch (t) {
    case ncclInt8: {
      int8_t x = static_cast<int8_t>(v);
      memcpy(p + i, &x, 1);
      break;
    }
    case ncclUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      memcpy(p + i, &x, 1);
      break;
    }
    case ncclInt32: {
      int32_t x = static_cast<int32_t>(v);
      memcpy(p + 4 * i, &x, 4);
      break;
    }
    case ncclUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      memcpy(p + 4 * i, &x, 4);
      break;
    }
    case ncclInt64: {
      int64_t x = static_cast<int64_t>(v);
      memcpy(p + 8 * i, &x, 8);
      break;
    }
    case ncclUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      memcpy(p + 8 * i, &x, 8);
      break;
    }
    case ncclFloat16: {
      uint16_t x = braid::floatToHalf(static_cast<float>(v));
      memcpy(p + 2 * i, &x, 2);
      break;
    }
    case ncclBfloat16: {
      uint16_t x = braid::floatToBf16(static_cast<float>(v));
      memcpy(p + 2 * i, &x, 2);
      break;
    }
    case ncclFloat32: {
      float x = static_cast<float>(v);
      memcpy(p + 4 * i, &x, 4);
      break;
    }
    case ncclFloat64:
      memcpy(p + 8 * i, &v, 8);
      break;
    case ncclFloat8e4m3: {
      uint8_t x = braid::floatToFp8e4m3(static_cast<float>(v));
      memcpy(p + i, &x, 1);
      break;
    }
    case ncclFloat8e5m2: {
      uint8_t x = braid::floatToFp8e5m2(static_cast<float>(v));
      memcpy(p + i, &x, 1);
      break;
    }
    default:
      break;
  }
}

bool sameBits(ncclDataType_t t, const void* buf, size_t i, double v) {
  char tmp[8];
  storeValue(t, tmp, 0, v);
  size_t es = typeSize(t);
  return memcmp(static_cast<const char*>(buf) + i * es, tmp, es) == 0;
}

size_t countWrong(ncclDataType_t t, const void* buf, size_t n, const std::function<double(size_t)>& expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += !sameBits(t, buf, i, expected(i));
  return wrong;
}

std::vector<int> unrestrictedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (static_cast<long>(cpus.size()) != sysconf(_SC_NPROCESSORS_ONLN)) return {};
  return cpus;
}

}  // namespace braid_test
