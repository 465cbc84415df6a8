// The device API's teams (nccl_device/core.h) of a communicator: arithmetic progressions of world ranks.
#pragma once

#include "src/core/comm.h"

namespace braid {

struct Team {
  int nRanks = 0;
  int rank = 0;
  int stride = 0;
};

Team worldTeam(const Communicator& comm);
// This rank's block of the largest size L that divides nranks and makes every aligned block [kL, (k+1)L) the
// ranks of one host (windows map each other's memory there); 1 when the ranks of a host are not contiguous. The
// same L on every rank, computed from the init exchange's host hashes (no communication).
Team lsaTeam(const Communicator& comm);
// The ranks at this rank's position in every LSA block.
Team railTeam(const Communicator& comm);

}  // namespace braid
