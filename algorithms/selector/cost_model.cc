#include "algorithms/selector/cost_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

namespace braid {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int findName(const std::vector<std::string>& names, const std::string& token) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (lower(names[i]) == lower(token)) return static_cast<int>(i);
  }
  return -1;
}

int findColl(const std::string& token) {
  for (int c = 0; c < kFilterColls; ++c) {
    if (lower(token) == filterCollName(static_cast<FilterColl>(c))) return c;
  }
  return -1;
}

// LL against Simple on the same path (measured on the 2-core host; docs/perf.md).
constexpr double kLlAlphaFactor = 0.92;  // 2 processes, 8-512 B ring: 1.62 vs 1.73 us (1.09 vs 1.32 at 8 B)
constexpr double kLlAlphaFactorOversubscribed = 1.5;  // 4 processes on 2 cores: 19.2 vs 12.9 us
constexpr double kLlBetaFactor = 0.33;                // 32 KB, 2 processes: 18.9 vs 6.5 us
// All-to-all, fitted to perf/algo_regret on the 2-core host (docs/algorithms.md): with a core per rank, per
// message (pairwise) or round (Bruck) and GB/s of bytes moved; with r = ranks / CPUs > 1, pairwise messages cost
// 2.65 r us and Bruck rounds 0.49 r^2.5 us (the dependent rounds wait for descheduled peers), and Bruck's bandwidth
// falls as 2.6 (2 / r)^1.8 GB/s.
constexpr double kPairwiseMsgUs = 1.8;
constexpr double kPairwiseGBps = 2.8;
constexpr double kPairwiseGBpsOversubscribed = 1.0;
constexpr double kBruckRoundUs = 1.7;
constexpr double kBruckGBps = 3.7;

int log2Ceil(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

// Dependent steps of one operation: what alpha scales with when a cost is carried to another rank count. Reduce
// and broadcast go one way (a chain or a tree), the others there and back.
double steps(FilterColl coll, AlgoId algo, int nranks) {
  const int n = std::max(nranks, 1);
  const double ways = coll == FilterColl::kReduce || coll == FilterColl::kBroadcast ? 1.0 : 2.0;
  switch (algo) {
    case AlgoId::kTree:
      return ways * std::max(1, log2Ceil(n + 1));
    case AlgoId::kNvls:
      return 2.0;
    default:
      return ways * std::max(1, n - 1);
  }
}

AlgoCost builtIn(FilterColl coll, AlgoId algo, ProtoId proto, int nranks, int cpus) {
  const bool oversubscribed = nranks > std::max(cpus, 1);
  const double hop = oversubscribed ? 1.8 : 0.6;
  AlgoCost c;
  switch (algo) {
    case AlgoId::kTree:
      c = AlgoCost{steps(coll, algo, nranks) * (oversubscribed ? 1.1 : 0.5), 1.0};
      break;
    case AlgoId::kNvls:
      c = AlgoCost{oversubscribed ? 3.5 : 0.45, oversubscribed ? 3.5 : 6.0};
      break;
    default:
      c = AlgoCost{steps(coll, algo, nranks) * hop, oversubscribed ? 2.0 : 3.2};
      break;
  }
  if (proto == ProtoId::kLL) {
    // LL: no tail counter to bounce per hop, but half of every line is flag and every word is checked. Measured on
    // the 2-core host: a little faster per hop with a core per rank, slower when ranks outnumber cores.
    c.alphaUs *= oversubscribed ? kLlAlphaFactorOversubscribed : kLlAlphaFactor;
    c.betaGBps *= kLlBetaFactor;
  }
  return c;
}

// Keys of the all-to-all entries: a collective index past NCCL's five.
constexpr int kAlltoAllColl = kFilterColls;

int findAlltoAllAlgo(const std::string& token) {
  for (AlltoAllAlgo a : {AlltoAllAlgo::kPairwise, AlltoAllAlgo::kBruck}) {
    if (lower(token) == alltoAllAlgoName(a)) return static_cast<int>(a);
  }
  return -1;
}

// Per rank: pairwise posts n - 1 sends and receives that all progress together, one message cost each; Bruck
// waits for ceil(log2 n) dependent rounds but moves about log2(n) / 2 times the bytes, packed and unpacked.
AlgoCost builtInAlltoAll(AlltoAllAlgo algo, int nranks, int cpus) {
  const int n = std::max(nranks, 2);
  const double r = static_cast<double>(n) / std::max(cpus, 1);
  const bool oversubscribed = r > 1;
  if (algo == AlltoAllAlgo::kPairwise) {
    return AlgoCost{(n - 1) * (oversubscribed ? 2.65 * r : kPairwiseMsgUs),
                    oversubscribed ? kPairwiseGBpsOversubscribed : kPairwiseGBps};
  }
  const double rounds = log2Ceil(n);
  if (!oversubscribed) return AlgoCost{rounds * kBruckRoundUs, kBruckGBps};
  return AlgoCost{rounds * 0.49 * std::pow(r, 2.5), 2.6 * std::pow(2.0 / r, 1.8)};
}

// Bytes a rank moves: each of n - 1 blocks once (pairwise), or its packs in every round (Bruck).
double alltoAllBytes(AlltoAllAlgo algo, int nranks, size_t bytesPerPeer) {
  const int n = std::max(nranks, 1);
  if (algo == AlltoAllAlgo::kPairwise) return static_cast<double>(bytesPerPeer) * (n - 1);
  double blocks = 0;
  for (int k = 0; (1 << k) < n; ++k) {
    for (int j = 1; j < n; ++j) blocks += (j >> k) & 1;
  }
  return static_cast<double>(bytesPerPeer) * blocks;
}

}  // namespace

