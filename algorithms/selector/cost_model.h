// The selector's cost model: predicted time = alpha + bytes / beta per (collective, algorithm, protocol, rank
// count), with pins that force an algorithm (and optionally a protocol) for a size range. Built-in figures come
// from measurements on a 2-core host (see docs/perf.md); `perf/calibrate` measures the machine it runs on and
// writes a file the library loads with BRAID_TUNING_FILE:
//
//   # comments and blank lines are ignored
//   cost allreduce ring 4 12.5 1.8      collective, algorithm, [protocol,] ranks, alpha (us), beta (GB/s of the
//   cost allreduce ring ll 4 8.0 0.9    buffer size); no protocol means Simple
//   pin allreduce 0 65536 tree          collective, min and max bytes (inclusive), algorithm [, protocol]
//   pin allgather 0 4096 ring ll
//
// Across hosts the network dominates: "net <alpha us> <GB/s>" gives one host-to-host message's latency and a
// link's bandwidth (otherwise the communicator measures the latency at init and takes the bandwidth from the
// network device's speed), and predictAcrossHostsUs models each algorithm's network hops and bytes.
//
// All-to-all is braid's own entry (NCCL_ALGO has no name for it): "cost alltoall pairwise|bruck <ranks> <alpha>
// <beta>" and "pin alltoall <min> <max> pairwise|bruck", with bytes per peer (NCCL's count x type size).
//
// Collective, algorithm and protocol names are NCCL_ALGO's and NCCL_PROTO's (case-insensitive). A cost line
// applies to its rank count; for other counts the nearest measured count is scaled (alpha by the algorithm's step
// count, beta kept). Pins are honoured only when NCCL_ALGO / NCCL_PROTO allow them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/selector/algo_filter.h"
#include "src/common/status.h"

namespace braid {

// All-to-all schedules: every pair at once (n - 1 messages each way), or log2(n) packed rounds (Bruck).
enum class AlltoAllAlgo { kPairwise, kBruck };
const char* alltoAllAlgoName(AlltoAllAlgo a);

struct AlgoCost {
  double alphaUs = 0;
  double betaGBps = 1;
};

// A communicator spanning hosts, as the model sees it.
struct NetShape {
  int nNodes = 1;
  int localRanks = 1;     // the most ranks on one host
  AlgoCost link;          // one message across the network: latency, and a host-to-host link's bandwidth
  double hostHopUs = 1;   // one hop between ranks of a host
  double hostGBps = 3.2;  // a hop's bandwidth between ranks of a host (Simple)
};

class CostModel {
 public:
  CostModel() = default;
  // Parses a tuning file; errors name the file, the line and the token.
  static Result<CostModel> load(const std::string& path);
  // The same from the file's text; `path` names it in errors.
  static Result<CostModel> parse(const std::string& text, const std::string& path);

  // Predicted microseconds for `bytes` (NCCL's count x type size) of `coll` with `algo` and `proto` over
  // `nranks` ranks.
  double predictUs(FilterColl coll, AlgoId algo, ProtoId proto, int nranks, int cpus, size_t bytes) const;
  // The same for a communicator over net.nNodes > 1 hosts (Simple protocol: the network carries nothing else).
  // Ring: every one of its steps waits for a network hop somewhere in the ring, and each link carries the ring's
  // bytes. Tree (NCCL's double binary tree over hosts, chains inside): 2 x (log2 hosts network hops + the chain's
  // host hops), and a host's link carries 2 x the bytes (an interior rank of one tree sends up and to two
  // children, and it is a leaf of the other).
  // Bytes flow at the slower of the network and a host hop. LL pays LL's bandwidth factor on every byte and gains
  // no latency (its chunks cross the network as small whole messages): measured slower, never the model's choice.
  double predictAcrossHostsUs(FilterColl coll, AlgoId algo, ProtoId proto, int nranks, const NetShape& net,
                              size_t bytes) const;
  // The file's "net" line, if it has one.
  bool hasNetFigures() const { return hasNet_; }
  const AlgoCost& netFigures() const { return net_; }

  // Whether some pin forces `algo` for `coll` (at any size).
  bool pinsAlgorithm(FilterColl coll, int algo) const;
  // The algorithm a pin forces for this size, or -1; *proto (if given) gets the pinned protocol or -1.
  int pinned(FilterColl coll, size_t bytes, int* proto = nullptr) const;
  // All-to-all with `bytesPerPeer` to each of nranks - 1 peers.
  double predictAlltoAllUs(AlltoAllAlgo algo, int nranks, int cpus, size_t bytesPerPeer) const;
  int pinnedAlltoAll(size_t bytesPerPeer) const;  // an AlltoAllAlgo, or -1
  const std::string& source() const { return source_; }
  // A hash of the file's text (0 for the built-in figures): ranks compare it to be sure they share one model.
  uint64_t contentHash() const { return contentHash_; }

 private:
  std::map<std::tuple<int, int, int, int>, AlgoCost> costs_;  // (coll, algo, proto, nranks)
  struct Pin {
    int coll;
    size_t minBytes, maxBytes;
    int algo;
    int proto;  // -1: any
  };
  std::vector<Pin> pins_;
  bool hasNet_ = false;
  AlgoCost net_;
  std::string source_ = "built-in";
  uint64_t contentHash_ = 0;
};

}  // namespace braid
