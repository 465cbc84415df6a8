#include "algorithms/selector/algo_filter.h"

#include <algorithm>
#include <cctype>

namespace braid {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

const char* const kCollNames[kFilterColls] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};

}  // namespace

const char* filterCollName(FilterColl c) {
  return kCollNames[static_cast<int>(c)];
}

const std::vector<std::string>& algoNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int a = 0; a < kAlgos; ++a) v.push_back(algoName(static_cast<AlgoId>(a)));
    return v;
  }();
  return names;
}

const std::vector<std::string>& protoNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int p = 0; p < kProtos; ++p) v.push_back(protoName(static_cast<ProtoId>(p)));
    return v;
  }();
  return names;
}

Result<Filter> parseFilter(const std::string& text, const std::vector<std::string>& names, const char* envName) {
  Filter f;
  f.setting = text;
  if (trim(text).empty()) return f;
  auto bad = [&](const std::string& why) {
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    return invalidUsage(
        "%s=\"%s\": %s (known: %s; collectives: broadcast, reduce, allgather, reducescatter, "
        "allreduce)",
        envName, text.c_str(), why.c_str(), known.c_str());
  };
  const std::vector<std::string> entries = split(text, ';');
  for (size_t e = 0; e < entries.size(); ++e) {
    std::string entry = trim(entries[e]);
    if (entry.empty()) {
      if (e + 1 == entries.size() && e > 0) continue;  // a trailing ';'
      return bad("an empty entry");
    }
    // "func:list" or, for the first entry only, a bare list that sets every collective.
    int coll = -1;
    const size_t colon = entry.find(':');
    if (colon != std::string::npos) {
      const std::string func = lower(trim(entry.substr(0, colon)));
      for (int c = 0; c < kFilterColls; ++c) {
        if (func == kCollNames[c]) coll = c;
      }
      if (coll < 0) return bad("unknown collective '" + func + "'");
      entry = trim(entry.substr(colon + 1));
    } else if (e > 0) {
      return bad("only the first entry may omit 'collective:' ('" + entry + "')");
    }
    bool exclude = false;
    if (!entry.empty() && entry[0] == '^') {
      exclude = true;
      entry = trim(entry.substr(1));
    }
    std::array<bool, 8> set{};
    set.fill(exclude);
    for (const std::string& raw : split(entry, ',')) {
      const std::string token = lower(trim(raw));
      if (token.empty()) return bad("an empty name");
      auto it = std::find_if(names.begin(), names.end(), [&](const std::string& n) { return lower(n) == token; });
      if (it == names.end()) return bad("unknown name '" + trim(raw) + "'");
      set[static_cast<size_t>(it - names.begin())] = !exclude;
    }
    for (int c = 0; c < kFilterColls; ++c) {
      if (coll < 0 || coll == c) f.allowed[static_cast<size_t>(c)] = set;
    }
    if (coll < 0) f.base = set;
  }
  return f;
}

Filter intersectFilters(const Filter& a, const Filter& b, const std::string& source) {
  Filter f;
  f.source = source;
  f.setting = a.setting.empty() ? b.setting : b.setting.empty() ? a.setting : a.setting + "\" and \"" + b.setting;
  for (size_t c = 0; c < f.allowed.size(); ++c) {
    for (size_t i = 0; i < f.allowed[c].size(); ++i) f.allowed[c][i] = a.allowed[c][i] && b.allowed[c][i];
  }
  for (size_t i = 0; i < f.base.size(); ++i) f.base[i] = a.base[i] && b.base[i];
  return f;
}

}  // namespace braid
