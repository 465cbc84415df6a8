#include "perf/common/report.h"

#include "src/common/json_text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <ctime>

namespace braid::perf {
namespace {

constexpr const char* kTimestampFormat = "%Y-%m-%d %H:%M:%S";
constexpr int kTimestampWidth = 19;

// One header line from printf-style pieces, padding included: nccl-tests' header lines end in blanks, and keeping
// them lets a plain diff compare the two tables.
void printHeaderLine(FILE* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void printHeaderLine(FILE* out, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  std::vfprintf(out, format, ap);
  va_end(ap);
  std::fputc('\n', out);
}

// The three table header lines, in nccl-tests' column widths.
void printTableHeader(FILE* out, const PerfOptions& o) {
  const char* time = o.reportCpuTime != 0 ? "cputime" : "time";
  const int tsWidth = o.reportTimestamps != 0 ? kTimestampWidth : 0;
  const char* tsLabel = o.reportTimestamps != 0 ? "timestamp" : "";
  const char* tsUnit = o.reportTimestamps != 0 ? kTimestampFormat : "";
  if (o.perIterTiming == 0) {
    printHeaderLine(out, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ",
                    "", "", "", "", "");
    printHeaderLine(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s", "size", "count",
                    "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong",
                    tsWidth, tsLabel);
    printHeaderLine(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s", "(B)", "(elements)",
                    "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsWidth, tsUnit);
    return;
  }
  printHeaderLine(out,
                  "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                        "
                  "        in-place (+ per-iteration)",
                  "", "", "", "", "");
  printHeaderLine(out,
                  "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                  "%7s  %7s %*s",
                  "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
                  "i_cv%", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tsWidth, tsLabel);
  printHeaderLine(out,
                  "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                  "%7s  %7s %*s",
                  "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
                  "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tsWidth, tsUnit);
}

void printPlacement(FILE* out, const PlacementResult& r) {
  std::fprintf(out, "  %7s  %6s  %6s", fitNumber(r.timeUs, 7).c_str(), fitNumber(r.algBw, 6).c_str(),
               fitNumber(r.busBw, 6).c_str());
  if (r.checked) {
    std::fprintf(out, "  %6g", static_cast<double>(r.wrong));
  } else {
    std::fprintf(out, "    N/A");  // nccl-tests' own spelling: 4 blanks, one narrower than a #wrong cell
  }
  if (r.hasIterStats) {
    const IterStats& i = r.iter;
    std::fprintf(out, "  %7s  %7s  %7s  %7s", fitNumber(i.minUs, 7).c_str(), fitNumber(i.maxUs, 7).c_str(),
                 fitNumber(i.p99Us, 7).c_str(), fitNumber(i.cvPct, 7).c_str());
  }
}

// A JSON number; non-finite values (a zero time) become null.
std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void writePlacementJson(FILE* f, const char* key, const PlacementResult& r) {
  std::fprintf(f, "\"%s\": {\"time_us\": %s, \"algbw_gbps\": %s, \"busbw_gbps\": %s, \"wrong\": ", key,
               jsonNumber(r.timeUs).c_str(), jsonNumber(r.algBw).c_str(), jsonNumber(r.busBw).c_str());
  if (r.checked) {
    std::fprintf(f, "%lld", static_cast<long long>(r.wrong));
  } else {
    std::fprintf(f, "null");
  }
  if (r.hasIterStats) {
    const IterStats& i = r.iter;
    std::fprintf(f,
                 ", \"per_iter\": {\"min_us\": %s, \"max_us\": %s, \"avg_us\": %s, \"p50_us\": %s, \"p95_us\": %s, "
                 "\"p99_us\": %s, \"stdev_us\": %s, \"cv_pct\": %s, \"times_us\": [",
                 jsonNumber(i.minUs).c_str(), jsonNumber(i.maxUs).c_str(), jsonNumber(i.avgUs).c_str(),
                 jsonNumber(i.p50Us).c_str(), jsonNumber(i.p95Us).c_str(), jsonNumber(i.p99Us).c_str(),
                 jsonNumber(i.stdevUs).c_str(), jsonNumber(i.cvPct).c_str());
    for (size_t k = 0; k < i.timesUs.size(); ++k) {
      std::fprintf(f, "%s%s", k == 0 ? "" : ", ", jsonNumber(i.timesUs[k]).c_str());
    }
    std::fprintf(f, "]}");
  }
  std::fprintf(f, "}");
}

}  // namespace

std::string fitNumber(double v, int width) {
  char buf[64];
  for (int precision = 2; precision >= 0; --precision) {
    std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
    if (static_cast<int>(std::strlen(buf)) <= width) return buf;
  }
  // Too large even without decimals (hours, in microseconds): exponent form, as nccl-tests does.
  std::snprintf(buf, sizeof(buf), "%.*e", width >= 7 ? 1 : 0, v);
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
  if (o.blocking == 1)
    std::fprintf(out, "# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.blocking == 2)
    std::fprintf(out, "# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (o.blocking == 3) {
    std::fprintf(out,
                 "# Blocking Enabled: wait for completion and barrier after each iteration (barrier not timed) \n");
  }
  if (o.perIterTiming != 0) {
    std::fprintf(out, "# Per-Iteration Report: host timing; i_* uses the slowest rank of each iteration%s\n",
                 o.perIterSkip > 0 ? (", first " + std::to_string(o.perIterSkip) + " skipped").c_str() : "");
  }
  if (o.parallelInit != 0) std::fprintf(out, "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  std::fprintf(out, "#\n");
  std::fflush(out);
}

std::string deviceLine(int rank, int pid, const char* host, int device, const std::string& where) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "#  Rank %2d Group %2d Pid %6d on %10s device %2d %s", rank, 0, pid, host, device,
                where.c_str());
  return buf;
}

IterStats computeIterStats(std::vector<double> timesUs, int skip) {
  IterStats st;
  st.timesUs = timesUs;
  std::vector<double> t(timesUs.begin() + skip, timesUs.end());
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  // The smallest sample with at least p % of the samples at or below it.
  auto percentile = [&](size_t p) { return t[std::min(n - 1, (n * p + 99) / 100 - 1)]; };
  st.minUs = t.front();
  st.maxUs = t.back();
  st.p50Us = t[n / 2];
  st.p95Us = percentile(95);
  st.p99Us = percentile(99);
  double sum = 0;
  for (double v : t) sum += v;
  st.avgUs = sum / static_cast<double>(n);
  double var = 0;
  for (double v : t) var += (v - st.avgUs) * (v - st.avgUs);
  st.stdevUs = std::sqrt(var / static_cast<double>(n));
  st.cvPct = st.avgUs > 0 ? st.stdevUs / st.avgUs * 100.0 : 0.0;
  return st;
}

std::string timestampNow() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), kTimestampFormat, &local);
  return buf;
}

void printDevicesAndTableHeader(FILE* out, const std::vector<std::string>& deviceLines, const std::string& note,
                                const PerfOptions& opts) {
  std::fprintf(out, "# Using devices\n");
  for (const std::string& line : deviceLines) std::fprintf(out, "%s\n", line.c_str());
  if (!note.empty()) std::fprintf(out, "%s\n", note.c_str());
  std::fprintf(out, "#\n");
  printTableHeader(out, opts);
  std::fflush(out);
}

void printRow(FILE* out, const RowResult& row, const PerfOptions& opts) {
  std::fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, row.type, row.op, row.root);
  printPlacement(out, row.outOfPlace);
  printPlacement(out, row.inPlace);
  if (opts.reportTimestamps != 0) std::fprintf(out, "  %*s", kTimestampWidth, row.timestamp.c_str());
  std::fprintf(out, "\n");
  std::fflush(out);
}

