#include "tools/trainer/comm.h"

#include <chrono>
#include <cstdlib>

namespace braid::trainer {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool parseCount(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool detectLaunch(LaunchEnv* env, std::string* error) {
  struct Pair {
    const char* rank;
    const char* size;
  };
  const Pair pairs[] = {{"RANK", "WORLD_SIZE"},
                        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                        {"PMI_RANK", "PMI_SIZE"},
                        {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const Pair& p : pairs) {
    const std::string rank = envOr(p.rank, ""), size = envOr(p.size, "");
    if (rank.empty() && size.empty()) continue;
    int r = 0, n = 0;
    if (!parseCount(size, &n) || n < 1) {
      *error = std::string(p.size) + "='" + size + "' is not a positive integer";
      return false;
    }
    if (!parseCount(rank, &r) || r >= n) {
      *error = std::string(p.rank) + "='" + rank + "' is not a rank below " + p.size + "=" + size;
      return false;
    }
    env->rank = r;
    env->worldSize = n;
    env->source = std::string(p.rank) + "/" + p.size;
    break;
  }
  // Rendezvous: NCCL_COMM_ID if the user set it, else MASTER_ADDR:MASTER_PORT (torchrun, braidrun), else a local
  // default good for mpirun on one host.
  std::string id = envOr("NCCL_COMM_ID", "");
  if (id.empty()) {
    std::string addr = envOr("MASTER_ADDR", "127.0.0.1");
    if (addr.find(':') != std::string::npos && addr.front() != '[') addr = "[" + addr + "]";
    id = addr + ":" + envOr("MASTER_PORT", "29517");
  }
  env->commId = id;
  return true;
}

bool initComm(const LaunchEnv& env, ncclComm_t* comm, std::string* error) {
  ncclUniqueId id;
  if (env.worldSize > 1) setenv("NCCL_COMM_ID", env.commId.c_str(), 1);
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    *error = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
    return false;
  }
  if (ncclResult_t r = ncclCommInitRank(comm, env.worldSize, id, env.rank); r != ncclSuccess) {
    *error = std::string("ncclCommInitRank (rank ") + std::to_string(env.rank) + " of " +
             std::to_string(env.worldSize) + ", NCCL_COMM_ID=" + env.commId + "): " + ncclGetErrorString(r) + ": " +
             ncclGetLastError(nullptr);
    return false;
  }
  return true;
}

CommQueue::CommQueue(ncclComm_t comm, bool background) : comm_(comm), background_(background) {
  if (background_) thread_ = std::thread([this] { worker(); });
}

CommQueue::~CommQueue() {
  if (background_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

void CommQueue::execute(std::function<ncclResult_t()>& task, const char* what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) return;
  }
  const double t0 = now();
  const ncclResult_t r = task();
  const double t1 = now();
  std::lock_guard<std::mutex> lock(mu_);
  commSeconds_ += t1 - t0;
  if (r != ncclSuccess && error_.empty()) {
    error_ = std::string(what) + ": " + ncclGetErrorString(r) + ": " + ncclGetLastError(comm_);
  }
}

CommQueue::Ticket CommQueue::submit(std::function<ncclResult_t()> task, const char* what) {
  if (!background_) {
    execute(task, what);
    ++done_;
    return ++submitted_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.emplace_back(std::move(task), what);
  cv_.notify_all();
  return ++submitted_;
}

void CommQueue::wait(Ticket t) {
  if (!background_) return;
  const double t0 = now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= t; });
  waitSeconds_ += now() - t0;
}

void CommQueue::worker() {
  for (;;) {
    std::pair<std::function<ncclResult_t()>, const char*> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      job = std::move(tasks_.front());
      tasks_.pop_front();
    }
    execute(job.first, job.second);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
    }
    cv_.notify_all();
  }
}

std::string CommQueue::error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void CommQueue::takeTimes(double* commSeconds, double* waitSeconds) {
  std::lock_guard<std::mutex> lock(mu_);
  *commSeconds = commSeconds_;
  *waitSeconds = background_ ? waitSeconds_ : commSeconds_;
  commSeconds_ = waitSeconds_ = 0.0;
}

}  // namespace braid::trainer
