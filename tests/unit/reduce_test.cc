// Checks reduceInto / copyLocal / copyPost for every dtype x op against a straightforward per-element reference,
// over several sizes, misaligned buffers, and in-place use (dst == peer, dst == local, dst == src).
#include "src/backends/cpu/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "src/common/dtype.h"

// The reference must round x * s before adding, exactly like the library.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace braid {
namespace {

constexpr OpKind kAllOps[] = {OpKind::kSum, OpKind::kProd, OpKind::kMax,
                              OpKind::kMin, OpKind::kAvg,  OpKind::kPreMulSum};
constexpr size_t kSizes[] = {0, 1, 7, 1023, 4099};
constexpr int kNranks = 3;

const char* opName(OpKind k) {
  switch (k) {
    case OpKind::kSum:
      return "sum";
    case OpKind::kProd:
      return "prod";
    case OpKind::kMax:
      return "max";
    case OpKind::kMin:
      return "min";
    case OpKind::kAvg:
      return "avg";
    case OpKind::kPreMulSum:
      return "premulsum";
  }
  return "?";
}

bool isNarrowFloat(DType t) {
  return t == DType::kFloat16 || t == DType::kBfloat16 || t == DType::kFp8E4M3 || t == DType::kFp8E5M2;
}

// ---- Reference element functions. Values travel as uint64_t holding the element's bytes. ----

template <typename T>
T fromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
template <typename T>
uint64_t toBits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

// Integers: wrap in 64-bit unsigned arithmetic, then truncate to the element width (two's complement).
template <typename T>
uint64_t refInt(OpKind k, uint64_t pb, uint64_t lb, uint64_t sb, bool post) {
  const T p = fromBits<T>(pb), l = fromBits<T>(lb), s = fromBits<T>(sb);
  // Conversion to uint64_t is modular, so 64-bit unsigned arithmetic truncated back to T is wrap-around arithmetic.
  const uint64_t up = static_cast<uint64_t>(p), ul = static_cast<uint64_t>(l), us = static_cast<uint64_t>(s);
  T r;
  switch (k) {
    case OpKind::kProd:
      r = static_cast<T>(up * ul);
      break;
    case OpKind::kMax:
      r = p > l ? p : l;
      break;
    case OpKind::kMin:
      r = p < l ? p : l;
      break;
    case OpKind::kPreMulSum: {
      const T pre = static_cast<T>(ul * us);
      r = static_cast<T>(up + static_cast<uint64_t>(pre));
      break;
    }
    default:
      r = static_cast<T>(up + ul);
      break;
  }
  if (k == OpKind::kAvg && post) {
    if (std::is_unsigned<T>::value) {
      r = static_cast<T>(static_cast<uint64_t>(r) / kNranks);
    } else {
      r = static_cast<T>(static_cast<int64_t>(r) / kNranks);  // truncates toward zero
    }
  }
  return toBits(r);
}

// fmax/fmin semantics: a NaN operand is ignored unless both are NaN (then the local operand's NaN).
template <typename V>
bool refPickLocalForMax(V p, V l) {
  if (std::isnan(p)) return true;
  if (std::isnan(l)) return false;
  return l > p;
}
template <typename V>
bool refPickLocalForMin(V p, V l) {
  if (std::isnan(p)) return true;
  if (std::isnan(l)) return false;
  return l < p;
}

template <typename T>
uint64_t refFloat(OpKind k, uint64_t pb, uint64_t lb, uint64_t sb, bool post) {
  const T p = fromBits<T>(pb), l = fromBits<T>(lb), s = fromBits<T>(sb);
  T r;
  switch (k) {
    case OpKind::kProd:
      r = p * l;
      break;
    case OpKind::kMax:
      r = refPickLocalForMax(p, l) ? l : p;
      break;
    case OpKind::kMin:
      r = refPickLocalForMin(p, l) ? l : p;
      break;
    case OpKind::kPreMulSum: {
      const T pre = l * s;
      r = p + pre;
      break;
    }
    default:
      r = p + l;
      break;
  }
  if (k == OpKind::kAvg && post) r = r / static_cast<T>(kNranks);
  return toBits(r);
}

// Narrow floats: exact arithmetic in double on the decoded values (sums and products of two narrow values are exact
// in double), then one round to the format. double -> float -> narrow is a single correct rounding here because
// float carries more than 2p+2 bits for every narrow format (and double more than 2*24+2 for the division).
struct NarrowCodec {
  float (*toF)(uint64_t);
  uint64_t (*fromF)(float);
};
template <typename S, float (*kTo)(S), S (*kFrom)(float)>
NarrowCodec makeCodec() {
  return {[](uint64_t b) { return kTo(static_cast<S>(b)); }, [](float f) { return static_cast<uint64_t>(kFrom(f)); }};
}

uint64_t refNarrow(const NarrowCodec& c, OpKind k, uint64_t pb, uint64_t lb, uint64_t sb, bool post) {
  auto round = [&](double x) { return c.fromF(static_cast<float>(x)); };
  const double p = c.toF(pb), l = c.toF(lb), s = c.toF(sb);
  uint64_t r;
  switch (k) {
    case OpKind::kProd:
      r = round(p * l);
      break;
    case OpKind::kMax:
      r = refPickLocalForMax(p, l) ? lb : pb;
      break;
    case OpKind::kMin:
      r = refPickLocalForMin(p, l) ? lb : pb;
      break;
    case OpKind::kPreMulSum:
      r = round(p + static_cast<double>(c.toF(round(l * s))));
      break;
    default:
      r = round(p + l);
      break;
  }
  if (k == OpKind::kAvg && post) r = round(static_cast<double>(c.toF(r)) / kNranks);
  return r;
}

NarrowCodec codecFor(DType t) {
  switch (t) {
    case DType::kFloat16:
      return makeCodec<uint16_t, halfToFloat, floatToHalf>();
    case DType::kBfloat16:
      return makeCodec<uint16_t, bf16ToFloat, floatToBf16>();
    case DType::kFp8E4M3:
      return makeCodec<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3>();
    default:
      return makeCodec<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2>();
  }
}

// The reference for pre-then-combine-then-post of one element: peer (op) pre(local).
uint64_t refReduce(DType t, OpKind k, uint64_t p, uint64_t l, uint64_t s, bool post) {
  switch (t) {
    case DType::kInt8:
      return refInt<int8_t>(k, p, l, s, post);
    case DType::kUint8:
      return refInt<uint8_t>(k, p, l, s, post);
    case DType::kInt32:
      return refInt<int32_t>(k, p, l, s, post);
    case DType::kUint32:
      return refInt<uint32_t>(k, p, l, s, post);
    case DType::kInt64:
      return refInt<int64_t>(k, p, l, s, post);
    case DType::kUint64:
      return refInt<uint64_t>(k, p, l, s, post);
    case DType::kFloat32:
      return refFloat<float>(k, p, l, s, post);
    case DType::kFloat64:
      return refFloat<double>(k, p, l, s, post);
    default:
      return refNarrow(codecFor(t), k, p, l, s, post);
  }
}

// pre(x) alone and post(x) alone, for copyLocal / copyPost.
uint64_t refPre(DType t, OpKind k, uint64_t x, uint64_t s) {
  if (k != OpKind::kPreMulSum) return x;
  switch (t) {
    case DType::kInt8:
      return toBits(static_cast<int8_t>(fromBits<uint8_t>(x) * fromBits<uint8_t>(s)));
    case DType::kUint8:
      return toBits(static_cast<uint8_t>(fromBits<uint8_t>(x) * fromBits<uint8_t>(s)));
    case DType::kInt32:
    case DType::kUint32:
      return toBits(static_cast<uint32_t>(fromBits<uint32_t>(x) * fromBits<uint32_t>(s)));
    case DType::kInt64:
    case DType::kUint64:
      return x * s;
    case DType::kFloat32:
      return toBits(fromBits<float>(x) * fromBits<float>(s));
    case DType::kFloat64:
      return toBits(fromBits<double>(x) * fromBits<double>(s));
    default: {
      const NarrowCodec c = codecFor(t);
      return c.fromF(static_cast<float>(static_cast<double>(c.toF(x)) * c.toF(s)));
    }
  }
}

uint64_t refPost(DType t, OpKind k, uint64_t x, bool post) {
  if (k != OpKind::kAvg || !post) return x;
  switch (t) {
    case DType::kInt8:
      return toBits(static_cast<int8_t>(fromBits<int8_t>(x) / kNranks));
    case DType::kUint8:
      return toBits(static_cast<uint8_t>(fromBits<uint8_t>(x) / kNranks));
    case DType::kInt32:
      return toBits(static_cast<int32_t>(fromBits<int32_t>(x) / kNranks));
    case DType::kUint32:
      return toBits(static_cast<uint32_t>(fromBits<uint32_t>(x) / kNranks));
    case DType::kInt64:
      return toBits(static_cast<int64_t>(fromBits<int64_t>(x) / kNranks));
    case DType::kUint64:
      return x / kNranks;
    case DType::kFloat32:
      return toBits(fromBits<float>(x) / static_cast<float>(kNranks));
    case DType::kFloat64:
      return toBits(fromBits<double>(x) / static_cast<double>(kNranks));
    default: {
      const NarrowCodec c = codecFor(t);
      return c.fromF(static_cast<float>(static_cast<double>(c.toF(x)) / kNranks));
    }
  }
}

bool isNanBits(DType t, uint64_t b) {
  switch (t) {
    case DType::kFloat32:
      return std::isnan(fromBits<float>(b));
    case DType::kFloat64:
      return std::isnan(fromBits<double>(b));
    default:
      return isNarrowFloat(t) && std::isnan(codecFor(t).toF(b));
  }
}

// Bitwise equality, except that any NaN matches any NaN (payload and sign of a NaN result are not specified).
bool sameElement(DType t, uint64_t a, uint64_t b) {
  return a == b || (isNanBits(t, a) && isNanBits(t, b));
}

// ---- Inputs. ----

uint64_t randomElement(DType t, std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (t) {
    case DType::kFloat32: {
      const uint64_t pick = r % 16;
      if (pick == 0) return toBits(std::numeric_limits<float>::quiet_NaN());
      if (pick == 1) return toBits(pick & 1 ? -0.0f : 0.0f);
      if (pick == 2) return toBits(3e38f);  // sums and products overflow to inf
      if (pick < 8) return toBits(static_cast<float>(static_cast<int>(r >> 32) % 100));
      return toBits(static_cast<float>(std::ldexp(static_cast<double>(r >> 11), -53) * 2000.0 - 1000.0));
    }
    case DType::kFloat64: {
      const uint64_t pick = r % 16;
      if (pick == 0) return toBits(std::numeric_limits<double>::quiet_NaN());
      if (pick == 1) return toBits(-0.0);
      if (pick == 2) return toBits(1e308);
      if (pick < 8) return toBits(static_cast<double>(static_cast<int>(r >> 32) % 100));
      return toBits(std::ldexp(static_cast<double>(r >> 11), -53) * 2000.0 - 1000.0);
    }
    default:
      return r & (dtypeSize(t) == 8 ? ~0ull : (1ull << (8 * dtypeSize(t))) - 1);  // any bit pattern
  }
}

uint64_t scalarFor(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kInt32:
    case DType::kInt64:
      return toBits<int64_t>(-3) & (dtypeSize(t) == 8 ? ~0ull : (1ull << (8 * dtypeSize(t))) - 1);
    case DType::kUint8:
    case DType::kUint32:
    case DType::kUint64:
      return 200;
    case DType::kFloat32:
      return toBits(1.5f);
    case DType::kFloat64:
      return toBits(-0.1);
    default:
      return codecFor(t).fromF(1.5f);
  }
}

