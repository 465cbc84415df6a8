// The NVLS-style (direct) collectives of the CUDA backend as a kernel: every rank's CTA c ("lane" c) stages its
// part of the inputs in its own GPU's direct area, or publishes where its peers find them in place (a registered
// buffer every peer maps), and loads its peers' parts straight from there (peer pointers: same GPU, NVLink/PCIe
// peer access, or memory another process exported). Written once over the CTA concept (step_engine.h,
// kernel_main.h) and compiled by nvcc (kernels/braid_kernel.cu) and by g++ for the CTA emulator.
//
// Why staged by default: a peer's user buffer may not be reachable (another process's cudaMalloc, a caching
// allocator's cuMem segment mapped for one device only), while the areas are braid's own, mapped for every rank at
// init. A rank whose input lies in a buffer registered with ncclCommRegister that every peer has mapped
// (cuda_peer_buffers.h) skips the staging copy: each peer reads the input in place, at the address its own process
// maps it (DirectOpDesc::peerSend). The choice is the input's owner's alone, per operation, and its peers learn it
// in each round: no rank needs to know another's registrations.
//
// Area of one rank (DirectLayout): per lane a control line {posted, consumed, reduced} and the rank's abort word;
// per stage parity and lane, the inputs' addresses published for each reader (0: staged); per lane the sources
// this rank resolved for the round; then two stages (by generation parity) of per lane an input and an output
// region of laneBytes each.
//
// Rounds. An operation is cut into rounds; in a round every lane handles `per` elements (of every rank's block for
// all-gather, of every destination slice for reduce-scatter). Lane c of round g (its generation, counted per lane
// across launches in its own `posted` word, so a captured graph replays with fresh generations):
//   1. copies its inputs into its input region of stage g&1 (pre-multiplied: PreMulSum's scalar is per rank), or
//      publishes for every reader where that reader maps them in place; either way the published words of parity
//      g&1 say which,
//   2. publishes posted = g, waits until every rank's lane c posted g, and resolves each rank's source,
//   3. one-shot all-reduce: reduces every rank's source into its receive buffer, in rank order;
//      two-shot: reduces slice `rank` into its output region, publishes reduced = g, waits for every rank's
//      reduced g, and copies each rank's slice into its receive buffer; reduce-scatter: reduces piece `rank` of
//      every rank's source; all-gather: copies every rank's source.
// A rank writes stage g&1 (and its published words) again in round g+2, after it saw every peer post g+1, which
// each peer does only after it finished reading round g. A rank whose input was read in place must not finish
// before its readers did (the program may overwrite the buffer once the stream moves on): at the end of a launch
// every lane publishes consumed = its last generation, and a lane that published an input in place waits for every
// rank's. Results are bitwise those of the host's direct path (direct_engine.h's rank order) either way.
//
// With NVLS multicast (DirectKernelWork::mc: every rank's area bound to one object) a round whose inputs are all
// staged reduces in the switch instead, for the dtype/op pairs it covers (DirectOpDesc::multicast): step 3 becomes
// one multimem load-reduce per word of the stage through the multicast mapping (one-shot, reduce-scatter), or, for
// two-shot, the load-reduce of slice `rank` followed by a multimem store of it into every rank's output region,
// after which each rank copies its whole output region out. The switch combines in its own order, so such results
// are bitwise the host's only where the sums are exact; every rank gets the same bits. Every rank waits for every
// other's consumed word at the end of such a launch (its binding ends with its communicator).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/direct_engine.h"
#include "src/backends/common/kernel_main.h"
#include "src/backends/common/mem_order.h"
#include "src/backends/common/multimem.h"
#include "src/common/coll_types.h"
#include "src/common/host_device.h"

namespace braid {

// Where things are in a rank's direct area (every rank's has the same layout).
struct DirectLayout {
  // A lane's control line: posted at 0, this rank's symmetric verdict at 16, consumed at 32, reduced at 64, the
  // symmetric keys (send and receive) by parity at 96 and 112.
  static constexpr size_t kLineBytes = 128;
  uint32_t nlanes = 1;
  uint32_t nranks = 1;
  size_t laneBytes = 0;  // bytes of one lane's input (and output) region per stage

