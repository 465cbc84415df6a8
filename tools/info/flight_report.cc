#include "tools/info/flight_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "tools/common/json.h"

namespace braid {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// Field readers: a missing or mistyped field is an error naming it.
class Fields {
 public:
  Fields(const JsonValue& obj, std::string where, std::string* error)
      : obj_(obj), where_(std::move(where)), error_(error) {}

  bool str(const char* key, std::string* out, bool nullable = false) {
    const JsonValue* v = obj_.find(key);
    if (v != nullptr && nullable && v->kind == JsonValue::Kind::kNull) return true;
    if (v == nullptr || v->kind != JsonValue::Kind::kString) return fail(key, "a string");
    *out = v->text;
    return true;
  }
  // Integers are read from the literal, so 64-bit values (times in microseconds) stay exact.
  template <class T>
  bool num(const char* key, T* out, bool nullable = false) {
    const JsonValue* v = obj_.find(key);
    if (v != nullptr && nullable && v->kind == JsonValue::Kind::kNull) return true;
    if (v == nullptr || v->kind != JsonValue::Kind::kNumber) return fail(key, "a number");
    char* end = nullptr;
    const long long x = strtoll(v->text.c_str(), &end, 10);
    if (end == v->text.c_str() || *end != '\0') return fail(key, "an integer");
    *out = static_cast<T>(x);
    return true;
  }
  const JsonValue* array(const char* key) {
    const JsonValue* v = obj_.find(key);
    if (v == nullptr || v->kind != JsonValue::Kind::kArray) {
      fail(key, "an array");
      return nullptr;
    }
    return v;
  }

 private:
  bool fail(const char* key, const char* want) {
    *error_ = format("%s: field \"%s\" is missing or not %s", where_.c_str(), key, want);
    return false;
  }
  const JsonValue& obj_;
  std::string where_;
  std::string* error_;
};

bool parseOp(const JsonValue& v, const std::string& where, FlightOp* op, std::string* error) {
  if (v.kind != JsonValue::Kind::kObject) {
    *error = where + ": an operation is not an object";
    return false;
  }
  Fields f(v, where, error);
  const JsonValue* p2pSeq = v.find("p2p_seq");
  op->p2p = p2pSeq != nullptr && p2pSeq->kind == JsonValue::Kind::kNumber;
  return f.num("coll_seq", &op->collSeq) && f.num("p2p_seq", &op->p2pSeq, true) && f.str("fn", &op->fn) &&
         f.num("count", &op->count) && f.str("datatype", &op->datatype) && f.str("op", &op->op, true) &&
         f.num("root", &op->root) && f.num("peer", &op->peer) && f.str("algorithm", &op->algorithm, true) &&
         f.str("protocol", &op->protocol, true) && f.str("state", &op->state) &&
         f.num("queued_us", &op->queuedUs, true) && f.num("started_us", &op->startedUs, true) &&
         f.num("ended_us", &op->endedUs, true);
}

bool unfinished(const FlightOp& op) {
  return op.state != "finished";
}

std::string describeOp(const FlightOp& op) {
  std::string s = op.fn + format("(count %llu, %s", static_cast<unsigned long long>(op.count), op.datatype.c_str());
  if (!op.op.empty()) s += ", " + op.op;
  if (op.root >= 0) s += format(", root %d", op.root);
  if (op.peer >= 0) s += format(", peer %d", op.peer);
  s += ")";
  if (!op.algorithm.empty()) s += " " + op.algorithm + "/" + op.protocol;
  return s;
}

std::string signature(const FlightOp& op) {
  return op.fn + format("(count %llu, %s, %s, root %d)", static_cast<unsigned long long>(op.count), op.datatype.c_str(),
                        op.op.c_str(), op.root);
}

double secondsBefore(int64_t dumpUs, int64_t us) {
  return static_cast<double>(dumpUs - us) / 1e6;
}

std::string rankList(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i == 0 ? "" : ",") + std::to_string(ranks[i]);
  return s;
}

// A rank's earliest collective not finished (its position), or nextCollSeq when all it called finished.
uint64_t firstUnfinished(const FlightComm& c) {
  uint64_t first = c.nextCollSeq;
  for (const FlightOp& op : c.ops) {
    if (!op.p2p && unfinished(op)) first = std::min(first, op.collSeq);
  }
  return first;
}

const FlightOp* collective(const FlightComm& c, uint64_t seq) {
  for (const FlightOp& op : c.ops) {
    if (!op.p2p && op.collSeq == seq) return &op;
  }
  return nullptr;
}