const char* alltoAllAlgoName(AlltoAllAlgo a) {
  return a == AlltoAllAlgo::kBruck ? "bruck" : "pairwise";
}

double CostModel::predictAlltoAllUs(AlltoAllAlgo algo, int nranks, int cpus, size_t bytesPerPeer) const {
  AlgoCost c = builtInAlltoAll(algo, nranks, cpus);
  int bestDistance = -1;
  for (const auto& [key, cost] : costs_) {
    if (std::get<0>(key) != kAlltoAllColl || std::get<1>(key) != static_cast<int>(algo)) continue;
    const int distance = std::abs(std::get<3>(key) - nranks);
    if (bestDistance >= 0 && distance >= bestDistance) continue;
    bestDistance = distance;
    const int from = std::max(std::get<3>(key), 2), to = std::max(nranks, 2);
    const double scale =
        algo == AlltoAllAlgo::kPairwise ? double(to - 1) / (from - 1) : double(log2Ceil(to)) / log2Ceil(from);
    c = AlgoCost{cost.alphaUs * scale, cost.betaGBps};
  }
  return c.alphaUs + alltoAllBytes(algo, nranks, bytesPerPeer) / (c.betaGBps * 1e3);
}

int CostModel::pinnedAlltoAll(size_t bytesPerPeer) const {
  for (const Pin& p : pins_) {
    if (p.coll == kAlltoAllColl && bytesPerPeer >= p.minBytes && bytesPerPeer <= p.maxBytes) return p.algo;
  }
  return -1;
}

Result<CostModel> CostModel::load(const std::string& path) {
  std::ifstream file(path);
  if (!file) return invalidArgument("BRAID_TUNING_FILE=%s cannot be read", path.c_str());
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse(text, path);
}