// A buffer whose element array starts `misalign` bytes past an aligned address.
struct Buf {
  Buf(size_t bytes, size_t misalign) : storage(bytes + 64), ptr(storage.data() + 16 + misalign) {}
  Buf(const Buf& o) : storage(o.storage), ptr(storage.data() + (o.ptr - o.storage.data())) {}  // same contents
  Buf& operator=(const Buf&) = delete;
  std::vector<unsigned char> storage;
  unsigned char* ptr;
};

uint64_t getElem(const unsigned char* p, size_t i, size_t sz) {
  uint64_t v = 0;
  std::memcpy(&v, p + i * sz, sz);
  return v;
}
void setElem(unsigned char* p, size_t i, size_t sz, uint64_t v) {
  std::memcpy(p + i * sz, &v, sz);
}

enum class Alias { kNone, kDstIsPeer, kDstIsLocal };

struct Case {
  DType dtype;
  OpKind op;
};

class ReduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReduceTest, ReduceIntoMatchesReference) {
  const Case c = GetParam();
  const size_t sz = dtypeSize(c.dtype);
  ReduceOp op;
  op.kind = c.op;
  op.dtype = c.dtype;
  op.scalar = scalarFor(c.dtype);
  op.nranks = kNranks;
  std::mt19937_64 rng(static_cast<uint64_t>(c.dtype) * 131 + static_cast<uint64_t>(c.op));
  for (size_t n : kSizes) {
    std::vector<uint64_t> peer(n), local(n);
    for (size_t i = 0; i < n; ++i) {
      peer[i] = randomElement(c.dtype, rng);
      local[i] = randomElement(c.dtype, rng);
    }
    for (Alias alias : {Alias::kNone, Alias::kDstIsPeer, Alias::kDstIsLocal}) {
      for (bool post : {false, true}) {
        Buf pb(n * sz, 1), lb(n * sz, 3), db(n * sz, 5);
        for (size_t i = 0; i < n; ++i) {
          setElem(pb.ptr, i, sz, peer[i]);
          setElem(lb.ptr, i, sz, local[i]);
        }
        unsigned char* dst = alias == Alias::kDstIsPeer ? pb.ptr : alias == Alias::kDstIsLocal ? lb.ptr : db.ptr;
        reduceInto(op, dst, pb.ptr, lb.ptr, n, post);
        for (size_t i = 0; i < n; ++i) {
          const uint64_t want = refReduce(c.dtype, c.op, peer[i], local[i], op.scalar, post);
          const uint64_t got = getElem(dst, i, sz);
          ASSERT_TRUE(sameElement(c.dtype, got, want))
              << dtypeName(c.dtype) << " " << opName(c.op) << " n=" << n << " alias=" << static_cast<int>(alias)
              << " post=" << post << " i=" << i << std::hex << ": peer 0x" << peer[i] << " local 0x" << local[i]
              << " got 0x" << got << " want 0x" << want;
        }
        if (alias != Alias::kNone) continue;
        for (size_t i = 0; i < n; ++i) {  // inputs untouched
          ASSERT_EQ(getElem(pb.ptr, i, sz), peer[i]);
          ASSERT_EQ(getElem(lb.ptr, i, sz), local[i]);
        }
      }
    }
  }
}

