// hamming_topk's level 0 on CUDA: warps that scan on their own. A warp scans a span of database
// rows for a tile of 8 * Fragments queries and keeps, per query, the span's min(k, rows) nearest
// (distance, index) pairs, without ever storing the distance matrix. A block's warps take
// different query tiles over the same span (a row one of them fetched is in L1 for the others)
// or, when there are few tiles, neighbouring spans of one tile; nothing in the scan waits for
// another warp (no block barrier: the design before this one spent most of its time at two per
// round of rows).
//
// Distances, on the binary tensor cores (sm_80 and later): per 16-row x 8-query tile, two
// products, popc(row AND NOT query) + popc(NOT row AND query) = popc(row XOR query), accumulated
// onto minus the query's limit. A distance below its query's limit comes out negative, so the hot
// loop tests a step's 32 x 8 * Fragments distances with a few three-input ORs and one vote, and
// needs no query popcounts. Older GPUs (or FERRY_CUDA_HIDE_FEATURES=b1mma): XOR and popcount,
// a row per lane, with the same selection.
//
// Selection: keys are distance << 19 | (row - span begin), so key order is exactly the
// (distance, index) order. The warp walks its span in steps of 32 rows, in row order; a row
// enters its query's buffer (shared memory, `cap` keys) when its distance is below the distance
// of the query's threshold key, which ranks it before that key (a later row at that distance has
// a larger index). When a step could overflow a buffer, the warp cuts it to its k smallest keys
// (radix select of the k-th) and the k-th becomes the threshold. At the span's end the kept keys
// are sorted (bitonic) and written as the span's run.
//
// Bounds: a warp's own threshold is only as good as the rows it has seen, so until it nears the
// k-th of its whole span, some of its 32 x 8 * Fragments pairs pass nearly every step. So the
// thresholds start from a bound per query (hamming_topk_kernel.cpp): this kernel first runs over
// a sample of the database (p.sample: the smallest distance per query of each span, a group of
// rows), hamming_bound_kernel takes the k-th smallest of those minima, and no row beyond it can
// be among the k nearest. Rows turned away leave a span's run short: its empty slots are padding,
// which the merges count out.
//
// Pooled (p.pooled, where the bounds exist and the pools fit the scratch): the warps keep no
// buffers and never cut; every row within its query's bound goes to that query's pool in global
// memory, and the select pass (hamming_topk.cu) picks the k. With a bound from the sample, a
// query's pool holds about k times the database's size over the sample's, so the scan runs at
// the rate of its products and votes, with nothing to merge.
//
// Staged (the pooled search over a database that fits the L2 cache): rows come through a ring
// in the warp's shared memory, fetched a few steps ahead (RowStages), and appends leave a warp 32
// at a time; see hamming_scan_kernel.
#pragma once

#include <cstdint>

#include "hamming_topk_launch.hpp"

namespace ferry::cuda::scan {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr unsigned kNoKey = 0xFFFFFFFFu;
constexpr unsigned kNone = 0xFFFFFFFFu;
constexpr unsigned kStepRows = kHammingScanStepRows;  // two mma tiles of 16 rows
constexpr unsigned kLocalMask = (1u << kHammingScanLocalBits) - 1u;
// The limit of a query with no threshold yet: above every distance (codes have <= 4096 bits).
constexpr int kNoLimit = 1 << 20;

// The tensor-core path's row stages (RowStages): a ring of this many units of a step's rows.
constexpr unsigned kRowStages = 4;
constexpr unsigned kStageWords = kStepRows * 8;  // 32 rows x one 256-bit chunk

// The staged scan's appends, per warp, sent to the pools together once kAppendBatch wait: room
// for fewer than a batch and a step's most (32 rows x 32 queries).
constexpr unsigned kAppendBatch = 32;
constexpr unsigned kStagedAppends = kStepRows * 32 + kAppendBatch;
// The entries, their count, and padding to a multiple of 4 words (each warp's part of the shared
// memory starts 16-byte aligned: its query codes are read as quads).
constexpr unsigned kStagedAppendWords = kStagedAppends + 4;

// Shared memory of one warp, in 32-bit words: thresholds and counts of its queries, a 256-word
// histogram (keep_smallest; not in the staged scan, which keeps no buffers), the queries' key
// buffers (cap each), the query codes (the tensor-core path: each lane's B fragments, 4 words per
// step and fragment; the popcount path: plain rows, which take fewer words), then the staged
// scan's row stages (16-byte aligned: every part before them is a multiple of 4 words) and
// appends.
__host__ __device__ constexpr unsigned warp_shared_words(unsigned fragments, unsigned cap,
                                                         unsigned words, bool staged) {
  return 2 * 8 * fragments + (staged ? 0 : 256) + 8 * fragments * cap +
         ((words + 7) / 8) * fragments * 32 * 4 +
         (staged ? kRowStages * kStageWords + kStagedAppendWords : 0);
}
static_assert(warp_shared_words(1, 32, 2, false) % 4 == 0 &&
                  warp_shared_words(2, 0, 8, true) % 4 == 0 &&
                  warp_shared_words(4, 0, 24, true) % 4 == 0,
              "a warp's part of the shared memory keeps the next one 16-byte aligned");

// d = c + popc(A AND B) over a 16 x 8 tile of 256-bit rows (A: database rows, B: queries).
__device__ __forceinline__ void mma_and_popc(int (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1, const int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]),
        "r"(c[2]), "r"(c[3]));
