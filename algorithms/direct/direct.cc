#include "algorithms/direct/direct.h"

#include <algorithm>
#include <utility>

namespace braid {
namespace {

// Rank r's share of `count` elements split as evenly as possible: the first count % n ranks get one more.
void sliceOf(size_t count, int nranks, int rank, size_t* begin, size_t* len) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t r = static_cast<size_t>(rank);
  const size_t base = count / n;
  const size_t extra = count % n;
  *begin = r * base + (r < extra ? r : extra);
  *len = base + (r < extra ? 1 : 0);
}

}  // namespace

std::vector<DirectStep> buildDirectProgram(DirectCollective coll, int nranks, int rank, size_t count) {
  std::vector<DirectStep> steps;
  buildDirectProgram(coll, nranks, rank, count, &steps);
  return steps;
}

void buildDirectProgram(DirectCollective coll, int nranks, int rank, size_t count, std::vector<DirectStep>* out) {
  std::vector<DirectStep>& steps = *out;
  steps.clear();
  switch (coll) {
    case DirectCollective::kAllReduceOneShot:
      // Every rank reduces the whole vector for itself: one read of each peer, no second pass.
      if (count > 0) steps.push_back(DirectStep{DirectKind::kReduce, -1, 0, count, rank, 0});
      break;
    case DirectCollective::kAllReduceTwoShot: {
      // Rank r reduces slice r and stores it into every rank's output (reduce-scatter + all-gather in one pass).
      size_t begin = 0, len = 0;
      sliceOf(count, nranks, rank, &begin, &len);
      if (len > 0) steps.push_back(DirectStep{DirectKind::kReduce, -1, begin, len, -1, begin});
      break;
    }
    case DirectCollective::kReduceScatter:
      if (count > 0) {
        steps.push_back(DirectStep{DirectKind::kReduce, -1, static_cast<size_t>(rank) * count, count, rank, 0});
      }
      break;
    case DirectCollective::kAllGather:
      // Each rank stores its own block into every rank's output.
      if (count > 0) {
        steps.push_back(DirectStep{DirectKind::kCopy, rank, 0, count, -1, static_cast<size_t>(rank) * count});
      }
      break;
  }
}

}  // namespace braid

namespace braid {
namespace {

const char* directName(DirectCollective c) {
  switch (c) {
    case DirectCollective::kAllReduceOneShot:
      return "one-shot all-reduce";
    case DirectCollective::kAllReduceTwoShot:
      return "two-shot all-reduce";
    case DirectCollective::kReduceScatter:
      return "reduce-scatter";
    case DirectCollective::kAllGather:
      return "all-gather";
  }
  return "?";
}

// A symbolic value: the (rank, send-buffer element) pairs summed into it.
using Terms = std::vector<std::pair<int, size_t>>;

}  // namespace

Status checkDirectSchedule(DirectCollective coll, int nranks, size_t count) {
  std::vector<std::vector<DirectStep>> programs;
  for (int r = 0; r < nranks; ++r) programs.push_back(buildDirectProgram(coll, nranks, r, count));
  return checkDirectPrograms(coll, nranks, count, programs);
}

Status checkDirectPrograms(DirectCollective coll, int nranks, size_t count,
                           const std::vector<std::vector<DirectStep>>& programs) {
  if (nranks < 1 || programs.size() != static_cast<size_t>(nranks)) {
    return internalError("expected programs for %d ranks, got %zu", nranks, programs.size());
  }
  const size_t n = static_cast<size_t>(nranks);
  const bool blocked = coll == DirectCollective::kReduceScatter || coll == DirectCollective::kAllGather;
  const size_t sendCount = coll == DirectCollective::kReduceScatter ? count * n : count;
  const size_t recvCount = coll == DirectCollective::kAllGather ? count * n : count;
  std::vector<std::vector<Terms>> out(n, std::vector<Terms>(recvCount));
  std::vector<std::vector<int>> writes(n, std::vector<int>(recvCount, 0));
  for (int r = 0; r < nranks; ++r) {
    for (const DirectStep& s : programs[static_cast<size_t>(r)]) {
      // Written so that huge offsets cannot wrap around and pass.
      if (s.srcOffset > sendCount || s.count > sendCount - s.srcOffset || s.dstOffset > recvCount ||
          s.count > recvCount - s.dstOffset ||
          (s.kind == DirectKind::kCopy && (s.srcRank < 0 || s.srcRank >= nranks))) {
        return internalError("%s n=%d count=%zu: rank %d's step [%zu,+%zu) -> [%zu,+%zu) leaves the buffers",
                             directName(coll), nranks, count, r, s.srcOffset, s.count, s.dstOffset, s.count);
      }
      for (size_t i = 0; i < s.count; ++i) {
        Terms value;
        if (s.kind == DirectKind::kReduce) {
          for (int p = 0; p < nranks; ++p) value.emplace_back(p, s.srcOffset + i);
        } else {
          value.emplace_back(s.srcRank, s.srcOffset + i);
        }
        for (int d = 0; d < nranks; ++d) {
          if (s.dstRank != -1 && s.dstRank != d) continue;
          out[d][s.dstOffset + i] = value;
          ++writes[d][s.dstOffset + i];
        }
      }
    }
  }
  for (int d = 0; d < nranks; ++d) {
    for (size_t i = 0; i < recvCount; ++i) {
      if (writes[d][i] != 1) {
        return internalError("%s n=%d count=%zu: rank %d element %zu written %d times", directName(coll), nranks, count,
                             d, i, writes[d][i]);
      }
      Terms want;
      if (coll == DirectCollective::kAllGather) {
        want.emplace_back(static_cast<int>(i / count), i % count);
      } else {
        const size_t src = coll == DirectCollective::kReduceScatter ? static_cast<size_t>(d) * count + i : i;
        for (int p = 0; p < nranks; ++p) want.emplace_back(p, src);
      }
      if (out[d][i] != want) {
        return internalError("%s n=%d count=%zu: rank %d element %zu holds the wrong contributions%s", directName(coll),
                             nranks, count, d, i, blocked ? " (block misplaced?)" : "");
      }
    }
  }
  return Status::ok();
}

}  // namespace braid