TEST_P(ReduceTest, DstIsPeerIsLocal) {
  const Case c = GetParam();
  const size_t sz = dtypeSize(c.dtype);
  ReduceOp op{c.op, c.dtype, scalarFor(c.dtype), kNranks};
  std::mt19937_64 rng(99);
  const size_t n = 1023;
  std::vector<uint64_t> x(n);
  Buf b(n * sz, 7);
  for (size_t i = 0; i < n; ++i) setElem(b.ptr, i, sz, x[i] = randomElement(c.dtype, rng));
  reduceInto(op, b.ptr, b.ptr, b.ptr, n, true);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(sameElement(c.dtype, getElem(b.ptr, i, sz), refReduce(c.dtype, c.op, x[i], x[i], op.scalar, true)))
        << dtypeName(c.dtype) << " " << opName(c.op) << " i=" << i;
  }
}

TEST_P(ReduceTest, CopyLocalAndCopyPostMatchReference) {
  const Case c = GetParam();
  const size_t sz = dtypeSize(c.dtype);
  ReduceOp op{c.op, c.dtype, scalarFor(c.dtype), kNranks};
  std::mt19937_64 rng(7 + static_cast<uint64_t>(c.dtype));
  for (size_t n : kSizes) {
    std::vector<uint64_t> src(n);
    for (size_t i = 0; i < n; ++i) src[i] = randomElement(c.dtype, rng);
    for (bool inPlace : {false, true}) {
      for (bool post : {false, true}) {
        for (int which = 0; which < 2; ++which) {
          Buf sb(n * sz, 1), db(n * sz, 2);
          for (size_t i = 0; i < n; ++i) setElem(sb.ptr, i, sz, src[i]);
          unsigned char* dst = inPlace ? sb.ptr : db.ptr;
          if (which == 0) {
            copyLocal(op, dst, sb.ptr, n, post);
          } else {
            copyPost(op, dst, sb.ptr, n, post);
          }
          for (size_t i = 0; i < n; ++i) {
            const uint64_t want = which == 0 ? refPost(c.dtype, c.op, refPre(c.dtype, c.op, src[i], op.scalar), post)
                                             : refPost(c.dtype, c.op, src[i], post);
            const uint64_t got = getElem(dst, i, sz);
            ASSERT_TRUE(sameElement(c.dtype, got, want))
                << (which == 0 ? "copyLocal " : "copyPost ") << dtypeName(c.dtype) << " " << opName(c.op) << " n=" << n
                << " inPlace=" << inPlace << " post=" << post << " i=" << i << std::hex << ": src 0x" << src[i]
                << " got 0x" << got << " want 0x" << want;
          }
        }
      }
    }
  }
}

