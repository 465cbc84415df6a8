// The perf tools' output: nccl-tests' header, table and footer (formats match nccl-tests exactly), and JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "perf/common/options.h"

namespace braid::perf {

struct PlacementResult {
  double timeUs = 0;
  double algBw = 0;  // GB/s (1e9 bytes)
  double busBw = 0;
  int64_t wrong = 0;
  bool checked = false;
};

struct RowResult {
  size_t bytes = 0;
  size_t count = 0;
  const char* type = "";
  const char* op = "";
  int root = -1;
  PlacementResult outOfPlace;
  PlacementResult inPlace;
};

struct RunInfo {
  const char* tool = "";
  const char* library = "braid";  // the backend measured: braid, mpi, gloo
  int headerVersion = 0;
  int libraryVersion = 0;
  int nranks = 1;
  int nprocs = 1;
  const PerfOptions* opts = nullptr;
};

// "# nccl-tests version ...", "# Collective test starting: ...", "# nThread ...", "#".
void printHeader(FILE* out, const RunInfo& info);
// One "#  Rank ..." line (without the newline).
std::string deviceLine(int rank, int pid, const char* host, int device);
// "# Using devices", the device lines, "#", and the three table header lines.
void printDevicesAndTableHeader(FILE* out, const std::vector<std::string>& deviceLines);
void printRow(FILE* out, const RowResult& row);
// "# Out of bounds values : ...", "# Avg bus bandwidth    : ...", "#", "# Collective test concluded: ...".
void printFooter(FILE* out, const char* tool, int64_t wrongTotal, double avgBusBw);

// Mean busbw over every out-of-place and in-place result (nccl-tests' "Avg bus bandwidth").
double averageBusBw(const std::vector<RowResult>& rows);

// Writes the run as JSON; false (with *error) when the file cannot be written.
bool writeJson(const std::string& path, const RunInfo& info, const std::vector<RowResult>& rows, int64_t wrongTotal,
               double avgBusBw, std::string* error);

// Formats v with 2 decimals, or fewer when that does not fit in `width` characters.
std::string fitNumber(double v, int width);

}  // namespace braid::perf
