#include "tools/trainer/comm.h"

#include <chrono>
#include <cstdlib>
#include <string>

namespace braid::trainer {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool detectLaunch(LaunchEnv* env, std::string* error) {
  // The library reads the launcher's variables (braidGetLaunchEnv), so braid-train and the perf tools agree on
  // ranks, on the default port (29500) and on torchrun's rule (its own store holds MASTER_PORT; braid takes the
  // next port).
  braidLaunchEnv_t found;
  if (braidGetLaunchEnv(&found) != ncclSuccess) {
    *error = ncclGetLastError(nullptr);
    return false;
  }
  env->rank = found.rank;
  env->worldSize = found.nranks;
  env->source = found.source;
  env->commId = found.commId;
  if (env->worldSize > 1 && env->commId.empty()) {
    *error = found.rendezvousError;
    return false;
  }
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