TEST_P(ReduceTest, StreamingFormsMatchThePlainOnesBitwise) {
  // The forms that write their destination with non-temporal stores (large outputs of the step engine and the
  // direct path) compute through an L1 tile: sizes around the tile's edge, a destination at every alignment.
  const Case c = GetParam();
  const size_t sz = dtypeSize(c.dtype);
  ReduceOp op{c.op, c.dtype, scalarFor(c.dtype), kNranks};
  std::mt19937_64 rng(31 + static_cast<uint64_t>(c.dtype) * 7 + static_cast<uint64_t>(c.op));
  std::vector<unsigned char> tile(kStreamTileBytes);
  const size_t per = kStreamTileBytes / sz;
  for (size_t n : {size_t{0}, size_t{1}, size_t{67}, per - 1, per, per + 1, 3 * per + 5}) {
    Buf pb(n * sz, 1), lb(n * sz, 3);
    for (size_t i = 0; i < n; ++i) {
      setElem(pb.ptr, i, sz, randomElement(c.dtype, rng));
      setElem(lb.ptr, i, sz, randomElement(c.dtype, rng));
    }
    for (size_t misalign : {size_t{0}, size_t{5}, size_t{16}}) {
      for (bool post : {false, true}) {
        Buf want(n * sz, misalign), got(n * sz, misalign);
        reduceInto(op, want.ptr, pb.ptr, lb.ptr, n, post);
        reduceIntoStreaming(op, got.ptr, pb.ptr, lb.ptr, n, post, tile.data());
        streamFence();
        ASSERT_EQ(want.storage, got.storage) << "reduceIntoStreaming " << dtypeName(c.dtype) << " " << opName(c.op)
                                             << " n=" << n << " misalign=" << misalign << " post=" << post;
        Buf want2(n * sz, misalign), got2(n * sz, misalign);
        copyLocal(op, want2.ptr, lb.ptr, n, post);
        copyLocalStreaming(op, got2.ptr, lb.ptr, n, post, tile.data());
        streamFence();
        ASSERT_EQ(want2.storage, got2.storage) << "copyLocalStreaming " << dtypeName(c.dtype) << " " << opName(c.op)
                                               << " n=" << n << " misalign=" << misalign << " post=" << post;
      }
    }
  }
}