#else
  (void)d, (void)a, (void)b0, (void)b1, (void)c;
  __trap();  // never launched: the host picks this path only for sm_80 and later machine code
#endif
}

// Keeps the `keep` smallest of the buffer's `*count` distinct keys (count >= keep), in place
// and unordered; returns the keep-th smallest. One warp; `histogram` is its 256 words of shared
// memory. The keep-th key is found a byte at a time (radix select, most significant first).
__device__ unsigned keep_smallest(unsigned* keys, unsigned* count, unsigned keep, unsigned lane,
                                  unsigned* histogram) {
  const unsigned n = *count;
  unsigned kth = 0, need = keep;  // need: the rank sought among keys matching kth's high bytes
  for (int shift = 24; shift >= 0; shift -= 8) {
    const unsigned high = shift == 24 ? 0u : ~0u << (shift + 8);
    for (unsigned b = lane; b < 256; b += 32) histogram[b] = 0;
    __syncwarp();
    for (unsigned i = lane; i < n; i += 32) {
      const unsigned key = keys[i];
      if ((key & high) == kth) atomicAdd(&histogram[(key >> shift) & 255u], 1u);
    }
    __syncwarp();
    // Lane l sums bins 8l..8l+7; an inclusive scan over lanes finds the lane holding rank `need`.
    unsigned bins[8], sum = 0;
#pragma unroll
    for (unsigned b = 0; b < 8; ++b) sum += bins[b] = histogram[8 * lane + b];
    unsigned inclusive = sum;
    for (unsigned offset = 1; offset < 32; offset <<= 1) {
      const unsigned below = __shfl_up_sync(kFull, inclusive, offset);
      if (lane >= offset) inclusive += below;
    }
    const bool holder = inclusive >= need && inclusive - sum < need;
    const unsigned source = __ffs(static_cast<int>(__ballot_sync(kFull, holder))) - 1;
    unsigned digit = 0, before = inclusive - sum;
    bool found = false;
#pragma unroll
    for (unsigned b = 0; b < 8; ++b) {  // constant indices: bins stays in registers
      if (!found && before + bins[b] >= need) {
        digit = b;
        found = true;
      } else if (!found) {
        before += bins[b];
      }
    }
    digit = __shfl_sync(kFull, digit + 8 * lane, source);
    need -= __shfl_sync(kFull, before, source);
    kth |= digit << shift;
    __syncwarp();
  }
  // Compaction: a chunk's keys are all read (before the ballot) before any is written, and
  // writes land at or before the chunk's own positions.
  unsigned base = 0;
  for (unsigned first = 0; first < n; first += 32) {
    const unsigned i = first + lane;
    const unsigned key = i < n ? keys[i] : kNoKey;
    const bool kept = key <= kth;
    const unsigned mask = __ballot_sync(kFull, kept);
    if (kept) keys[base + __popc(mask & ((1u << lane) - 1u))] = key;
    base += __popc(mask);
  }
  __syncwarp();
  if (lane == 0) *count = keep;
  __syncwarp();
  return kth;
}

// Sorts keys[0, n) ascending, padding to a power of two with kNoKey (the buffer has room). One
// warp.
__device__ void sort_keys(unsigned* keys, unsigned n, unsigned lane) {
  unsigned size = 1;
  while (size < n) size <<= 1;
  for (unsigned i = n + lane; i < size; i += 32) keys[i] = kNoKey;
  __syncwarp();
  for (unsigned block = 2; block <= size; block <<= 1) {
    for (unsigned stride = block >> 1; stride > 0; stride >>= 1) {
      for (unsigned i = lane; i < size / 2; i += 32) {
        const unsigned a = 2 * i - (i & (stride - 1)), b = a + stride;
        const unsigned ka = keys[a], kb = keys[b];
        if ((ka > kb) == ((a & block) == 0)) {
          keys[a] = kb;
          keys[b] = ka;
        }
      }
      __syncwarp();
    }
  }
}

