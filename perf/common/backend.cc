// Backend selection. The MPI and Gloo baselines exist only when the build found those libraries
// (BRAID_PERF_WITH_MPI, BRAID_PERF_WITH_GLOO); asking for a missing one is an error that says how to get it.
#include "perf/common/backend.h"

namespace braid::perf {

std::string availableBackends() {
  std::string s = "braid";
#ifdef BRAID_PERF_WITH_MPI
  s += ", mpi";
#endif
#ifdef BRAID_PERF_WITH_GLOO
  s += ", gloo";
#endif
  return s;
}

std::unique_ptr<Backend> makeBackend(const std::string& name, std::string* error) {
  if (name == "braid" || name == "nccl") return makeBraidBackend();
  if (name == "mpi") {
#ifdef BRAID_PERF_WITH_MPI
    return makeMpiBackend();
#else
    *error = "--baseline mpi: this build has no MPI (install libopenmpi-dev or libmpich-dev and re-run cmake)";
    return nullptr;
#endif
  }
  if (name == "gloo") {
#ifdef BRAID_PERF_WITH_GLOO
    return makeGlooBackend();
#else
    *error = "--baseline gloo: this build has no Gloo (install libgloo-dev and re-run cmake)";
    return nullptr;
#endif
  }
  *error = "--baseline '" + name + "' is unknown; this build has: " + availableBackends();
  return nullptr;
}

#ifndef BRAID_PERF_WITH_MPI
bool mpiLaunchDetected() {
  return false;
}
bool mpiBroadcastFromRoot(void*, size_t, std::string* error) {
  *error = "this build has no MPI";
  return false;
}
void mpiFinalizeIfStarted() {}
#endif

}  // namespace braid::perf