TEST_P(ReduceTest, StripedLoopsGiveTheSequentialBits) {
  // From kStripeMinBytes per operand the loops walk four parts of the range round robin. Each result must be the
  // one the sequential loop gives: the same call on pieces below the bound is that loop. Sizes that leave a
  // remainder past the whole pieces, and every aliasing the kernels allow.
  const Case c = GetParam();
  const size_t sz = dtypeSize(c.dtype);
  ReduceOp op{c.op, c.dtype, scalarFor(c.dtype), kNranks};
  std::mt19937_64 rng(57 + static_cast<uint64_t>(c.dtype) * 11 + static_cast<uint64_t>(c.op));
  const size_t piece = kStripeMinBytes / sz / 2;  // below the bound: sequential
  for (size_t n : {kStripeMinBytes / sz, kStripeMinBytes / sz + 1037}) {
    Buf pb(n * sz, 1), lb(n * sz, 3);
    for (size_t i = 0; i < n; ++i) {
      setElem(pb.ptr, i, sz, randomElement(c.dtype, rng));
      setElem(lb.ptr, i, sz, randomElement(c.dtype, rng));
    }
    auto sequential = [&](auto&& fn) {
      for (size_t at = 0; at < n; at += piece) fn(at, std::min(piece, n - at));
    };
    for (bool post : {false, true}) {
      for (Alias alias : {Alias::kNone, Alias::kDstIsPeer, Alias::kDstIsLocal}) {
        Buf p1 = pb, l1 = lb, d1(n * sz, 5), p2 = pb, l2 = lb, d2(n * sz, 5);
        unsigned char* dst1 = alias == Alias::kDstIsPeer ? p1.ptr : alias == Alias::kDstIsLocal ? l1.ptr : d1.ptr;
        unsigned char* dst2 = alias == Alias::kDstIsPeer ? p2.ptr : alias == Alias::kDstIsLocal ? l2.ptr : d2.ptr;
        reduceInto(op, dst1, p1.ptr, l1.ptr, n, post);
        sequential(
            [&](size_t at, size_t m) { reduceInto(op, dst2 + at * sz, p2.ptr + at * sz, l2.ptr + at * sz, m, post); });
        // Whole storages: the result, no write past it, and the sources as the sequential loop left them.
        ASSERT_TRUE(d1.storage == d2.storage && p1.storage == p2.storage && l1.storage == l2.storage)
            << "reduceInto " << dtypeName(c.dtype) << " " << opName(c.op) << " n=" << n << " post=" << post
            << " alias=" << static_cast<int>(alias);
      }
      for (bool inPlace : {false, true}) {
        Buf s1 = lb, d1(n * sz, 2), s2 = lb, d2(n * sz, 2);
        unsigned char* dst1 = inPlace ? s1.ptr : d1.ptr;
        unsigned char* dst2 = inPlace ? s2.ptr : d2.ptr;
        copyLocal(op, dst1, s1.ptr, n, post);
        sequential([&](size_t at, size_t m) { copyLocal(op, dst2 + at * sz, s2.ptr + at * sz, m, post); });
        ASSERT_TRUE(d1.storage == d2.storage && s1.storage == s2.storage)
            << "copyLocal " << dtypeName(c.dtype) << " " << opName(c.op) << " n=" << n << " post=" << post
            << " inPlace=" << inPlace;
      }
    }
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int t = 0; t < static_cast<int>(DType::kCount); ++t) {
    for (OpKind k : kAllOps) cases.push_back({static_cast<DType>(t), k});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceTest, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(dtypeName(info.param.dtype)) + "_" + opName(info.param.op);
                         });

