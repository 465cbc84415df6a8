// braid-info's flight recorder commands (docs/hardening.md, "When a job hangs").
#pragma once

#include <string>
#include <vector>

namespace braid {

// --dump [PID...]: asks processes to write their flight recorder (SIGUSR1) and waits until each has written it.
// Without PIDs: every process of this host that runs braid with BRAID_FLIGHT_RECORDER_FILE set. Refuses a process
// that does not catch SIGUSR1 (the signal would kill it). Returns the exit code.
int flightDumpCommand(const std::vector<std::string>& pids);

// --analyze PATH...: reads the dumps (files, or directories of *.json) and prints flightReport(). Returns the exit
// code (1 when a file could not be read).
int flightAnalyzeCommand(const std::vector<std::string>& paths);

}  // namespace braid
