// Reading flight recorder dumps (src/core/flight_recorder.h writes them; BRAID_FLIGHT_RECORDER_FILE) and answering
// the question users ask when a job hangs: which ranks never reached the collective the others wait in, and what
// every rank was doing. `braid-info --analyze FILE|DIR...` prints flightReport() of the dumps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid {

struct FlightOp {
  uint64_t collSeq = 0;
  bool p2p = false;
  uint64_t p2pSeq = 0;
  std::string fn, datatype, op, algorithm, protocol, state;
  uint64_t count = 0;
  int root = -1, peer = -1;
  int64_t queuedUs = 0, startedUs = 0, endedUs = 0;  // 0: not yet
};

// One communicator as one rank's dump shows it.
struct FlightComm {
  std::string file, host, trigger;
  int pid = 0;
  int64_t dumpUs = 0;  // when the dump was written
  std::string commId, name, error;
  int rank = 0, nranks = 0;
  uint64_t nextCollSeq = 0;
  std::vector<FlightOp> ops;
};

// Parses one dump. Errors name the file and what is wrong ("not a braid flight recorder dump", a JSON error with
// its line and column, a missing field).
bool parseFlightDump(const std::string& text, const std::string& file, std::vector<FlightComm>* out,
                     std::string* error);

// The report over every communicator the dumps show (grouped by comm_id; of two dumps of one rank the later one
// counts). Per communicator: the first collective some rank has not finished, the ranks that never reached it,
// those inside it and since when, collectives that differ between ranks, ranks without a dump, and each rank's
// error.
std::string flightReport(const std::vector<FlightComm>& comms);

}  // namespace braid
