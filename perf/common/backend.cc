// Backend selection. The MPI and Gloo baselines exist only when the build found those libraries
// (BRAID_PERF_WITH_MPI, BRAID_PERF_WITH_GLOO); asking for a missing one is an error that says how to get it.
#include "perf/common/backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace braid::perf {

namespace {
constexpr size_t kPage = 4096;
}  // namespace

size_t pageRounded(size_t bytes) {
  return std::max<size_t>(kPage, (bytes + kPage - 1) / kPage * kPage);
}

void* zeroedHostPages(size_t bytes) {
  const size_t rounded = pageRounded(bytes);
  void* p = std::aligned_alloc(kPage, rounded);
  if (p != nullptr) std::memset(p, 0, rounded);  // touched before anything is timed
  return p;
}

void* Backend::allocate(size_t bytes) {
  return zeroedHostPages(bytes);
}

void Backend::release(void* p) {
  std::free(p);
}

void* Backend::allocateOnDevice(size_t, std::string* error) {
  *error = std::string("--baseline ") + name() + " measures host memory only";
  return nullptr;
}

void Backend::releaseOnDevice(void*) {}

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
bool mpiBroadcastFromRoot(const LaunchInfo&, void*, size_t, std::string* error) {
  *error = "this build has no MPI";
  return false;
}
void mpiFinalizeIfStarted() {}
#endif

}  // namespace braid::perf
