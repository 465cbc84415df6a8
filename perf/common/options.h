// Command-line options of the perf tools: nccl-tests' flags (short and long forms) and defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "perf/common/data_types.h"

namespace braid::perf {

// Where the perf buffers live. kAuto: device memory when every communicator of the thread reports a CUDA device
// (ncclCommCuDevice >= 0) and the CUDA runtime sees devices, host memory otherwise.
enum class BufferPlace { kAuto, kHost, kDevice };

struct PerfOptions {
  int nThreads = 1;                          // -t: ranks (threads) per process
  int nGpus = 1;                             // -g: GPUs (ranks) per thread, driven in one group as nccl-tests does
  size_t minBytes = 32 << 20;                // -b
  size_t maxBytes = 32 << 20;                // -e
  size_t stepBytes = 1 << 20;                // -i: additive step (used when no -f > 1)
  size_t stepFactor = 1;                     // -f: multiplicative step; > 1 selects it
  int iters = 20;                            // -n
  int warmupIters = 1;                       // -w
  int aggIters = 1;                          // -m: ops per iteration, grouped in ncclGroupStart/End
  int runCycles = 1;                         // -N: repeat the whole sweep; 0 = forever
  int parallelInit = 0;                      // -p: accepted; ranks always initialize concurrently here
  int check = 1;                             // -c: correctness-check iterations per size (0: #wrong is N/A)
  int root = 0;                              // -r: root of rooted collectives; -1 sweeps every rank
  int blocking = 0;                          // -z: 1 barrier after each op, 2 sync only, 3 barrier per iteration
  int streamNull = 0;                        // -y: device buffers use the NULL (legacy default) stream, not their own
  int timeoutSec = 0;                        // -T: abort the whole test after this many seconds (0: off)
  int cudaGraph = 0;                         // -G: only 0 in the host build
  int reportCpuTime = 0;                     // -C: time to issue, not to complete (the same on host buffers)
  int average = 1;                           // -a: time reduction across ranks: 0 rank 0, 1 mean, 2 min, 3 max
  int perIterTiming = 0;                     // -I: per-iteration statistics columns
  int perIterSkip = 0;                       // -K: leading iterations left out of them
  int reportTimestamps = 0;                  // -S: timestamp column
  int unalign = 0;                           // -u: misalign buffers by this many elements
  std::string jsonFile;                      // -J: write the results as JSON to this file
  int localRegister = 0;                     // -R: 1 ncclCommRegister, 2 symmetric windows
  std::string baseline = "braid";            // --baseline: braid, mpi or gloo
  BufferPlace buffers = BufferPlace::kAuto;  // --buffers
  // --host_alloc malloc: host buffers from plain page-aligned malloc, as a CPU program's, instead of ncclMemAlloc
  // (which nccl-tests uses for every buffer since NCCL 2.19, and which peers of braid host communicators can map).
  bool plainHost = false;
  bool bindThreads = false;            // --bind cores: one CPU per rank thread when they fit (none: off)
  std::vector<const TypeInfo*> types;  // -d (default float; "all")
  std::vector<const OpInfo*> ops;      // -o (default sum; "all")
};

// Parses argv into *opts and returns true when the test should run. Otherwise it has printed the usage (-h) or the
// reason the command line is wrong, and the program should exit with *exitStatus (0 for -h, 2 for a bad line).
bool parseOptions(int argc, char** argv, const char* toolName, bool hasOp, bool hasRoot, PerfOptions* opts,
                  int* exitStatus);

// "1048576", "4K", "32M", "8G" (powers of two) -> bytes; false on junk or overflow.
bool parseSize(const char* text, size_t* out);

// The sizes the sweep visits, in order.
std::vector<size_t> sweepSizes(const PerfOptions& opts);

}  // namespace braid::perf
