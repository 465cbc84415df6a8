// The perf tools' output: nccl-tests' header, table and footer (formats match nccl-tests exactly), and JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "perf/common/options.h"

namespace braid::perf {

// Per-iteration statistics (-I): each iteration's time is the slowest rank's; -K leading iterations are left out.
struct IterStats {
  double minUs = 0, maxUs = 0, avgUs = 0, p50Us = 0, p95Us = 0, p99Us = 0, stdevUs = 0;
  double cvPct = 0;             // stdev / avg, in percent
  std::vector<double> timesUs;  // every iteration, the skipped ones included (JSON only)
};

// Statistics of timesUs[skip..]; skip must be below timesUs.size().
IterStats computeIterStats(std::vector<double> timesUs, int skip);

struct PlacementResult {
  double timeUs = 0;
  double algBw = 0;  // GB/s (1e9 bytes)
  double busBw = 0;
  int64_t wrong = 0;         // wrong elements over all ranks, in the first check iteration that had any
  int64_t failedChecks = 0;  // driver threads that saw wrong elements (nccl-tests' "Out of bounds values")
  bool checked = false;
  bool hasIterStats = false;
  IterStats iter;
};

struct RowResult {
  size_t bytes = 0;
  size_t count = 0;
  const char* type = "";
  const char* op = "";
  int root = -1;
  PlacementResult outOfPlace;
  PlacementResult inPlace;
  std::string timestamp;  // -S: "YYYY-MM-DD hh:mm:ss" local time when the row was measured
};

// The -S timestamp of now.
std::string timestampNow();

struct RunInfo {
  const char* tool = "";
  const char* library = "braid";  // the backend measured: braid, mpi, gloo
  int headerVersion = 0;
  int libraryVersion = 0;
  int nranks = 1;
  int nprocs = 1;
  std::string algo;  // NCCL_ALGO / NCCL_PROTO as set for the run ("" when not), so plots can tell runs apart
  std::string proto;
  const PerfOptions* opts = nullptr;
};

// "# nccl-tests version ...", "# Collective test starting: ...", "# nThread ...", the "# Blocking Enabled" and
// "# Per-Iteration Report" lines where they apply, "#".
void printHeader(FILE* out, const RunInfo& info);
// One "#  Rank ..." line (without the newline); `where` is "[host] CPU" or the GPU's "[bus id] name".
std::string deviceLine(int rank, int pid, const char* host, int device, const std::string& where);
// "# Using devices", the device lines, `note` (a "# ..." line, skipped when empty), "#", and the three table header
// lines (with "cputime" for -C, the per-iteration columns for -I, the timestamp column for -S).
void printDevicesAndTableHeader(FILE* out, const std::vector<std::string>& deviceLines, const std::string& note,
                                const PerfOptions& opts);
void printRow(FILE* out, const RowResult& row, const PerfOptions& opts);
// "# Out of bounds values : ...", "# Avg bus bandwidth    : ... [bwCheck]", "#", "# Collective test concluded: ...".
// failedChecks sums PlacementResult::failedChecks; bwCheck is "OK" or "FAILED" under NCCL_TESTS_MIN_BW, else empty.
void printFooter(FILE* out, const char* tool, int64_t failedChecks, double avgBusBw, const char* bwCheck);

// Mean busbw over every out-of-place and in-place result (nccl-tests' "Avg bus bandwidth").
double averageBusBw(const std::vector<RowResult>& rows);

// Writes the run as JSON; false (with *error) when the file cannot be written.
bool writeJson(const std::string& path, const RunInfo& info, const std::vector<RowResult>& rows, int64_t failedChecks,
               double avgBusBw, std::string* error);

// Formats v with 2 decimals, or fewer when that does not fit in `width` characters.
std::string fitNumber(double v, int width);

}  // namespace braid::perf