// The pooled search: a row within query `query`'s bound joins its pool (slots past pool_cap are
// counted, not written: the select pass then finds that query's k by an exact pass).
__device__ __forceinline__ void pool_append(const HammingLaunch& p, unsigned query, unsigned row) {
  const unsigned at = atomicAdd(&p.pool_counts[query], 1u);
  if (at < p.pool_cap) p.pool[std::uint64_t{query} * p.pool_cap + at] = row;
}

// One warp's buffers and their upkeep.
struct WarpBuffers {
  unsigned* threshold;  // per query: the threshold key (kNoKey: none yet; 0: not a query)
  unsigned* count;
  unsigned* histogram;
  unsigned* keys;       // query j's buffer: keys[j * cap, j * cap + cap)
  unsigned cap;
  unsigned k;

  // Adds a key; true when the buffer is now so full that the next step could overflow it.
  __device__ bool insert(unsigned j, unsigned distance, unsigned local) const {
    const unsigned at = atomicAdd(&count[j], 1u);
    keys[j * cap + at] = (distance << kHammingScanLocalBits) | local;
    return at + 1u > cap - kStepRows;
  }
  // After a step's insertions, when one said so: cuts every buffer the next step could overflow
  // to its k smallest keys, whose k-th becomes the query's threshold. Whole warp.
  __device__ void cut_full(unsigned queries, unsigned lane) const {
    __syncwarp();
    unsigned full = __ballot_sync(kFull, lane < queries && count[lane] > cap - kStepRows);
    while (full != 0) {
      const unsigned j = __ffs(static_cast<int>(full)) - 1;
      full &= full - 1;
      const unsigned kth = keep_smallest(keys + j * cap, count + j, k, lane, histogram);
      if (lane == 0) threshold[j] = kth;
    }
    __syncwarp();
  }
  // The distance a row must stay below to enter query j's buffer.
  __device__ int limit(unsigned j) const {
    const unsigned key = threshold[j];
    return key == kNoKey ? kNoLimit : static_cast<int>(key >> kHammingScanLocalBits);
  }
};

// A warp's 32 rows of a step for the tensor-core path, one 256-bit chunk: a[t] is tile t's A
// fragment (rows 16t + g and 16t + g + 8). The product sums over all 256 bits, so the order of
// the 32-bit words along them is free as long as A and B agree: lane tg takes words 2tg and
// 2tg + 1 of each row (a[t][0], a[t][2]: row 16t + g; a[t][1], a[t][3]: row 16t + g + 8), and the
// queries' fragments the same words.
struct StepRows {
  unsigned a[2][4];
};

// cp.async (sm_80 and later, as the products): from[0] to the shared-memory address `to` and
// from[1] to `to` + 8, 4 bytes each, without registers; zero-filled when !present (nothing is read
// then). One asm statement, so that the second address is an offset of the first.
__device__ __forceinline__ void copy_async_pair(unsigned to, const std::uint32_t* from,
                                                bool present) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "cp.async.ca.shared.global [%0], [%1], 4, %2;\n\t"
      "cp.async.ca.shared.global [%0+8], [%1+4], 4, %2;" ::"r"(to),
      "l"(from), "r"(present ? 4u : 0u)
      : "memory");
#else
  (void)to, (void)from, (void)present;
  __trap();
#endif
}

__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Waits until at most Pending of this lane's committed groups are still in flight.
template <unsigned Pending>
__device__ __forceinline__ void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
}

// The tensor-core path's rows, fetched kRowStages - 1 units ahead of the products that read them
// (a unit: a step's 32 rows x one 256-bit chunk), through a ring of stages in the warp's shared
// memory. Rows loaded into registers a step ahead left the scan waiting on them (registers for
// more steps would cost warps). Each lane copies exactly the words it later reads, 4 bytes at a
// time (rows are only 4-byte aligned), straight into the order of its A fragments, so that a tile
// is one 16-byte read and the ring needs no warp synchronization: the lane's own cp.async groups
// order it, and a stage is refilled only after the lane's products consumed what it read there.
// Stage s, tile t: lane l's fragment at words (2s + t) * 128 + 4l of the ring.
struct RowStages {
  unsigned lane_ring;            // the ring's shared-memory address + 16 * lane (bytes)
  const unsigned* lane_ring_at;  // the same, as a pointer
  const std::uint32_t* rows;     // the lane's first word: the span's row g, word 2tg
  unsigned words, span_rows, g, tg;