// Where a rank is: in its first unfinished collective, or idle after its last one (and any send/receive in flight).
std::string position(const FlightComm& c) {
  const uint64_t first = firstUnfinished(c);
  std::string s;
  if (first < c.nextCollSeq) {
    const FlightOp* op = collective(c, first);
    s = format("in collective %llu", static_cast<unsigned long long>(first));
    if (op != nullptr) {
      s += " " + describeOp(*op) + ", " + op->state;
      const int64_t since = op->startedUs != 0 ? op->startedUs : op->queuedUs;
      if (since != 0) s += format(" %.1f s before its dump", secondsBefore(c.dumpUs, since));
    }
  } else if (c.nextCollSeq == 0) {
    s = "has called no collective";
  } else {
    const FlightOp* op = collective(c, c.nextCollSeq - 1);
    s = format("idle after collective %llu", static_cast<unsigned long long>(c.nextCollSeq - 1));
    if (op != nullptr) {
      s += " " + describeOp(*op);
      if (op->endedUs != 0) s += format(", finished %.1f s before its dump", secondsBefore(c.dumpUs, op->endedUs));
    }
  }
  for (const FlightOp& op : c.ops) {
    if (op.p2p && unfinished(op)) {
      s += format("; %s %llu %s", op.fn.c_str(), static_cast<unsigned long long>(op.p2pSeq), op.state.c_str());
      s += format(" (peer %d, count %llu)", op.peer, static_cast<unsigned long long>(op.count));
    }
  }
  return s;
}

void reportComm(const std::vector<const FlightComm*>& byRank, int nranks, std::string* out) {
  const FlightComm* any = nullptr;
  std::vector<int> present, missing;
  for (int r = 0; r < nranks; ++r) {
    if (byRank[static_cast<size_t>(r)] != nullptr) {
      present.push_back(r);
      any = byRank[static_cast<size_t>(r)];
    } else {
      missing.push_back(r);
    }
  }
  *out += format("comm %s%s (%d ranks): dumps of %s\n", any->commId.c_str(),
                 any->name.empty() ? "" : (" \"" + any->name + "\"").c_str(), nranks, rankList(present).c_str());
  // The furthest collective some rank waits in.
  bool anyWaiting = false;
  uint64_t wait = 0;
  for (int r : present) {
    const FlightComm& c = *byRank[static_cast<size_t>(r)];
    const uint64_t first = firstUnfinished(c);
    if (first < c.nextCollSeq) {
      wait = anyWaiting ? std::max(wait, first) : first;
      anyWaiting = true;
    }
  }
  if (!anyWaiting) {
    uint64_t most = 0, least = ~uint64_t(0);
    for (int r : present) {
      most = std::max(most, byRank[static_cast<size_t>(r)]->nextCollSeq);
      least = std::min(least, byRank[static_cast<size_t>(r)]->nextCollSeq);
    }
    if (most == least) {
      *out += format("  no collective in flight: every rank with a dump finished all %llu it called\n",
                     static_cast<unsigned long long>(most));
    } else {
      *out += format("  no collective in flight, but the ranks called different numbers (%llu to %llu)\n",
                     static_cast<unsigned long long>(least), static_cast<unsigned long long>(most));
    }
  } else {
    const FlightOp* op = nullptr;
    for (int r : present) {
      if (op == nullptr) op = collective(*byRank[static_cast<size_t>(r)], wait);
    }
    *out += format("  ranks wait in collective %llu%s\n", static_cast<unsigned long long>(wait),
                   op != nullptr ? (": " + describeOp(*op)).c_str() : "");
    std::vector<int> never, inside, past;
    for (int r : present) {
      const FlightComm& c = *byRank[static_cast<size_t>(r)];
      if (c.nextCollSeq <= wait) {
        never.push_back(r);
      } else if (firstUnfinished(c) <= wait) {
        inside.push_back(r);
      } else {
        past.push_back(r);
      }
    }
    *out +=
        format("  never reached collective %llu: %s\n", static_cast<unsigned long long>(wait), rankList(never).c_str());
    for (int r : never) *out += format("    rank %d %s\n", r, position(*byRank[static_cast<size_t>(r)]).c_str());
    *out += format("  in it or before it: %s\n", rankList(inside).c_str());
    for (int r : inside) *out += format("    rank %d %s\n", r, position(*byRank[static_cast<size_t>(r)]).c_str());
    if (!past.empty()) {
      *out += format("  finished it: %s\n", rankList(past).c_str());
      for (int r : past) *out += format("    rank %d %s\n", r, position(*byRank[static_cast<size_t>(r)]).c_str());
    }
  }
  if (!missing.empty()) {
    *out += format("  no dump from %s: stopped, killed, on a host whose dumps are not here, or %s unset there\n",
                   rankList(missing).c_str(), "BRAID_FLIGHT_RECORDER_FILE");
  }
  // Collectives with one number but different calls: the ranks called different things.
  std::map<uint64_t, std::vector<std::pair<int, const FlightOp*>>> bySeq;
  for (int r : present) {
    for (const FlightOp& op : byRank[static_cast<size_t>(r)]->ops) {
      if (!op.p2p) bySeq[op.collSeq].push_back({r, &op});
    }
  }
  int differences = 0;
  for (const auto& e : bySeq) {
    const auto& calls = e.second;
    for (size_t i = 1; i < calls.size(); ++i) {
      if (signature(*calls[i].second) == signature(*calls[0].second)) continue;
      if (differences++ < 3) {
        *out += format("  collective %llu differs: rank %d called %s, rank %d called %s\n",
                       static_cast<unsigned long long>(e.first), calls[0].first, describeOp(*calls[0].second).c_str(),
                       calls[i].first, describeOp(*calls[i].second).c_str());
      }
      break;
    }
  }
  if (differences > 3) *out += format("  (%d more collectives differ)\n", differences - 3);
  bool header = false;
  for (int r : present) {
    const FlightComm& c = *byRank[static_cast<size_t>(r)];
    if (c.error.empty()) continue;
    if (!header) *out += "  errors:\n";
    header = true;
    *out += format("    rank %d (%s pid %d): %s\n", r, c.host.c_str(), c.pid, c.error.c_str());
  }
}

}  // namespace