// ---- Hand-written expectations. ----

TEST(Reduce, ZeroElementsTouchNothing) {
  // Null pointers with a zero count are valid (NCCL allows count 0 with any buffers): nothing is dereferenced.
  ReduceOp op;
  reduceInto(op, nullptr, nullptr, nullptr, 0, true);
  copyLocal(op, nullptr, nullptr, 0, true);
  copyPost(op, nullptr, nullptr, 0, true);
  // Real buffers with a zero count stay as they were, for every type and op (the post-op included).
  for (DType t : {DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kFp8E4M3}) {
    for (OpKind k : kAllOps) {
      ReduceOp o{k, t, 0x3c00, kNranks};
      unsigned char dst[16], peer[16], local[16];
      std::memset(dst, 0xA5, sizeof(dst));
      std::memset(peer, 0x11, sizeof(peer));
      std::memset(local, 0x22, sizeof(local));
      reduceInto(o, dst, peer, local, 0, true);
      copyLocal(o, dst, local, 0, true);
      copyPost(o, dst, peer, 0, true);
      for (unsigned char b : dst) ASSERT_EQ(b, 0xA5) << dtypeName(t) << " " << opName(k);
    }
  }
}

TEST(Reduce, IntegerAverageTruncatesTowardZero) {
  ReduceOp op{OpKind::kAvg, DType::kInt32, 0, 4};
  const int32_t peer[] = {-7, 7, -1, 2147483647};
  const int32_t local[] = {0, 0, 0, 1};  // the last sum wraps to INT_MIN
  int32_t out[4];
  reduceInto(op, out, peer, local, 4, true);
  EXPECT_EQ(out[0], -1);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], std::numeric_limits<int32_t>::min() / 4);
  reduceInto(op, out, peer, local, 4, false);  // no post: a plain sum
  EXPECT_EQ(out[0], -7);
}

TEST(Reduce, HalfRoundsAfterEveryStep) {
  // 2048 + 1 is a tie in half (spacing 2 above 2048): rounds to even, 2048. Then avg over 2 gives 1024.
  ReduceOp op{OpKind::kAvg, DType::kFloat16, 0, 2};
  const uint16_t peer = floatToHalf(2048.0f), local = floatToHalf(1.0f);
  uint16_t out;
  reduceInto(op, &out, &peer, &local, 1, true);
  EXPECT_EQ(halfToFloat(out), 1024.0f);
  // PreMulSum: local * 0.1 (in half) rounds to half before the add.
  const uint16_t s = floatToHalf(0.1f);
  ReduceOp pm{OpKind::kPreMulSum, DType::kFloat16, s, 1};
  const uint16_t x = floatToHalf(3.0f), zero = floatToHalf(0.0f);
  reduceInto(pm, &out, &zero, &x, 1, false);
  EXPECT_EQ(out, floatToHalf(halfToFloat(s) * 3.0f));
}