  // Starts copying chunk s of step `step` into stage `stage`. Checked: the partial last step,
  // whose rows past the span read as zeros; words past the code (codes of 64 to 192 bits) too.
  template <bool Checked>
  __device__ __forceinline__ void fetch(unsigned step, unsigned s, unsigned stage) const {
    // Pointers from the step's own, by 32-bit offsets (one wide multiply-add each).
    const std::uint32_t* at = rows + step * (kStepRows * words) + 8u * s;
    const unsigned to = lane_ring + stage * 2u * 512u;
    const bool word = 8u * s + 2u * tg < words;
    const unsigned row_words[4] = {0u, 8u * words, 16u * words, 24u * words};
#pragma unroll
    for (unsigned t = 0; t < 2; ++t) {
#pragma unroll
      for (unsigned h = 0; h < 2; ++h) {
        const unsigned row = 16u * t + 8u * h;
        const bool present = word && (!Checked || step * kStepRows + row + g < span_rows);
        const std::uint32_t* from = at + row_words[2 * t + h];
        if (Checked && !present) from = rows;  // not read (zero-filled); inside the span
        copy_async_pair(to + 512u * t + 4u * h, from, present);  // a[t][h], a[t][h + 2]
      }
    }
    copy_async_commit();
  }
  // The same, or only an empty group past the span's last step (the wait counts stay uniform).
  __device__ __forceinline__ void fetch(unsigned step, unsigned s, unsigned all_steps,
                                        unsigned full_steps, unsigned stage) const {
    if (step >= all_steps) {
      copy_async_commit();
    } else if (step >= full_steps) {
      fetch<true>(step, s, stage);
    } else {
      fetch<false>(step, s, stage);
    }
  }
  // This lane's A fragments of the unit in `stage` (once it has landed).
  __device__ __forceinline__ StepRows read(unsigned stage) const {
    StepRows r;
#pragma unroll
    for (unsigned t = 0; t < 2; ++t) {
      const uint4 a = *reinterpret_cast<const uint4*>(lane_ring_at + (2u * stage + t) * 128u);
      r.a[t][0] = a.x;
      r.a[t][1] = a.y;
      r.a[t][2] = a.z;
      r.a[t][3] = a.w;
    }
    return r;
  }
};

// The step's products for every tile and fragment: d = (First ? c : d) + popc(a AND NOT q) +
// popc(NOT a AND q); b[f]: the lane's B fragments of this 256-bit chunk (q, then NOT q).
template <unsigned Fragments, bool First>
__device__ __forceinline__ void step_products(const StepRows& r, const uint4 (&b)[Fragments],
                                              const int (&c)[Fragments][4],
                                              int (&d)[2][Fragments][4]) {
#pragma unroll
  for (unsigned f = 0; f < Fragments; ++f) {
#pragma unroll
    for (unsigned t = 0; t < 2; ++t) {
      const unsigned na[4] = {~r.a[t][0], ~r.a[t][1], ~r.a[t][2], ~r.a[t][3]};
      int e[4];
      if constexpr (First) {
        mma_and_popc(e, r.a[t], b[f].z, b[f].w, c[f]);
      } else {
        mma_and_popc(e, r.a[t], b[f].z, b[f].w, d[t][f]);
      }
      mma_and_popc(d[t][f], na, b[f].x, b[f].y, e);
    }
  }
}

// A copy the compiler cannot merge with its source: the accumulator quads hold each limit
// twice (rows g and g + 8), and a quad of distinct registers can feed the products in place
// every step instead of being rebuilt from two.
__device__ __forceinline__ int distinct_copy(int value) {
  int copy;
  asm volatile("mov.b32 %0, %1;" : "=r"(copy) : "r"(value));
  return copy;
}