bool parseFlightDump(const std::string& text, const std::string& file, std::vector<FlightComm>* out,
                     std::string* error) {
  JsonValue root;
  std::string jsonError;
  if (!parseJson(text, &root, &jsonError)) {
    *error = file + ": " + jsonError;
    return false;
  }
  if (root.kind != JsonValue::Kind::kObject || root.find("braid_flight_recorder") == nullptr) {
    *error = file + ": not a braid flight recorder dump (no \"braid_flight_recorder\" field)";
    return false;
  }
  Fields top(root, file, error);
  FlightComm base;
  base.file = file;
  if (!top.str("host", &base.host) || !top.num("pid", &base.pid) || !top.num("time_us", &base.dumpUs) ||
      !top.str("trigger", &base.trigger)) {
    return false;
  }
  const JsonValue* comms = top.array("comms");
  if (comms == nullptr) return false;
  for (size_t i = 0; i < comms->items.size(); ++i) {
    const JsonValue& cv = comms->items[i];
    const std::string where = format("%s: comms[%zu]", file.c_str(), i);
    if (cv.kind != JsonValue::Kind::kObject) {
      *error = where + " is not an object";
      return false;
    }
    Fields f(cv, where, error);
    FlightComm c = base;
    // A record kept from a communicator destroyed before the dump carries the time it was taken.
    if (cv.find("time_us") != nullptr && !f.num("time_us", &c.dumpUs)) return false;
    if (!f.str("comm_id", &c.commId) || !f.str("name", &c.name) || !f.num("rank", &c.rank) ||
        !f.num("nranks", &c.nranks) || !f.num("next_coll_seq", &c.nextCollSeq) || !f.str("error", &c.error, true)) {
      return false;
    }
    if (c.nranks <= 0 || c.nranks > (1 << 20) || c.rank < 0 || c.rank >= c.nranks) {
      *error = format("%s: rank %d of %d ranks is out of range", where.c_str(), c.rank, c.nranks);
      return false;
    }
    const JsonValue* ops = f.array("ops");
    if (ops == nullptr) return false;
    for (size_t k = 0; k < ops->items.size(); ++k) {
      FlightOp op;
      if (!parseOp(ops->items[k], format("%s.ops[%zu]", where.c_str(), k), &op, error)) return false;
      c.ops.push_back(std::move(op));
    }
    out->push_back(std::move(c));
  }
  return true;
}

std::string flightReport(const std::vector<FlightComm>& comms) {
  if (comms.empty()) return "no communicators in the dumps\n";
  std::map<std::string, std::vector<const FlightComm*>> byId;
  for (const FlightComm& c : comms) byId[c.commId].push_back(&c);
  std::string out;
  for (const auto& e : byId) {
    int nranks = 0;
    for (const FlightComm* c : e.second) nranks = std::max(nranks, c->nranks);
    std::vector<const FlightComm*> byRank(static_cast<size_t>(nranks), nullptr);
    for (const FlightComm* c : e.second) {
      const FlightComm*& slot = byRank[static_cast<size_t>(c->rank)];
      if (slot == nullptr || c->dumpUs > slot->dumpUs) slot = c;
    }
    if (!out.empty()) out += "\n";
    reportComm(byRank, nranks, &out);
  }
  return out;
}

}  // namespace braid