Result<CostModel> CostModel::parse(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  CostModel m;
  m.source_ = path;
  m.contentHash_ = std::hash<std::string>()(text);
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    auto bad = [&](const std::string& why) {
      return invalidArgument("BRAID_TUNING_FILE=%s line %d: %s", path.c_str(), lineNo, why.c_str());
    };
    std::string collName, algoName;
    if (lower(kind) == "cost") {
      int nranks = 0;
      double alpha = -1, beta = -1;
      std::string third;
      if (!(words >> collName >> algoName >> third)) {
        return bad("expected 'cost <collective> <algorithm> [<protocol>] <ranks> <alpha us> <beta GB/s>'");
      }
      int proto = findName(protoNames(), third);
      std::istringstream ranksWord(third);
      if (proto >= 0 ? !(words >> nranks) : !(ranksWord >> nranks)) {
        return bad("expected 'cost <collective> <algorithm> [<protocol>] <ranks> <alpha us> <beta GB/s>'");
      }
      if (proto < 0) proto = static_cast<int>(ProtoId::kSimple);
      if (!(words >> alpha >> beta)) {
        return bad("expected 'cost <collective> <algorithm> [<protocol>] <ranks> <alpha us> <beta GB/s>'");
      }
      const bool a2a = lower(collName) == "alltoall";
      const int coll = a2a ? kAlltoAllColl : findColl(collName);
      const int algo = a2a ? findAlltoAllAlgo(algoName) : findName(algoNames(), algoName);
      if (coll < 0) return bad("unknown collective '" + collName + "'");
      if (algo < 0) return bad("unknown algorithm '" + algoName + "'" + (a2a ? " (alltoall: pairwise or bruck)" : ""));
      if (nranks < 1 || !(alpha >= 0) || !(beta > 0)) return bad("ranks >= 1, alpha >= 0 and beta > 0 are required");
      m.costs_[{coll, algo, proto, nranks}] = AlgoCost{alpha, beta};
    } else if (lower(kind) == "pin") {
      unsigned long long lo = 0, hi = 0;
      if (!(words >> collName >> lo >> hi >> algoName)) {
        return bad("expected 'pin <collective> <min bytes> <max bytes> <algorithm> [<protocol>]'");
      }
      const bool a2a = lower(collName) == "alltoall";
      const int coll = a2a ? kAlltoAllColl : findColl(collName);
      const int algo = a2a ? findAlltoAllAlgo(algoName) : findName(algoNames(), algoName);
      if (coll < 0) return bad("unknown collective '" + collName + "'");
      if (algo < 0) return bad("unknown algorithm '" + algoName + "'" + (a2a ? " (alltoall: pairwise or bruck)" : ""));
      if (hi < lo) return bad("max bytes is below min bytes");
      int proto = -1;
      std::string protoName;
      if (words >> protoName) {
        proto = findName(protoNames(), protoName);
        if (proto < 0) return bad("unknown protocol '" + protoName + "'");
      }
      m.pins_.push_back(Pin{coll, static_cast<size_t>(lo), static_cast<size_t>(hi), algo, proto});
    } else if (lower(kind) == "net") {
      double alpha = -1, gbps = -1;
      if (!(words >> alpha >> gbps)) return bad("expected 'net <alpha us> <GB/s>'");
      if (!(alpha >= 0) || !(gbps > 0)) return bad("net: alpha >= 0 and GB/s > 0 are required");
      m.hasNet_ = true;
      m.net_ = AlgoCost{alpha, gbps};
    } else {
      return bad("unknown entry '" + kind + "' (cost, pin or net)");
    }
    std::string extra;
    if (words >> extra) return bad("unexpected '" + extra + "'");
  }
  return m;
}

