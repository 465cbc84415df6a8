// braid-train's view of the communicator: launch detection through the library's braidGetLaunchEnv (braidrun,
// torchrun, Open MPI, PMI and Slurm variables; MASTER_ADDR/MASTER_PORT), init through the public API only,
// and a queue that runs every collective in one order: inline, or on a background thread when overlap_comm is on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "nccl.h"

namespace braid::trainer {

struct LaunchEnv {
  int rank = 0;
  int worldSize = 1;
  std::string source;  // which variables gave rank and size ("" = single process)
  std::string commId;  // ip:port every rank derives the unique id from (NCCL_COMM_ID)
};

// Reads the launcher's variables. Returns false with *error naming the variable and value when they are malformed.
bool detectLaunch(LaunchEnv* env, std::string* error);

// Creates the communicator: every rank calls ncclGetUniqueId with NCCL_COMM_ID set (rank 0 listens there).
bool initComm(const LaunchEnv& env, ncclComm_t* comm, std::string* error);

// Runs collectives in submission order. With a worker (overlap_comm), submit() returns at once and the caller
// overlaps compute until wait(); without one, submit() runs the task before returning. Every rank must submit the
// same collectives in the same order, as with any NCCL communicator.
class CommQueue {
 public:
  using Ticket = uint64_t;

  CommQueue(ncclComm_t comm, bool background);
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  ncclComm_t comm() const { return comm_; }

  Ticket submit(std::function<ncclResult_t()> task, const char* what);
  void wait(Ticket t);
  void drain() { wait(submitted_); }
  // submit + wait.
  void run(std::function<ncclResult_t()> task, const char* what) { wait(submit(std::move(task), what)); }

  // First failure ("ncclAllReduce: <error string>: <last error>"), empty if none. After a failure tasks are skipped.
  std::string error();
  // Seconds spent inside collectives, and seconds the caller spent blocked in wait() (the exposed part), since the
  // last call; resets both.
  void takeTimes(double* commSeconds, double* waitSeconds);

 private:
  void execute(std::function<ncclResult_t()>& task, const char* what);
  void worker();

  ncclComm_t comm_;
  bool background_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<ncclResult_t()>, const char*>> tasks_;
  Ticket submitted_ = 0;
  Ticket done_ = 0;
  bool stop_ = false;
  std::string error_;
  double commSeconds_ = 0.0;
  double waitSeconds_ = 0.0;
  std::thread thread_;
};

}  // namespace braid::trainer