void printFooter(FILE* out, const char* tool, int64_t failedChecks, double avgBusBw, const char* bwCheck) {
  std::fprintf(out, "# Out of bounds values : %lld %s\n", static_cast<long long>(failedChecks),
               failedChecks == 0 ? "OK" : "FAILED");
  std::fprintf(out, "# Avg bus bandwidth    : %g %s\n", avgBusBw, bwCheck);
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

bool writeJson(const std::string& path, const RunInfo& info, const std::vector<RowResult>& rows, int64_t failedChecks,
               double avgBusBw, std::string* error) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const PerfOptions& o = *info.opts;
  std::fprintf(f, "{\n");
  std::fprintf(f, "  \"tool\": %s,\n", jsonQuote(info.tool).c_str());
  std::fprintf(f, "  \"library\": %s,\n", jsonQuote(info.library).c_str());
  std::fprintf(f, "  \"nccl_headers\": %d,\n  \"nccl_library\": %d,\n", info.headerVersion, info.libraryVersion);
  if (!info.algo.empty()) std::fprintf(f, "  \"algo\": %s,\n", jsonQuote(info.algo).c_str());
  if (!info.proto.empty()) std::fprintf(f, "  \"proto\": %s,\n", jsonQuote(info.proto).c_str());
  std::fprintf(f, "  \"nranks\": %d,\n  \"nprocs\": %d,\n  \"nthreads\": %d,\n  \"ngpus\": %d,\n", info.nranks,
               info.nprocs, o.nThreads, o.nGpus);
  std::fprintf(f,
               "  \"options\": {\"minbytes\": %zu, \"maxbytes\": %zu, \"stepbytes\": %zu, \"stepfactor\": %zu, "
               "\"iters\": %d, \"warmup_iters\": %d, \"agg_iters\": %d, \"check\": %d, \"average\": %d, "
               "\"unalign\": %d, \"blocking\": %d, \"report_cputime\": %d, \"per_iter_timing\": %d, "
               "\"per_iter_skip\": %d},\n",
               o.minBytes, o.maxBytes, o.stepBytes, o.stepFactor, o.iters, o.warmupIters, o.aggIters, o.check,
               o.average, o.unalign, o.blocking, o.reportCpuTime, o.perIterTiming, o.perIterSkip);
  std::fprintf(f, "  \"results\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowResult& r = rows[i];
    std::fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": %s, \"redop\": %s, \"root\": %d, ",
                 i == 0 ? "" : ",", r.bytes, r.count, jsonQuote(r.type).c_str(), jsonQuote(r.op).c_str(), r.root);
    writePlacementJson(f, "out_of_place", r.outOfPlace);
    std::fprintf(f, ", ");
    writePlacementJson(f, "in_place", r.inPlace);
    if (!r.timestamp.empty()) std::fprintf(f, ", \"timestamp\": %s", jsonQuote(r.timestamp).c_str());
    std::fprintf(f, "}");
  }
  std::fprintf(f, "%s],\n", rows.empty() ? "" : "\n  ");
  int64_t wrongTotal = 0;
  for (const RowResult& r : rows) wrongTotal += r.outOfPlace.wrong + r.inPlace.wrong;
  std::fprintf(f, "  \"wrong_total\": %lld,\n", static_cast<long long>(wrongTotal));
  std::fprintf(f, "  \"out_of_bounds\": %lld,\n", static_cast<long long>(failedChecks));
  std::fprintf(f, "  \"avg_busbw_gbps\": %s,\n", jsonNumber(avgBusBw).c_str());
  std::fprintf(f, "  \"status\": \"%s\"\n}\n", failedChecks == 0 ? "OK" : "FAILED");
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace braid::perf
