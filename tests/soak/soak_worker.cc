// One rank of scripts/soak.py's jobs: init, a loop of checked all-reduces, destroy. It writes the phase it is in to
// DIR/phase.RANK before entering it (so the soak can kill it in a chosen phase), and on a failure prints one line,
// "rank R: FAILED in PHASE: <ncclGetLastError>", and exits 3. Rank 0 publishes the unique id in DIR/id.
//
//   braid_soak_worker DIR RANK NRANKS ITERS COUNT
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

std::string gDir;
int gRank = 0;

void phase(const char* name) {
  const std::string path = gDir + "/phase." + std::to_string(gRank);
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fputs(name, f);
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

int fail(const char* where, ncclComm_t comm) {
  printf("rank %d: FAILED in %s: %s\n", gRank, where, ncclGetLastError(comm));
  fflush(stdout);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s DIR RANK NRANKS ITERS COUNT\n", argv[0]);
    return 2;
  }
  gDir = argv[1];
  gRank = atoi(argv[2]);
  const int nranks = atoi(argv[3]);
  const int iters = atoi(argv[4]);
  const size_t count = strtoull(argv[5], nullptr, 10);
  phase("init");
  ncclUniqueId id;
  const std::string idPath = gDir + "/id";
  if (gRank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return fail("init", nullptr);
    const std::string tmp = idPath + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (f == nullptr || fwrite(&id, sizeof(id), 1, f) != 1) return fail("init (writing the id)", nullptr);
    fclose(f);
    rename(tmp.c_str(), idPath.c_str());
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      FILE* f = fopen(idPath.c_str(), "rb");
      if (f != nullptr) {
        const bool ok = fread(&id, sizeof(id), 1, f) == 1;
        fclose(f);
        if (ok) break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        printf("rank %d: FAILED in init: no unique id from rank 0 within 60 s\n", gRank);
        return 3;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nranks, id, gRank) != ncclSuccess) return fail("init", comm);
  phase("ops");
  std::vector<float> x(count);
  for (int i = 0; i < iters; ++i) {
    for (float& v : x) v = 1.0f;
    if (ncclAllReduce(x.data(), x.data(), count, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) {
      return fail("ops", comm);
    }
    for (float v : x) {
      if (v != static_cast<float>(nranks)) {
        printf("rank %d: FAILED in ops: wrong result %g (expected %d) at iteration %d\n", gRank, v, nranks, i);
        return 4;
      }
    }
  }
  phase("destroy");
  if (ncclCommDestroy(comm) != ncclSuccess) return fail("destroy", nullptr);
  phase("done");
  return 0;
}