// The direct path's reduction over several sources rounds a narrow sum once: 2048 + 1 + 1 is 2050 in half, where
// the chain of binary steps gives 2048 (each 2048 + 1 is a tie that rounds to even). Products and averages too;
// PreMulSum still rounds each pre-multiplied input, as staging does.
TEST(Reduce, ReduceManyRoundsNarrowSumsOnce) {
  const uint16_t v[3] = {floatToHalf(2048.0f), floatToHalf(1.0f), floatToHalf(1.0f)};
  const char* srcs[3] = {reinterpret_cast<const char*>(&v[0]), reinterpret_cast<const char*>(&v[1]),
                         reinterpret_cast<const char*>(&v[2])};
  ReduceOp ops[3];
  for (auto& op : ops) op = ReduceOp{OpKind::kSum, DType::kFloat16, 0, 3};
  uint16_t out = 0;
  reduceMany(ops, &out, srcs, 0, 3, 1, true);
  EXPECT_EQ(halfToFloat(out), 2050.0f);
  uint16_t chained = 0;
  reduceInto(ops[0], &chained, &v[0], &v[1], 1, false);
  reduceInto(ops[0], &chained, &chained, &v[2], 1, false);
  EXPECT_EQ(halfToFloat(chained), 2048.0f);
  // Average: the float sum is rounded to half, then divided (what the switch path can do): 2047 + 1 + 1 = 2049
  // rounds to 2048, / 3 = 682.67 rounds to 682.5, where dividing the float sum would give 683.
  const uint16_t w[3] = {floatToHalf(2047.0f), floatToHalf(1.0f), floatToHalf(1.0f)};
  const char* ws[3] = {reinterpret_cast<const char*>(&w[0]), reinterpret_cast<const char*>(&w[1]),
                       reinterpret_cast<const char*>(&w[2])};
  for (auto& op : ops) op.kind = OpKind::kAvg;
  reduceMany(ops, &out, ws, 0, 3, 1, true);
  EXPECT_EQ(halfToFloat(out), 682.5f);
  EXPECT_NE(out, floatToHalf(2049.0f / 3.0f));
  // bf16 (8 significant bits): 256 + 1 + 1 = 258, where the chain gives 256.
  const uint16_t b[3] = {floatToBf16(256.0f), floatToBf16(1.0f), floatToBf16(1.0f)};
  const char* bs[3] = {reinterpret_cast<const char*>(&b[0]), reinterpret_cast<const char*>(&b[1]),
                       reinterpret_cast<const char*>(&b[2])};
  for (auto& op : ops) op = ReduceOp{OpKind::kSum, DType::kBfloat16, 0, 3};
  reduceMany(ops, &out, bs, 0, 3, 1, true);
  EXPECT_EQ(bf16ToFloat(out), 258.0f);
  // PreMulSum: x * 0.1 rounds to half before the float sum (1 and 5: the roundings do not cancel, 0.6001 against
  // 0.5996 unrounded).
  const uint16_t s = floatToHalf(0.1f);
  const uint16_t x[2] = {floatToHalf(1.0f), floatToHalf(5.0f)};
  const char* xs[2] = {reinterpret_cast<const char*>(&x[0]), reinterpret_cast<const char*>(&x[1])};
  ReduceOp pm[2] = {ReduceOp{OpKind::kPreMulSum, DType::kFloat16, s, 2},
                    ReduceOp{OpKind::kPreMulSum, DType::kFloat16, s, 2}};
  reduceMany(pm, &out, xs, 0, 2, 1, true);
  const float p0 = halfToFloat(floatToHalf(halfToFloat(s) * 1.0f)),
              p1 = halfToFloat(floatToHalf(halfToFloat(s) * 5.0f));
  EXPECT_EQ(out, floatToHalf(p0 + p1));
  EXPECT_NE(out, floatToHalf(halfToFloat(s) * 1.0f + halfToFloat(s) * 5.0f));
}