  BRAID_HOST_DEVICE size_t postedAt(uint32_t lane) const { return kLineBytes * lane; }
  BRAID_HOST_DEVICE size_t consumedAt(uint32_t lane) const { return kLineBytes * lane + 32; }
  BRAID_HOST_DEVICE size_t reducedAt(uint32_t lane) const { return kLineBytes * lane + 64; }
  // Key k (0: send, 1: receive) of a round of parity gen&1.
  BRAID_HOST_DEVICE size_t keyAt(uint32_t gen, uint32_t lane, int k) const {
    return kLineBytes * lane + 96 + 16 * (gen & 1u) + 8 * static_cast<size_t>(k);
  }
  BRAID_HOST_DEVICE size_t verdictAt(uint32_t lane) const { return kLineBytes * lane + 16; }
  BRAID_HOST_DEVICE size_t abortAt() const { return kLineBytes * nlanes; }
  // A lane's table of one 64-bit word per rank, in whole control lines.
  BRAID_HOST_DEVICE size_t tableBytes() const {
    return (sizeof(uint64_t) * nranks + kLineBytes - 1) / kLineBytes * kLineBytes;
  }
  // Where reader `reader` finds this rank's input of a round of parity gen&1 (0: in this rank's stage).
  BRAID_HOST_DEVICE size_t publishedAt(uint32_t gen, uint32_t lane, uint32_t reader) const {
    return kLineBytes * (nlanes + 1) + ((gen & 1u) * nlanes + lane) * tableBytes() + sizeof(uint64_t) * reader;
  }
  // The sources this rank's lane resolved for its round (thread 0 writes them, every thread reads them).
  BRAID_HOST_DEVICE size_t sourcesAt(uint32_t lane) const {
    return kLineBytes * (nlanes + 1) + (2 * static_cast<size_t>(nlanes) + lane) * tableBytes();
  }
  BRAID_HOST_DEVICE size_t stageAt() const {
    return kLineBytes * (nlanes + 1) + 3 * static_cast<size_t>(nlanes) * tableBytes();
  }
  BRAID_HOST_DEVICE size_t inputAt(uint32_t gen, uint32_t lane) const {
    return stageAt() + ((gen & 1u) * nlanes + lane) * 2 * laneBytes;
  }
  BRAID_HOST_DEVICE size_t outputAt(uint32_t gen, uint32_t lane) const { return inputAt(gen, lane) + laneBytes; }
  BRAID_HOST_DEVICE size_t bytes() const { return stageAt() + 2 * static_cast<size_t>(nlanes) * 2 * laneBytes; }
};

// One operation of a direct launch.
struct DirectOpDesc {
  DirectCollective coll = DirectCollective::kAllReduceOneShot;  // all-reduce's shot already chosen
  const char* send = nullptr;
  char* recv = nullptr;
  size_t count = 0;           // NCCL's count (all-reduce elements; reduce-scatter and all-gather per-rank elements)
  ReduceOp stageOp;           // applied while staging (this rank's PreMulSum scalar)
  const ReduceOp* reduceOps;  // [nranks] the combining op per source: PreMulSum is a sum by then, avg divides last
  // [nranks] where each rank's process maps `send`, when this rank's peers read it in place (a registered buffer
  // they all map; never for PreMulSum, whose scalar is applied while staging, nor where this rank's results
  // overwrite its input while peers read it); null: staged.
  const uint64_t* peerSend = nullptr;
  // Rounds whose inputs are all staged reduce through the multicast mapping (DirectKernelWork::mc): the host
  // checked the dtype and op (mcOpFor) and that switch reductions are allowed (not deterministic mode).
  bool multicast = false;
  // Symmetric rounds (windows with multicast mappings of their own, cuda_windows.h): where this process's multicast
  // mappings of the send and receive windows stand for `send` and `recv`, and keys naming those windows and offsets
  // exactly, the same on every rank (symKey[0] 0: not eligible; a key the collective does not need is 1). A round in
  // which every rank published the same keys runs on the user's buffers through the switch, staging nothing:
  // load-reduce from mcSend, stores into mcRecv. Otherwise the round runs as any other (the input is published in
  // place: peerSend is set whenever symKey is).
  const char* mcSend = nullptr;
  char* mcRecv = nullptr;
  uint64_t symKey[2] = {0, 0};
  // Lanes (CTAs) that run it, 1..layout.nlanes (ncclCollConfig_t.nvlsCTAs): the others skip it. Each lane counts
  // its own generations, so skipping keeps them in step as long as every rank gave the call the same nvlsCTAs (as
  // NCCL requires of a call's arguments; BRAID_CHECK_CALLS compares it).
  uint32_t lanes = 1;
};

struct DirectKernelWork {
  const DirectOpDesc* ops = nullptr;
  uint32_t nops = 0;
  char* const* areas = nullptr;  // [nranks] every rank's direct area as this process maps it
  uint32_t nranks = 0;
  uint32_t rank = 0;
  DirectLayout layout;
  // This process's mapping of the multicast object every rank bound its area to, at offset 0 (NVLS): an offset in
  // it reads as the reduction of every rank's area there, and a store lands in every area. Null: none.
  char* mc = nullptr;
};

// Elements in a 16-byte unit: what a multimem access or a vector copy moves at once.
BRAID_HOST_DEVICE inline size_t directUnitElems(size_t es) {
  return es < 16 ? 16 / es : 1;
}

// Elements a lane handles per round of an operation: at most what a region holds (for reduce-scatter, one piece of
// each of nranks slices), otherwise an even share of the count, in 16-byte units where the element size allows.
// Whole units in every case, so each rank's piece of a reduce-scatter round starts 16-byte aligned: switch
// reductions load 4- or 8-byte words (a piece of 32768 / 5 halves would leave odd ranks' pieces 2 bytes off).
BRAID_HOST_DEVICE inline size_t directLaneElems(const DirectOpDesc& op, const DirectKernelWork& w) {
  const size_t es = dtypeSize(op.stageOp.dtype);
  const size_t region = w.layout.laneBytes / es;
  const size_t unit = directUnitElems(es);
  const size_t cap = op.coll == DirectCollective::kReduceScatter ? region / w.nranks / unit * unit : region;
  size_t share = (op.count + op.lanes - 1) / op.lanes;
  share = (share + unit - 1) / unit * unit;
  return share < cap ? (share > 0 ? share : 1) : cap;
}

// Two-shot all-reduce splits a round of len elements into n slices, whole 16-byte units each (the vector width
// of a multimem access and of the copies), rank p owning slice p; the last slices may be short or empty.
struct TwoShotSlices {
  size_t slice;
  size_t len;
  BRAID_HOST_DEVICE TwoShotSlices(size_t len_elems, size_t n, size_t es) : len(len_elems) {
    const size_t unit = directUnitElems(es);
    slice = ((len + n - 1) / n + unit - 1) / unit * unit;
  }
  BRAID_HOST_DEVICE size_t start(size_t p) const { return p * slice; }
  BRAID_HOST_DEVICE size_t lenOf(size_t p) const {
    const size_t s = p * slice;
    return s < len ? (len - s < slice ? len - s : slice) : size_t{0};
  }
};

namespace direct_detail {

// Thread 0: waits until every rank's word at `at` reached gen. kRunning, or why it stopped (*who: the rank).
template <class Cta>
BRAID_HOST_DEVICE DevStatusCode waitAll(const Cta& cta, const KernelArgs& a, const DirectKernelWork& w, size_t at,
                                        uint32_t gen, int32_t* who) {
  uint64_t since = 0;
  for (uint32_t p = 0; p < w.nranks; ++p) {
    const uint32_t* word = reinterpret_cast<const uint32_t*>(w.areas[p] + at);
    while (!genReached(loadAcquire(word), gen)) {
      *who = static_cast<int32_t>(p);
      if (a.abortFlag != nullptr && loadAcquire(a.abortFlag) != 0) return DevStatusCode::kAborted;
      if (loadAcquire(reinterpret_cast<const uint32_t*>(w.areas[p] + w.layout.abortAt())) != 0) {
        return DevStatusCode::kPeerAborted;
      }
      if (a.status != nullptr && loadAcquire(&a.status->code) != static_cast<uint32_t>(DevStatusCode::kRunning)) {
        return DevStatusCode::kAborted;  // another lane of this launch failed and said why
      }
      const uint64_t now = cta.nowNs();
      if (since == 0) since = now;
      if (a.timeoutNs != 0 && now - since > a.timeoutNs) return DevStatusCode::kTimeout;
      cta.relax();
    }
  }
  *who = -1;
  return DevStatusCode::kRunning;
}

// Thread 0: records the failure (the first lane to fail does), tells the peers through this rank's abort word.
BRAID_HOST_DEVICE inline void fail(const KernelArgs& a, const DirectKernelWork& w, uint32_t lane, DevStatusCode code,
                                   int32_t op, int32_t peer, uint32_t gen) {
  storeRelease(reinterpret_cast<uint32_t*>(w.areas[w.rank] + w.layout.abortAt()), 1u);
  if (a.status == nullptr || fetchAddRelease(&a.status->claimed, 1u) != 0) return;
  a.status->channel = static_cast<int32_t>(lane);
  a.status->item = op;
  a.status->conn = peer;  // a rank here, not a connector (KernelArgs::direct says which)
  a.status->step = gen;
  a.status->tile = 0;
  storeRelease(&a.status->code, static_cast<uint32_t>(code));
}

}  // namespace direct_detail

// The direct kernel, for CTA `lane` of a grid of layout.nlanes CTAs.
template <class Cta, class Env>
BRAID_HOST_DEVICE void directKernelMain(const Cta& cta, Env& env, const KernelArgs& a, uint32_t lane) {
  const DirectKernelWork& w = *a.direct;
  if (lane >= w.layout.nlanes) return;
  const DirectLayout& L = w.layout;
  char* const mine = w.areas[w.rank];
  uint32_t* posted = reinterpret_cast<uint32_t*>(mine + L.postedAt(lane));
  uint32_t* reduced = reinterpret_cast<uint32_t*>(mine + L.reducedAt(lane));
  // Only thread 0 of this CTA ever writes these, and not before the barrier after the first staging copy.
  uint32_t gen = loadRelaxed(posted) + 1;
  const size_t n = w.nranks;
  // This round's source of every rank, as thread 0 resolved them after the wait.
  const char** const sources = reinterpret_cast<const char**>(mine + L.sourcesAt(lane));
  bool readInPlace = false;  // peers read this rank's memory in place or through multicast: wait for them at the end
  uint32_t lastInPlace = 0;
  // Every thread leaves through the same barrier: thread 0's verdict after a wait (and what it did after).
  auto waited = [&](size_t at, int32_t op, uint32_t g, auto&& then) {
    int32_t who = -1;
    DevStatusCode code = DevStatusCode::kRunning;
    if (cta.tid() == 0) {
      code = direct_detail::waitAll(cta, a, w, at, g, &who);
      if (code == DevStatusCode::kRunning) then();
    }
    if (cta.syncAll(code == DevStatusCode::kRunning)) return true;
    if (cta.tid() == 0) direct_detail::fail(a, w, lane, code, op, who, g);
    return false;
  };
  auto nothing = [] {};
  auto publish = [&](uint32_t* word, uint32_t value) {
    cta.sync();  // every thread's stores are in place before thread 0 releases them
    if (cta.tid() == 0) storeRelease(word, value);
  };
  for (uint32_t o = 0; o < w.nops; ++o) {
    const DirectOpDesc& op = w.ops[o];
    if (lane >= op.lanes) continue;
    const size_t es = dtypeSize(op.stageOp.dtype);
    const size_t per = directLaneElems(op, w);
    const size_t span = per * op.lanes;
    const size_t rounds = (op.count + span - 1) / span;
    const bool scatters = op.coll == DirectCollective::kReduceScatter;
    for (size_t r = 0; r < rounds; ++r, ++gen) {
      const size_t off = r * span + per * lane;
      const size_t len = off < op.count ? (op.count - off < per ? op.count - off : per) : 0;
      const size_t in = L.inputAt(gen, lane);
      char* myIn = mine + in;
      // Byte offset in `send` of what reader q reads this round (reduce-scatter: its own piece).
      auto readAt = [&](size_t q) { return ((scatters ? q * op.count : 0) + off) * es; };
      if (op.peerSend != nullptr) {
        if (cta.tid() == 0) {
          storeRelaxed(reinterpret_cast<uint64_t*>(mine + L.keyAt(gen, lane, 0)), op.symKey[0]);
          storeRelaxed(reinterpret_cast<uint64_t*>(mine + L.keyAt(gen, lane, 1)), op.symKey[1]);
          for (size_t q = 0; q < n; ++q) {
            storeRelaxed(reinterpret_cast<uint64_t*>(mine + L.publishedAt(gen, lane, static_cast<uint32_t>(q))),
                         op.peerSend[q] + readAt(q));
          }
        }
        readInPlace = readInPlace || len > 0;
        if (len > 0) lastInPlace = gen;
      } else {
        if (cta.tid() == 0) {
          storeRelaxed(reinterpret_cast<uint64_t*>(mine + L.keyAt(gen, lane, 0)), uint64_t{0});
          storeRelaxed(reinterpret_cast<uint64_t*>(mine + L.keyAt(gen, lane, 1)), uint64_t{0});
          for (size_t q = 0; q < n; ++q) {
            storeRelaxed(reinterpret_cast<uint64_t*>(mine + L.publishedAt(gen, lane, static_cast<uint32_t>(q))),
                         uint64_t{0});
          }
        }
        if (scatters) {
          for (size_t p = 0; p < n; ++p) {
            env.copyLocal(cta, op.stageOp, myIn + p * per * es, op.send + (p * op.count + off) * es, len, false);
          }
        } else {
          env.copyLocal(cta, op.stageOp, myIn, op.send + off * es, len, false);
        }
      }
      publish(posted, gen);
      auto resolve = [&] {
        // The symmetric verdict: every rank published this operation's key for this round (the same on every rank).
        bool sym = op.symKey[0] != 0;
        for (size_t p = 0; p < n && sym; ++p) {
          sym = loadRelaxed(reinterpret_cast<const uint64_t*>(w.areas[p] + L.keyAt(gen, lane, 0))) == op.symKey[0] &&
                loadRelaxed(reinterpret_cast<const uint64_t*>(w.areas[p] + L.keyAt(gen, lane, 1))) == op.symKey[1];
        }
        storeRelaxed(reinterpret_cast<uint32_t*>(mine + L.verdictAt(lane)), sym ? 1u : 0u);
        for (size_t p = 0; p < n; ++p) {
          const uint64_t at =
              loadRelaxed(reinterpret_cast<const uint64_t*>(w.areas[p] + L.publishedAt(gen, lane, w.rank)));
          sources[p] = at != 0 ? reinterpret_cast<const char*>(at)
                               : w.areas[p] + in + (scatters ? w.rank * per * es : size_t{0});
        }
      };
      if (!waited(L.postedAt(lane), static_cast<int32_t>(o), gen, resolve)) return;
      if (loadRelaxed(reinterpret_cast<const uint32_t*>(mine + L.verdictAt(lane))) != 0) {
        // Symmetric: the user's buffers through the switch. Peers read this rank's send buffer and write its
        // receive buffer, so the launch ends after every rank's (as for inputs read in place).
        readInPlace = true;
        lastInPlace = gen;
        cta.mcFence();
        const ReduceOp& rop = op.reduceOps[0];  // avg divides at the end; PreMulSum never comes here
        const size_t mineAt = scatters ? w.rank * op.count : 0;
        switch (op.coll) {
          case DirectCollective::kAllReduceOneShot:
          case DirectCollective::kReduceScatter:
            ctaMultimemReduce(cta, rop, op.recv + off * es, op.mcSend + (mineAt + off) * es, len, true);
            break;
          case DirectCollective::kAllReduceTwoShot: {
            const TwoShotSlices slices(len, n, es);
            const size_t at = off + slices.start(w.rank);
            const size_t l = slices.lenOf(w.rank);
            ctaMultimemReduce(cta, rop, op.recv + at * es, op.mcSend + at * es, l, true);
            cta.sync();
            ctaMultimemStore(cta, op.mcRecv + at * es, op.recv + at * es, l * es);
            break;
          }
          case DirectCollective::kAllGather:
            ctaMultimemStore(cta, op.mcRecv + (w.rank * op.count + off) * es, op.send + off * es, len * es);
            break;
        }
        if (op.coll == DirectCollective::kAllReduceTwoShot || op.coll == DirectCollective::kAllGather) {
          // Every rank's stores have landed in every receive buffer before anyone returns.
          cta.mcFence();
          publish(reduced, gen);
          if (!waited(L.reducedAt(lane), static_cast<int32_t>(o), gen, nothing)) return;
          cta.mcFence();
        }
        continue;
      }
      // Switch reductions when every input of the round is staged (the areas are what the object binds); the
      // decision is the same on every rank, since each input's owner publishes the same word to every reader.
      bool viaMc = w.mc != nullptr && op.multicast && op.coll != DirectCollective::kAllGather;
      for (size_t p = 0; p < n && viaMc; ++p) {
        viaMc = sources[p] == w.areas[p] + in + (scatters ? w.rank * per * es : size_t{0});
      }
      if (viaMc) {
        // Peers read this rank's area through the object, whose binding ends when this rank's communicator goes:
        // the launch ends after every rank's has, as for inputs read in place.
        readInPlace = true;
        lastInPlace = gen;
        cta.mcFence();  // the staged inputs were written through unicast addresses
        // The same kind on every rank (PreMulSum is a sum by now).
        const ReduceOp& rop = op.reduceOps[0];
        if (op.coll != DirectCollective::kAllReduceTwoShot) {
          ctaMultimemReduce(cta, rop, op.recv + off * es, w.mc + in + (scatters ? w.rank * per * es : size_t{0}), len,
                            true);
          continue;
        }
        // Two-shot: this rank's slice, reduced by the switch into its own input region (only this rank reads that
        // slice of anyone's input), then stored through the multicast mapping into every rank's output region.
        const TwoShotSlices slices(len, n, es);
        const size_t at = slices.start(w.rank);
        const size_t mine_len = slices.lenOf(w.rank);
        const size_t out = L.outputAt(gen, lane);
        ctaMultimemReduce(cta, rop, mine + in + at * es, w.mc + in + at * es, mine_len, true);
        cta.sync();
        ctaMultimemStore(cta, w.mc + out + at * es, mine + in + at * es, mine_len * es);
        cta.mcFence();
        publish(reduced, gen);
        if (!waited(L.reducedAt(lane), static_cast<int32_t>(o), gen, nothing)) return;
        cta.mcFence();  // every slice arrived through the multicast mapping; it is read back through this one
        env.copy(cta, op.recv + off * es, mine + out, len * es);
        continue;
      }
      DirectTileArgs t;
      t.srcs = sources;
      t.ops = op.reduceOps;
      t.nranks = static_cast<int>(n);
      t.at = 0;
      switch (op.coll) {
        case DirectCollective::kAllReduceOneShot:
        case DirectCollective::kReduceScatter:
          t.len = len;
          t.acc = op.recv + off * es;
          directReduceTile(cta, env, t);
          break;
        case DirectCollective::kAllGather:
          for (size_t p = 0; p < n; ++p) {
            char* dst = op.recv + (p * op.count + off) * es;
            if (dst != sources[p]) env.copy(cta, dst, sources[p], len * es);  // in place: this rank's own block
          }
          break;
        case DirectCollective::kAllReduceTwoShot: {
          const TwoShotSlices slices(len, n, es);
          const size_t out = L.outputAt(gen, lane);
          t.at = slices.start(w.rank) * es;
          t.len = slices.lenOf(w.rank);
          t.acc = mine + out + t.at;
          directReduceTile(cta, env, t);
          publish(reduced, gen);
          if (!waited(L.reducedAt(lane), static_cast<int32_t>(o), gen, nothing)) return;
          for (size_t p = 0; p < n; ++p) {
            const size_t s = slices.start(p);
            env.copy(cta, op.recv + (off + s) * es, w.areas[p] + out + s * es, slices.lenOf(p) * es);
          }
          break;
        }
      }
      // The next round may overwrite nothing a peer still reads (the other stage); its staging copy follows the
      // barrier of its publish, so this round's loads are done before anything is reused two rounds on.
    }
  }
  // Every lane says it read everything it will; a lane whose input was read in place ends after its readers.
  publish(reinterpret_cast<uint32_t*>(mine + L.consumedAt(lane)), gen - 1);
  if (readInPlace) (void)waited(L.consumedAt(lane), static_cast<int32_t>(w.nops) - 1, lastInPlace, nothing);
}

}  // namespace braid