// Staged (the pooled search's passes over a database that fits the L2 cache, as
// hamming_topk_kernel.cpp decides): rows through RowStages and appends sent per warp. Their shared
// memory costs the L1 cache that lets a block's warps (one span, other query tiles) share the rows
// they read, so over a larger database, whose rows come from DRAM, the plain scan is faster
// (docs/PERFORMANCE.md).
template <unsigned Fragments, bool Mma, bool Staged>
__global__ void __launch_bounds__(kHammingScanWarps * 32) hamming_scan_kernel(HammingLaunch p) {
  static_assert(Fragments == 1 || Fragments == 2 || Fragments == 4, "tiles of 8, 16 or 32 queries");
  static_assert(Mma || !Staged, "the staged scan is a tensor-core path");
  constexpr unsigned kQueries = 8 * Fragments;
  extern __shared__ unsigned shared[];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const unsigned g = lane >> 2, tg = lane & 3u;
  const unsigned words = p.words, steps = (words + 7u) / 8u;

  // This warp's tile and span; a warp with neither returns (no barrier waits for it).
  const unsigned tiles_per_block = p.tiles_per_block;
  const unsigned tile = blockIdx.y * tiles_per_block + warp % tiles_per_block;
  const unsigned span = blockIdx.x * (blockDim.x / 32u / tiles_per_block) + warp / tiles_per_block;
  const unsigned tile_begin = tile * kQueries;
  if (tile_begin >= p.query_count || span >= p.groups) return;
  const unsigned queries = min(kQueries, p.query_count - tile_begin);

  unsigned* mine = shared + warp * warp_shared_words(Fragments, p.cap, words, Staged);
  const WarpBuffers buffers{mine, mine + kQueries, mine + 2 * kQueries,
                            mine + 2 * kQueries + (Staged ? 0 : 256), p.cap, p.k};
  unsigned* codes = buffers.keys + kQueries * p.cap;
  const std::uint32_t* tile_codes = p.queries + std::uint64_t{p.query_begin + tile_begin} * words;
  // The thresholds start at the query's bound where the bound passes left one: a key of
  // distance bound + 1, so that rows up to the bound pass (a row past it has k rows nearer).
  for (unsigned j = lane; j < kQueries; j += 32) {
    buffers.count[j] = 0;
    unsigned start = 0u;  // past the tile: nothing passes
    if (j < queries) {
      const unsigned bound = p.bounds != nullptr && !p.sample
                                 ? p.bounds[std::uint64_t{tile_begin + j} * p.sample_stride]
                                 : kNone;
      start = bound == kNone ? kNoKey : (bound + 1u) << kHammingScanLocalBits;
    }
    buffers.threshold[j] = start;
  }
  if (Mma) {
    // Each lane's own B fragments (only it reads them): step s, fragment f: query 8f + g, words
    // 8s + 2tg, + 1, and their complements.
    for (unsigned s = 0; s < steps; ++s) {
#pragma unroll
      for (unsigned f = 0; f < Fragments; ++f) {
        const unsigned j = 8u * f + g, w = 8u * s + 2u * tg;
        const bool present = j < queries && w < words;
        const std::uint32_t* code = tile_codes + std::uint64_t{j} * words + w;
        const unsigned q0 = present ? code[0] : 0u, q1 = present ? code[1] : 0u;
        reinterpret_cast<uint4*>(codes)[(s * Fragments + f) * 32u + lane] = make_uint4(q0, q1, ~q0, ~q1);
      }
    }
  } else {
    for (unsigned i = lane; i < kQueries * words; i += 32)
      codes[i] = i / words < queries ? tile_codes[i] : 0u;
  }
  __syncwarp();

  const unsigned span_begin = span * p.group_items;
  const unsigned span_rows = min(p.group_items, p.items - span_begin);
  const std::uint32_t* span_codes = p.database + std::uint64_t{span_begin} * words;
  const unsigned full_steps = span_rows / kStepRows;
  const unsigned all_steps = (span_rows + kStepRows - 1u) / kStepRows;

  if (Mma) {
    // Minus each query's limit, as the products' accumulator: c[f] = {-limit(8f + 2tg),
    // -limit(8f + 2tg + 1)} for rows g and g + 8.
    int c[Fragments][4];
    const auto load_limits = [&] {
#pragma unroll
      for (unsigned f = 0; f < Fragments; ++f) {
        c[f][0] = p.sample ? 0 : -buffers.limit(8u * f + 2u * tg);
        c[f][1] = p.sample ? 0 : -buffers.limit(8u * f + 2u * tg + 1u);
        c[f][2] = distinct_copy(c[f][0]);
        c[f][3] = distinct_copy(c[f][1]);
      }
    };
    load_limits();
    // The staged scan's ring and appends (entries j << kHammingScanLocalBits | row in the span;
    // past the warp's shared memory in the plain scan, never touched there).
    unsigned* ring = codes + ((words + 7u) / 8u) * Fragments * 32u * 4u;
    const unsigned* lane_ring = ring + 4u * lane;
    unsigned* appends = ring + kRowStages * kStageWords;
    unsigned* append_count = appends + kStagedAppends;
    if (Staged && lane == 0) *append_count = 0;
    __syncwarp();
    // A warp's appends go out together: one global atomic's wait for up to 32 of them (a lane
    // appending on its own waited for each before its next, k = 100's ~1M appends most of the
    // scan's time).
    const auto flush_appends = [&] {
      __syncwarp();
      const unsigned n = *append_count;
      for (unsigned i = lane; i < n; i += 32u) {
        const unsigned e = appends[i];
        pool_append(p, tile_begin + (e >> kHammingScanLocalBits), span_begin + (e & kLocalMask));
      }
      __syncwarp();
      if (lane == 0) *append_count = 0;
      __syncwarp();
    };
    const RowStages stages{static_cast<unsigned>(__cvta_generic_to_shared(lane_ring)), lane_ring,
                           span_codes + g * words + 2u * tg, words, span_rows, g, tg};
    // d[t][f][e]: tile t, fragment f; e = 0, 1: row 16t + g, queries 8f + 2tg, + 1; e = 2, 3:
    // row 16t + g + 8, the same queries. Distance minus limit.
    const uint4* fragments = reinterpret_cast<const uint4*>(codes) + lane;
    // A step's distances: one vote for the warp (a lane's distances or-ed, a tile-fragment's
    // four first); only the lanes holding a distance below its limit insert, each its own, and
    // the warp cuts and reloads limits only when an insertion filled a buffer.
    const auto take = [&](const int (&d)[2][Fragments][4], unsigned first) {
      int group[2][Fragments];
      int negative = 0;
#pragma unroll
      for (unsigned t = 0; t < 2; ++t) {
#pragma unroll
        for (unsigned f = 0; f < Fragments; ++f) {
          group[t][f] = d[t][f][0] | d[t][f][1] | d[t][f][2] | d[t][f][3];
          negative |= group[t][f];
        }
      }
      if (!__any_sync(kFull, negative < 0)) return;
      bool full = false;
      if (negative < 0) {
#pragma unroll
        for (unsigned t = 0; t < 2; ++t) {
#pragma unroll
          for (unsigned f = 0; f < Fragments; ++f) {
            if (group[t][f] >= 0) continue;
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) {
              const unsigned row = first + 16u * t + g + (e >= 2 ? 8u : 0u);
              if (d[t][f][e] < 0 && row < span_rows) {
                const unsigned j = 8u * f + 2u * tg + (e & 1u);
                if (Staged && p.pooled) {
                  appends[atomicAdd(append_count, 1u)] = j << kHammingScanLocalBits | row;
                } else if (p.pooled) {
                  pool_append(p, tile_begin + j, span_begin + row);
                } else {
                  full |= buffers.insert(j, static_cast<unsigned>(d[t][f][e] - c[f][e]), row);
                }
              }
            }
          }
        }
      }
      if (Staged && p.pooled) {
        __syncwarp();
        if (*append_count >= kAppendBatch) flush_appends();
      } else if (__any_sync(kFull, full)) {
        buffers.cut_full(queries, lane);
        load_limits();
      }
    };
    // The bound passes' first (p.sample): per query, the smallest distance of the span's rows
    // (a span of the sample: one group), kept per lane while the span runs (rows past the span
    // count as none), then taken over the lanes and written to p.minima.
    int minima[Fragments][2];
#pragma unroll
    for (unsigned f = 0; f < Fragments; ++f) minima[f][0] = minima[f][1] = 0x7FFFFFFF;
    const auto take_minima = [&](const int (&d)[2][Fragments][4], unsigned step, bool checked) {
#pragma unroll
      for (unsigned t = 0; t < 2; ++t) {
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) {
          const bool present = !checked || step * kStepRows + 16u * t + g + (e >= 2 ? 8u : 0u) < span_rows;
#pragma unroll
          for (unsigned f = 0; f < Fragments; ++f) {
            if (present) minima[f][e & 1u] = min(minima[f][e & 1u], d[t][f][e]);
          }
        }
      }
    };
    const auto write_minima = [&] {
#pragma unroll
      for (unsigned f = 0; f < Fragments; ++f) {
#pragma unroll
        for (unsigned i = 0; i < 2; ++i) {
          int m = minima[f][i];
          m = min(m, __shfl_xor_sync(kFull, m, 4));
          m = min(m, __shfl_xor_sync(kFull, m, 8));
          m = min(m, __shfl_xor_sync(kFull, m, 16));
          const unsigned j = 8u * f + 2u * tg + i;
          if (g == 0 && j < queries)
            p.minima[std::uint64_t{tile_begin + j} * p.sample_stride + span] = static_cast<unsigned>(m);
        }
      }
    };
    const auto fragments_of = [&](unsigned s, uint4 (&b)[Fragments]) {
#pragma unroll
      for (unsigned f = 0; f < Fragments; ++f) b[f] = fragments[(s * Fragments + f) * 32u];
    };
    // A loop over the span's steps of 256 bits or fewer (`run`, given what takes a step's
    // distances), with this pass's take.
    const auto run_steps = [&](const auto& run) {
      if (p.sample) {
        run([&](const int (&d)[2][Fragments][4], unsigned step) {
          take_minima(d, step, step >= full_steps);
        });
      } else {
        run([&](const int (&d)[2][Fragments][4], unsigned step) { take(d, step * kStepRows); });
      }
    };
    if constexpr (Staged) {
      if (steps == 1) {
        // 256 bits or fewer: a unit is a step; the B fragments stay in registers.
        uint4 b[Fragments];
        fragments_of(0, b);
        const auto run = [&](auto take_step) {
          for (unsigned u = 0; u + 1u < kRowStages; ++u)
            stages.fetch(u, 0, all_steps, full_steps, u);
          for (unsigned step = 0; step < all_steps; ++step) {
            copy_async_wait<kRowStages - 2>();  // this step's unit has landed
            const unsigned ahead = step + kRowStages - 1u;
            stages.fetch(ahead, 0, all_steps, full_steps, ahead % kRowStages);
            int d[2][Fragments][4];
            step_products<Fragments, true>(stages.read(step % kRowStages), b, c, d);
            take_step(d, step);
          }
        };
        run_steps(run);
      } else {
        // Units in order: step 0 chunks 0 .. steps - 1, step 1, ...; the fetches run
        // kRowStages - 1 units ahead of the products.
        unsigned fetched = 0, fetch_step = 0, fetch_chunk = 0, unit = 0;
        const auto fetch_next = [&] {
          stages.fetch(fetch_step, fetch_chunk, all_steps, full_steps, fetched++ % kRowStages);
          if (++fetch_chunk == steps) {
            fetch_chunk = 0;
            ++fetch_step;
          }
        };
        for (unsigned u = 0; u + 1u < kRowStages; ++u) fetch_next();
        for (unsigned step = 0; step < all_steps; ++step) {
          const unsigned first = step * kStepRows;
          int d[2][Fragments][4];
          for (unsigned s = 0; s < steps; ++s, ++unit) {
            copy_async_wait<kRowStages - 2>();
            fetch_next();
            uint4 b[Fragments];
            fragments_of(s, b);
            if (s == 0) {
              step_products<Fragments, true>(stages.read(unit % kRowStages), b, c, d);
            } else {
              step_products<Fragments, false>(stages.read(unit % kRowStages), b, c, d);
            }
          }
          if (p.sample) {
            take_minima(d, step, step >= full_steps);
          } else {
            take(d, first);
          }
        }
      }
    } else {
      // The step's rows from `at` (this lane's first word of the step's row g): words 2tg and
      // 2tg + 1 of chunk s of rows g, g + 8, g + 16, g + 24; zero past the code (words is even:
      // both or neither) or past the span (`checked`: the last, partial step).
      const unsigned row8 = 8u * words;
      const auto load_step = [&](const std::uint32_t* at, unsigned first, unsigned s,
                                 bool checked) {
        StepRows r;
        const bool word = s + 1u < steps || 8u * s + 2u * tg < words;
#pragma unroll
        for (unsigned t = 0; t < 2; ++t) {
#pragma unroll
          for (unsigned h = 0; h < 2; ++h) {
            const bool present = word && (!checked || first + 16u * t + 8u * h + g < span_rows);
            const std::uint32_t* x = at + (2u * t + h) * row8 + 8u * s;
            r.a[t][h] = present ? __ldg(x) : 0u;
            r.a[t][h + 2] = present ? __ldg(x + 1) : 0u;
          }
        }
        return r;
      };
      const std::uint32_t* lane_rows = span_codes + g * words + 2u * tg;
      const std::uint64_t step_words = std::uint64_t{kStepRows} * words;
      if (steps == 1) {
        // 256 bits or fewer: the B fragments stay in registers; the lane's four rows have a
        // pointer each, moved a step at a time; each step's rows are loaded a step ahead (two
        // sets of registers, used in turn), so that their latency overlaps the step before.
        uint4 b[Fragments];
        fragments_of(0, b);
        const std::uint32_t* rows[4] = {lane_rows, lane_rows + row8, lane_rows + 2 * row8,
                                        lane_rows + 3 * row8};
        const auto load_next = [&](unsigned first) {
          StepRows r;
          const bool word = 2u * tg < words;
#pragma unroll
          for (unsigned t = 0; t < 2; ++t) {
#pragma unroll
            for (unsigned h = 0; h < 2; ++h) {
              const bool present = word && first + 16u * t + 8u * h + g < span_rows;
              const std::uint32_t* x = rows[2 * t + h];
              r.a[t][h] = present ? __ldg(x) : 0u;
              r.a[t][h + 2] = present ? __ldg(x + 1) : 0u;
              rows[2 * t + h] = x + step_words;
            }
          }
          return r;
        };
        const auto run = [&](auto take_step) {
          StepRows x = load_next(0), y;
          for (unsigned step = 0; step < all_steps; step += 2) {
            const unsigned first = step * kStepRows;
            if (step + 1u < all_steps) y = load_next(first + kStepRows);
            int d[2][Fragments][4];
            step_products<Fragments, true>(x, b, c, d);
            take_step(d, step);
            if (step + 1u >= all_steps) break;
            if (step + 2u < all_steps) x = load_next(first + 2 * kStepRows);
            step_products<Fragments, true>(y, b, c, d);
            take_step(d, step + 1u);
          }
        };
        run_steps(run);
      } else {
        const std::uint32_t* at = lane_rows;
        for (unsigned step = 0; step < all_steps; ++step, at += step_words) {
          const unsigned first = step * kStepRows;
          const bool checked = step >= full_steps;
          int d[2][Fragments][4];
          uint4 b[Fragments];
          fragments_of(0, b);
          step_products<Fragments, true>(load_step(at, first, 0, checked), b, c, d);
          for (unsigned s = 1; s < steps; ++s) {
            fragments_of(s, b);
            step_products<Fragments, false>(load_step(at, first, s, checked), b, c, d);
          }
          if (p.sample) {
            take_minima(d, step, checked);
          } else {
            take(d, first);
          }
        }
      }
    }
    if (p.sample) {
      write_minima();
      return;
    }
    if (p.pooled) {  // the select pass takes it from the pools
      if (Staged) flush_appends();
      return;
    }
  } else {
    // The popcount path: lane l takes row l of each step, against every query of the tile.
    int limits[kQueries];
    const auto load_limits = [&] {
#pragma unroll
      for (unsigned j = 0; j < kQueries; ++j) limits[j] = buffers.limit(j);
    };
    load_limits();
    for (unsigned step = 0; step < all_steps; ++step) {
      const unsigned row = step * kStepRows + lane;
      const bool present = row < span_rows;
      const std::uint32_t* at = span_codes + std::uint64_t{row} * words;
      unsigned distance[kQueries] = {};
      for (unsigned w = 0; w < words; ++w) {
        const unsigned x = present ? __ldg(at + w) : 0u;
#pragma unroll
        for (unsigned j = 0; j < kQueries; ++j) distance[j] += __popc(x ^ codes[j * words + w]);
      }
      bool any = false;
#pragma unroll
      for (unsigned j = 0; j < kQueries; ++j) any = any || static_cast<int>(distance[j]) < limits[j];
      if (!__any_sync(kFull, any && present)) continue;
      bool full = false;
      if (any && present) {
#pragma unroll
        for (unsigned j = 0; j < kQueries; ++j) {
          if (static_cast<int>(distance[j]) < limits[j]) full |= buffers.insert(j, distance[j], row);
        }
      }
      if (__any_sync(kFull, full)) {
        buffers.cut_full(queries, lane);
        load_limits();
      }
    }
  }

  // The span's run per query: its min(k, rows) smallest keys, sorted; slots the bound left
  // empty (it turned away rows that k rows elsewhere beat) are padding. Without a bound every
  // row passed until the buffer held k keys, so it holds at least min(k, rows).
  const unsigned keep = min(p.k, span_rows);
  for (unsigned j = 0; j < queries; ++j) {
    unsigned* buffer = buffers.keys + j * p.cap;
    if (buffers.count[j] > keep) keep_smallest(buffer, buffers.count + j, keep, lane, buffers.histogram);
    const unsigned kept = buffers.count[j];
    sort_keys(buffer, kept, lane);
    const unsigned q = tile_begin + j;
    if (p.final) {
      for (unsigned i = lane; i < p.k; i += 32) {
        const std::uint64_t at = std::uint64_t{p.query_begin + q} * p.k + i;
        p.distances[at] = i < kept ? buffer[i] >> kHammingScanLocalBits : kNone;
        p.indices[at] = i < kept ? span_begin + (buffer[i] & kLocalMask) : kNone;
      }
    } else {
      const std::uint64_t run = std::uint64_t{p.out_base} + std::uint64_t{q} * p.out_stride +
                                std::uint64_t{span} * min(p.k, p.group_items);
      for (unsigned i = lane; i < keep; i += 32) {
        p.scratch[2 * (run + i)] = i < kept ? buffer[i] >> kHammingScanLocalBits : kNone;
        p.scratch[2 * (run + i) + 1] = i < kept ? span_begin + (buffer[i] & kLocalMask) : kNone;
      }
    }
    __syncwarp();
  }
}

}  // namespace ferry::cuda::scan
