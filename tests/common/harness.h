// Test harness: ranks as threads of this process, ranks as forked processes, and exactly checkable data.
//
// Inputs are small integers chosen per (collective, op, rank, element) so that every datatype, fp8 included,
// represents every partial result exactly: results are compared bitwise whatever the reduction order.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid_test {

// Runs fn(rank, comm) on n threads, each with its own communicator from one unique id; returns the per-rank
// results (ncclSuccess or the first failure) after destroying the communicators.
std::vector<ncclResult_t> runThreads(int n, const std::function<ncclResult_t(int rank, ncclComm_t comm)>& fn);

// Runs fn(rank, comm) on n threads, each with its own communicator from one unique id (rank r initialised with
// configs[r] when `configs` is given): "" or what went wrong, per rank ("init: " and the error when init failed).
// `destroy`: the communicators are destroyed after fn; else fn owns its communicator (destroys or aborts it).
std::vector<std::string> runThreadsChecked(int n, const std::function<std::string(int rank, ncclComm_t comm)>& fn,
                                           const std::vector<ncclConfig_t>& configs = {}, bool destroy = true);

// Forks n processes; each initialises rank r of one clique and runs fn (returns 0 on success). Returns the exit
// status of each (0 ok, 128+sig when killed). timeoutSec bounds the whole run (children are killed after it).
// beforeInit runs in each child before its ncclCommInitRank (per-rank environment, say).
std::vector<int> runProcesses(int n, const std::function<int(int rank, ncclComm_t comm)>& fn, double timeoutSec = 120,
                              std::vector<pid_t>* pids = nullptr,
                              const std::function<void(const std::vector<pid_t>&)>& whileRunning = nullptr,
                              const std::function<void(int rank)>& beforeInit = nullptr);

// The whole file at `path` ("" when it cannot be read).
std::string readFileText(const std::string& path);

// The calling thread's CPUs when nothing restricted them (its mask holds every online CPU), else empty: where
// BRAID_PLACE_THREADS places local rank i on the i-th.
std::vector<int> unrestrictedCpus();

size_t typeSize(ncclDataType_t t);
const char* typeName(ncclDataType_t t);
const char* opName(ncclRedOp_t op);

// The input value of element i on rank r for reduction op (as a double; integers in a tiny range).
double inputValue(ncclRedOp_t op, ncclDataType_t t, int rank, size_t i);
// Writes value v as datatype t at dst[i].
void storeValue(ncclDataType_t t, void* dst, size_t i, double v);
// The exact expected reduction of element i over nranks ranks, already rounded to the type.
double expectedReduce(ncclRedOp_t op, ncclDataType_t t, int nranks, size_t i, double premulScalar);
// Encodes v in type t and compares it bitwise with buf[i].
bool sameBits(ncclDataType_t t, const void* buf, size_t i, double v);
// Number of elements of buf[0..n) that differ from the expected values.
size_t countWrong(ncclDataType_t t, const void* buf, size_t n, const std::function<double(size_t)>& expected);

}  // namespace braid_test
