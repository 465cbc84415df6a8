// braid-info: the library version, how it was built, and every knob with its value and where the value came from.
// It links braid_core (the registry is internal) rather than the public library.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid_build_config.h"
#include "include/nccl.h"
#include "src/backends/cuda/cu_api.h"
#include "src/common/params.h"
#include "tools/info/flight_cli.h"
#include "transports/transport.h"

namespace {

void usage() {
  printf(
      "usage: braid-info [-c] [-h] [--dump [PID...]] [--analyze PATH...]\n"
      "  (no flag)           version, build configuration, knobs and the FIFO memory bound formula\n"
      "  -c                  knobs only, one per line: NAME=VALUE (source)\n"
      "  --dump [PID...]     make braid processes write their flight recorder (SIGUSR1) to\n"
      "                      BRAID_FLIGHT_RECORDER_FILE; no PID: every such process on this host\n"
      "  --analyze PATH...   read flight recorder dumps (files, or directories of *.json) of all ranks and\n"
      "                      say which ranks never reached the collective the others wait in\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool knobsOnly = false;
  if (argc >= 2 && (strcmp(argv[1], "--dump") == 0 || strcmp(argv[1], "--analyze") == 0)) {
    const std::vector<std::string> rest(argv + 2, argv + argc);
    return strcmp(argv[1], "--dump") == 0 ? braid::flightDumpCommand(rest) : braid::flightAnalyzeCommand(rest);
  }
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-c") == 0) {
      knobsOnly = true;
    } else {
      usage();
      return strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
  if (knobsOnly) {
    for (const braid::ParamDef* p : braid::allParams()) {
      braid::ParamValue v = braid::lookupParam(*p);
      printf("%s=%s (%s)\n", p->name, v.text.c_str(), v.source.c_str());
    }
    return 0;
  }
  printf("braid %s (NCCL API %d.%d.%d)\n", BRAID_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  printf(
      "build: hwloc=%s cuda-toolkit=%s (CUDA backend: the driver table and the fake so far, docs/cuda.md) ibverbs=%s "
      "libfabric=%s mpi=%s\n",
      BRAID_BUILD_HWLOC, BRAID_BUILD_CUDA, BRAID_BUILD_IBVERBS, BRAID_BUILD_LIBFABRIC, BRAID_BUILD_MPI);
  // The driver table (src/backends/cuda/cu_api.h), as a CUDA communicator would load it.
  braid::Result<const braid::CuApi*> cu = braid::cuApi();
  if (cu.isOk()) {
    int devices = 0;
    (void)cu.value()->deviceGetCount(&devices);
    printf("cuda driver: %s (CUDA %d.%d, %d devices)\n", cu.value()->name.c_str(), cu.value()->driverVersion / 1000,
           cu.value()->driverVersion % 1000 / 10, devices);
  } else {
    printf("cuda driver: none: %s\n", cu.status().message().c_str());
  }
  printf("transports (in the order tried):");
  for (braid::Transport* t : braid::hostTransports()) printf(" %s", t->name());
  printf("\n\nknobs:\n");
  for (const braid::ParamDef* p : braid::allParams()) {
    braid::ParamValue v = braid::lookupParam(*p);
    printf("  %-22s = %-14s [%s]\n      %s\n", p->name, v.text.empty() ? "(unset)" : v.text.c_str(), v.source.c_str(),
           p->doc);
  }
  // The same bound the communicator logs at INFO: per channel, one receive FIFO per peer on lane 0 plus tree 1's 3.
  long long buff = braid::params::BuffSize() + braid::params::LlBuffSize();
  long long ch = braid::params::CpuChannels();
  long long minCh = braid::params::MinNChannels(), maxCh = braid::params::MaxNChannels();
  if (minCh > 0 && ch < minCh) ch = minCh;
  if (maxCh > 0 && ch > maxCh) ch = maxCh;
  if (ch < 1) ch = 1;
  printf("\nFIFO memory per rank (upper bound, mapped lazily at first use):\n");
  printf("  (NCCL_BUFFSIZE + NCCL_LL_BUFFSIZE) x channels x (nranks + 3) = %lld x %lld x (N + 3) bytes\n", buff, ch);
  printf("  (receive FIFOs are mapped at first use: a ring all-reduce alone maps %lld x %lld bytes)\n", buff, ch);
  for (int n : {2, 4, 8}) printf("  N=%d: %lld bytes\n", n, buff * ch * (n + 3));
  return 0;
}