// Small sums take a one-pass loop (the latency path); it must give the chain's bits: the same additions in rank
// order, in the type, for every width it covers, in place too, and integers wrap.
TEST(Reduce, SmallSumsInOnePassGiveTheChainsBits) {
  const int nsrc = 4;
  const size_t n = 24;  // 96 bytes of float: under the one-pass bound
  std::vector<std::vector<float>> in(nsrc, std::vector<float>(n));
  // 1e8 and -1e8 cancel, and a small value added to either is lost (float's spacing there is 8): the chain gives
  // 3, adding from the last rank down gives 0.5 + i/8, pairs (0+1) + (2+3) give 0.
  for (size_t i = 0; i < n; ++i) {
    in[0][i] = 0.5f + static_cast<float>(i) / 8;
    in[1][i] = 1e8f;
    in[2][i] = -1e8f;
    in[3][i] = 3.0f;
  }
  const char* srcs[nsrc];
  for (int p = 0; p < nsrc; ++p) srcs[p] = reinterpret_cast<const char*>(in[p].data());
  ReduceOp ops[nsrc];
  for (auto& op : ops) op = ReduceOp{OpKind::kSum, DType::kFloat32, 0, nsrc};
  std::vector<float> out(n), chain(n);
  reduceMany(ops, out.data(), srcs, 0, nsrc, n, true);
  for (size_t i = 0; i < n; ++i) {
    float acc = in[0][i];
    for (int p = 1; p < nsrc; ++p) acc = acc + in[p][i];
    chain[i] = acc;
  }
  EXPECT_EQ(std::memcmp(out.data(), chain.data(), n * sizeof(float)), 0);
  // An offset into each source (reduce-scatter's piece), written over the first source's piece (in place, as
  // reduce.h allows).
  reduceMany(ops, in[0].data() + 4, srcs, 4 * sizeof(float), nsrc, 8, true);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(in[0][4 + i], chain[4 + i]) << i;
  // Doubles and 64-bit integers (wrapping past the top).
  const double d[2] = {0.1, 0.2};
  const char* ds[2] = {reinterpret_cast<const char*>(&d[0]), reinterpret_cast<const char*>(&d[1])};
  ReduceOp dop[2] = {ReduceOp{OpKind::kSum, DType::kFloat64, 0, 2}, ReduceOp{OpKind::kSum, DType::kFloat64, 0, 2}};
  double dout = 0;
  reduceMany(dop, &dout, ds, 0, 2, 1, true);
  EXPECT_EQ(dout, 0.1 + 0.2);
  const int64_t big[2] = {INT64_MAX, 2};
  const char* bs[2] = {reinterpret_cast<const char*>(&big[0]), reinterpret_cast<const char*>(&big[1])};
  ReduceOp iop[2] = {ReduceOp{OpKind::kSum, DType::kInt64, 0, 2}, ReduceOp{OpKind::kSum, DType::kInt64, 0, 2}};
  int64_t iout = 0;
  reduceMany(iop, &iout, bs, 0, 2, 1, true);
  EXPECT_EQ(iout, INT64_MIN + 1);
  const int32_t neg[3] = {-5, 3, -7};
  const char* ns[3] = {reinterpret_cast<const char*>(&neg[0]), reinterpret_cast<const char*>(&neg[1]),
                       reinterpret_cast<const char*>(&neg[2])};
  ReduceOp i32[3];
  for (auto& op : i32) op = ReduceOp{OpKind::kSum, DType::kInt32, 0, 3};
  int32_t i32out = 0;
  reduceMany(i32, &i32out, ns, 0, 3, 1, true);
  EXPECT_EQ(i32out, -9);
}

TEST(Reduce, Fp8E4m3SumSaturates) {
  ReduceOp op{OpKind::kSum, DType::kFp8E4M3, 0, 1};
  const uint8_t a = floatToFp8e4m3(448.0f), b = floatToFp8e4m3(448.0f);
  uint8_t out;
  reduceInto(op, &out, &a, &b, 1, false);
  EXPECT_EQ(fp8e4m3ToFloat(out), 448.0f);
}

TEST(Reduce, FloatMaxIgnoresNan) {
  ReduceOp op{OpKind::kMax, DType::kFloat32, 0, 1};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float peer[] = {nan, 1.0f, nan};
  const float local[] = {2.0f, nan, nan};
  float out[3];
  reduceInto(op, out, peer, local, 3, false);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(Reduce, CopyLocalSumIsACopy) {
  ReduceOp op{OpKind::kSum, DType::kFloat64, 0, 8};
  const double src[] = {1.5, -2.25, 3};
  double dst[3] = {};
  copyLocal(op, dst, src, 3, true);
  EXPECT_EQ(0, std::memcmp(dst, src, sizeof(src)));
}

}  // namespace

TEST(Reduce, StreamCopyIsMemcpyAtEveryAlignmentAndSize) {
  std::vector<unsigned char> src(600);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t from = 0; from < 20; ++from) {
    for (size_t to = 0; to < 20; ++to) {
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{63}, size_t{64}, size_t{65},
                           size_t{200}, size_t{511}}) {
        std::vector<unsigned char> want(560, 0xEE), got(560, 0xEE);
        std::memcpy(want.data() + to, src.data() + from, bytes);
        streamCopy(got.data() + to, src.data() + from, bytes);
        streamFence();
        ASSERT_EQ(want, got) << "from " << from << " to " << to << " bytes " << bytes;
      }
    }
  }
}

}  // namespace braid
