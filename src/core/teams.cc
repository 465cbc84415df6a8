#include "src/core/teams.h"

namespace braid {

Team worldTeam(const Communicator& comm) {
  return Team{comm.nranks(), comm.rank(), 1};
}

namespace {

bool blocksShareHosts(const Communicator& comm, int size) {
  for (int start = 0; start < comm.nranks(); start += size) {
    for (int r = start + 1; r < start + size; ++r) {
      if (comm.peer(r).hostHash != comm.peer(start).hostHash) return false;
    }
  }
  return true;
}

int lsaSize(const Communicator& comm) {
  // Largest first: a communicator of one host is one block.
  for (int size = comm.nranks(); size > 1; --size) {
    if (comm.nranks() % size == 0 && blocksShareHosts(comm, size)) return size;
  }
  return 1;
}

}  // namespace

Team lsaTeam(const Communicator& comm) {
  int size = lsaSize(comm);
  return Team{size, comm.rank() % size, 1};
}

Team railTeam(const Communicator& comm) {
  int size = lsaSize(comm);
  return Team{comm.nranks() / size, comm.rank() / size, size};
}

}  // namespace braid
