#include "perf/common/report.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace braid::perf {
namespace {

constexpr const char* kTableHeader =
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw "
    " #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n";

void printPlacement(FILE* out, const PlacementResult& r) {
  std::fprintf(out, "  %7s  %6s  %6s", fitNumber(r.timeUs, 7).c_str(), fitNumber(r.algBw, 6).c_str(),
               fitNumber(r.busBw, 6).c_str());
  if (r.checked) {
    std::fprintf(out, "  %6g", static_cast<double>(r.wrong));
  } else {
    std::fprintf(out, "  %6s", "N/A");
  }
}

// A JSON number; non-finite values (a zero time) become null.
std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof(esc), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += esc;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void writePlacementJson(FILE* f, const char* key, const PlacementResult& r) {
  std::fprintf(f, "\"%s\": {\"time_us\": %s, \"algbw_gbps\": %s, \"busbw_gbps\": %s, \"wrong\": ", key,
               jsonNumber(r.timeUs).c_str(), jsonNumber(r.algBw).c_str(), jsonNumber(r.busBw).c_str());
  if (r.checked) {
    std::fprintf(f, "%lld}", static_cast<long long>(r.wrong));
  } else {
    std::fprintf(f, "null}");
  }
}

}  // namespace

std::string fitNumber(double v, int width) {
  char buf[64];
  for (int precision = 2; precision >= 0; --precision) {
    std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
    if (static_cast<int>(std::strlen(buf)) <= width) break;
  }
  return buf;
}

void printHeader(FILE* out, const RunInfo& info) {
  const PerfOptions& o = *info.opts;
  std::fprintf(out, "# nccl-tests version braid-perf nccl-headers=%d nccl-library=%d\n", info.headerVersion,
               info.libraryVersion);
  std::fprintf(out, "# Collective test starting: %s\n", info.tool);
  // Baselines say so in a comment line, which table parsers skip like every other '#' line.
  if (std::strcmp(info.library, "braid") != 0) std::fprintf(out, "# Baseline: %s collectives\n", info.library);
  std::fprintf(out,
               "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: "
               "%d validation: %d graph: %d unalign: %d\n",
               o.nThreads, o.nGpus, o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
               o.stepFactor > 1 ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check, o.cudaGraph,
               o.unalign);
  std::fprintf(out, "#\n");
  std::fflush(out);
}

std::string deviceLine(int rank, int pid, const char* host, int device) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "#  Rank %2d Group %2d Pid %6d on %10s device %2d %s", rank, 0, pid, host, device,
                device < 0 ? "[host] CPU" : "[cuda] GPU");
  return buf;
}

void printDevicesAndTableHeader(FILE* out, const std::vector<std::string>& deviceLines) {
  std::fprintf(out, "# Using devices\n");
  for (const std::string& line : deviceLines) std::fprintf(out, "%s\n", line.c_str());
  std::fprintf(out, "#\n%s", kTableHeader);
  std::fflush(out);
}

void printRow(FILE* out, const RowResult& row) {
  std::fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, row.type, row.op, row.root);
  printPlacement(out, row.outOfPlace);
  printPlacement(out, row.inPlace);
  std::fprintf(out, "\n");
  std::fflush(out);
}

void printFooter(FILE* out, const char* tool, int64_t wrongTotal, double avgBusBw) {
  std::fprintf(out, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrongTotal),
               wrongTotal == 0 ? "OK" : "FAILED");
  std::fprintf(out, "# Avg bus bandwidth    : %g\n", avgBusBw);
  std::fprintf(out, "#\n");
  std::fprintf(out, "# Collective test concluded: %s\n", tool);
  std::fflush(out);
}

double averageBusBw(const std::vector<RowResult>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const RowResult& r : rows) sum += r.outOfPlace.busBw + r.inPlace.busBw;
  return sum / (2.0 * static_cast<double>(rows.size()));
}

bool writeJson(const std::string& path, const RunInfo& info, const std::vector<RowResult>& rows, int64_t wrongTotal,
               double avgBusBw, std::string* error) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const PerfOptions& o = *info.opts;
  std::fprintf(f, "{\n");
  std::fprintf(f, "  \"tool\": %s,\n", jsonString(info.tool).c_str());
  std::fprintf(f, "  \"library\": %s,\n", jsonString(info.library).c_str());
  std::fprintf(f, "  \"nccl_headers\": %d,\n  \"nccl_library\": %d,\n", info.headerVersion, info.libraryVersion);
  std::fprintf(f, "  \"nranks\": %d,\n  \"nprocs\": %d,\n  \"nthreads\": %d,\n  \"ngpus\": %d,\n", info.nranks,
               info.nprocs, o.nThreads, o.nGpus);
  std::fprintf(f,
               "  \"options\": {\"minbytes\": %zu, \"maxbytes\": %zu, \"stepbytes\": %zu, \"stepfactor\": %zu, "
               "\"iters\": %d, \"warmup_iters\": %d, \"agg_iters\": %d, \"check\": %d, \"average\": %d, "
               "\"unalign\": %d},\n",
               o.minBytes, o.maxBytes, o.stepBytes, o.stepFactor, o.iters, o.warmupIters, o.aggIters, o.check,
               o.average, o.unalign);
  std::fprintf(f, "  \"results\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowResult& r = rows[i];
    std::fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": %s, \"redop\": %s, \"root\": %d, ",
                 i == 0 ? "" : ",", r.bytes, r.count, jsonString(r.type).c_str(), jsonString(r.op).c_str(), r.root);
    writePlacementJson(f, "out_of_place", r.outOfPlace);
    std::fprintf(f, ", ");
    writePlacementJson(f, "in_place", r.inPlace);
    std::fprintf(f, "}");
  }
  std::fprintf(f, "%s],\n", rows.empty() ? "" : "\n  ");
  std::fprintf(f, "  \"wrong_total\": %lld,\n", static_cast<long long>(wrongTotal));
  std::fprintf(f, "  \"avg_busbw_gbps\": %s,\n", jsonNumber(avgBusBw).c_str());
  std::fprintf(f, "  \"status\": \"%s\"\n}\n", wrongTotal == 0 ? "OK" : "FAILED");
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace braid::perf