double CostModel::predictUs(FilterColl coll, AlgoId algo, ProtoId proto, int nranks, int cpus, size_t bytes) const {
  AlgoCost c = builtIn(coll, algo, proto, nranks, cpus);
  // The measured entry for the nearest rank count, its alpha carried by the step count.
  int bestDistance = -1;
  for (const auto& [key, cost] : costs_) {
    if (std::get<0>(key) != static_cast<int>(coll) || std::get<1>(key) != static_cast<int>(algo) ||
        std::get<2>(key) != static_cast<int>(proto)) {
      continue;
    }
    const int distance = std::abs(std::get<3>(key) - nranks);
    if (bestDistance >= 0 && distance >= bestDistance) continue;
    bestDistance = distance;
    c = cost;
    c.alphaUs = cost.alphaUs * steps(coll, algo, nranks) / steps(coll, algo, std::get<3>(key));
  }
  return c.alphaUs + static_cast<double>(bytes) / (c.betaGBps * 1e3);
}

double CostModel::predictAcrossHostsUs(FilterColl coll, AlgoId algo, ProtoId proto, int nranks, const NetShape& net,
                                       size_t bytes) const {
  const double n = nranks;
  // LL: an LL chunk crosses the network as one message in the Simple slot, a sixteenth of Simple's, and smaller
  // messages move fewer bytes per second (2 hosts x 1 rank, 2 MB all-reduce: Socket 2.74 ms LL against 2.44
  // Simple, OFI-tcp 12.0 against 3.3). So LL gets no latency gain across hosts and LL's bandwidth factor on every
  // byte: the model keeps Simple, and NCCL_PROTO=LL still forces LL.
  const bool ll = proto == ProtoId::kLL;
  const double perByteUs =
      1.0 / (std::min(net.link.betaGBps, net.localRanks > 1 ? net.hostGBps : 1e9) * 1e3) / (ll ? kLlBetaFactor : 1.0);
  const double b = static_cast<double>(bytes);
  int depth = 0;
  while ((1 << depth) < net.nNodes) ++depth;
  const double chain = std::max(0, net.localRanks - 1);
  const bool tree = algo == AlgoId::kTree;
  // A ring visits a host's ranks together, so a block's n - 1 hops cross a host boundary at most nNodes times: the
  // slowest block (the one that starts at a host's last rank) pays min(nNodes, n - 1) network hops per pass and
  // host hops for the rest. NCCL's model counts nNodes - 1 per pass, the fastest block's; between namespaces with
  // a 1 ms delay (2 hosts x 2 ranks) a 128 KB ring took 3.9 ms, nearer 4 network hops than 2.
  const double netHops = std::min(static_cast<double>(net.nNodes), n - 1);
  const double ringPassUs = netHops * net.link.alphaUs + (n - 1 - netHops) * net.hostHopUs;
  switch (coll) {
    case FilterColl::kAllReduce:
      if (tree) return 2 * (depth * net.link.alphaUs + chain * net.hostHopUs) + 2 * b * perByteUs;
      return 2 * ringPassUs + 2 * (n - 1) / n * b * perByteUs;
    case FilterColl::kBroadcast:
    case FilterColl::kReduce: {
      // The rooted trees are binary over the ring order: log2(n) levels, each of which may cross hosts.
      int levels = 0;
      while ((1 << levels) < nranks) ++levels;
      if (tree) return levels * std::max(net.link.alphaUs, net.hostHopUs) + 2 * b * perByteUs;
      return ringPassUs + b * perByteUs;
    }
    case FilterColl::kAllGather:
    case FilterColl::kReduceScatter:
      return ringPassUs + (n - 1) * b * perByteUs;
  }
  return 0;
}

bool CostModel::pinsAlgorithm(FilterColl coll, int algo) const {
  return std::any_of(pins_.begin(), pins_.end(),
                     [&](const Pin& p) { return p.coll == static_cast<int>(coll) && p.algo == algo; });
}

int CostModel::pinned(FilterColl coll, size_t bytes, int* proto) const {
  for (const Pin& p : pins_) {
    if (p.coll == static_cast<int>(coll) && bytes >= p.minBytes && bytes <= p.maxBytes) {
      if (proto != nullptr) *proto = p.proto;
      return p.algo;
    }
  }
  if (proto != nullptr) *proto = -1;
  return -1;
}

}  // namespace braid
