// hamming_topk's level 0 on CUDA: one block scans a span of database rows for a tile of queries
// and keeps, per query, the span's min(k, rows) nearest (distance, index) pairs, without ever
// storing the distance matrix. Distances come from the binary tensor cores (mma ... .b1 ...
// .and.popc, sm_80 and later: popc(a) + popc(b) - 2 popc(a AND b)) or from XOR + popcount.
//
// Selection: a running threshold per query. Keys are distance << 19 | (row - span begin), so
// key order is exactly the (distance, index) order. A key below the query's threshold goes into
// the query's buffer in shared memory; between rounds of kRoundRows rows, a warp compacts any
// buffer that the next round could overflow to its k smallest keys (the k-th found by a bitwise
// search over the key values) and lowers the threshold to the k-th key. Rows arrive in rounds of
// increasing index, so after a few rounds almost nothing passes the threshold: the scan costs a
// compare per distance. At the span's end the kept keys are sorted (bitonic) and written.
#pragma once

#include <cstdint>

#include "hamming_topk_launch.hpp"

namespace ferry::cuda::scan {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr unsigned kNoKey = 0xFFFFFFFFu;
constexpr unsigned kNone = 0xFFFFFFFFu;
constexpr unsigned kWarps = kHammingBlock / 32;
constexpr unsigned kTileRows = 16;  // an mma's M: rows per warp per round
constexpr unsigned kRoundRows = kWarps * kTileRows;
static_assert(kRoundRows == kHammingScanRoundRows);
constexpr unsigned kLocalMask = (1u << kHammingScanLocalBits) - 1u;

__device__ __forceinline__ unsigned warp_sum(unsigned value) {
  for (unsigned offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(kFull, value, offset);
  return value;
}

__device__ __forceinline__ unsigned warp_max(unsigned value) {
  for (unsigned offset = 16; offset > 0; offset >>= 1)
    value = max(value, __shfl_xor_sync(kFull, value, offset));
  return value;
}

// c += popc(A AND B) over a 16 x 8 tile of 256-bit rows (A: database rows, B: queries).
__device__ __forceinline__ void mma_and_popc(unsigned (&c)[4], unsigned a0, unsigned a1,
                                             unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  (void)c, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
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

// The first 256 bits (one mma step) of a thread's two rows of a warp's 16, rows g and g + 8:
// a0, a1 words tg of them, a2, a3 words tg + 4 (zero past the code or past the span).
struct RowFragment {
  unsigned a[4];
};

// Shared memory: thresholds, counts and popcounts of the tile's queries, a 256-word histogram
// per warp (keep_smallest), the queries' key buffers (cap each), the query codes (mma: B
// fragments, uint2 per lane; else plain rows), then a word saying when a compaction last ran.
// Four blocks an SM (64 registers): left free, the compiler took 128 for the tensor-core path, two
// blocks an SM, and 1000 x 1M x 256-bit k = 10 took 1.59 ms instead of 1.32 on an H100.
template <unsigned Fragments, bool Mma>
__global__ void __launch_bounds__(kHammingBlock, 4) hamming_scan_kernel(HammingLaunch p) {
  static_assert(Fragments <= 4, "tiles of at most 32 queries");
  constexpr unsigned kQueries = 8 * Fragments;
  extern __shared__ unsigned shared[];
  unsigned* threshold = shared;
  unsigned* count = shared + kQueries;
  unsigned* query_popc = shared + 2 * kQueries;
  unsigned* histograms = shared + 3 * kQueries;
  unsigned* keys = histograms + kWarps * 256;
  unsigned* codes = keys + kQueries * p.cap;
  // The last round (+ 1) of the span in which a warp compacted a buffer (and moved a threshold).
  unsigned* compacted_round = codes + kQueries * ((p.words + 7u) / 8u * 8u);

  const unsigned t = threadIdx.x, lane = t & 31u, warp = t >> 5, g = lane >> 2, tg = lane & 3u;
  const unsigned words = p.words, steps = (words + 7u) / 8u;
  const unsigned tile = blockIdx.y * kQueries;  // within the slice
  const unsigned queries = min(kQueries, p.query_count - tile);
  const std::uint32_t* tile_codes = p.queries + std::uint64_t{p.query_begin + tile} * words;

  if (Mma) {
    // Fragment (s, f, lane l): b0 = word 8s + l % 4 of query 8f + l / 4, b1 = word 8s + 4 + l % 4.
    for (unsigned i = t; i < steps * Fragments * 32u; i += kHammingBlock) {
      const unsigned l = i & 31u, f = (i >> 5) % Fragments, s = (i >> 5) / Fragments;
      const unsigned j = 8u * f + (l >> 2), w0 = 8u * s + (l & 3u), w1 = w0 + 4u;
      const std::uint32_t* code = tile_codes + std::uint64_t{j} * words;
      codes[2 * i] = j < queries && w0 < words ? code[w0] : 0u;
      codes[2 * i + 1] = j < queries && w1 < words ? code[w1] : 0u;
    }
  } else {
    for (unsigned i = t; i < kQueries * words; i += kHammingBlock)
      codes[i] = i / words < queries ? tile_codes[i] : 0u;
  }
  for (unsigned j = warp; j < kQueries; j += kWarps) {
    unsigned bits = 0;
    if (j < queries) {
      for (unsigned w = lane; w < words; w += 32) bits += __popc(tile_codes[std::uint64_t{j} * words + w]);
    }
    bits = warp_sum(bits);
    if (lane == 0) query_popc[j] = bits;
  }
  __syncthreads();
  int popc_q[Fragments][2];
#pragma unroll
  for (unsigned f = 0; f < Fragments; ++f) {
    popc_q[f][0] = static_cast<int>(query_popc[8 * f + 2 * tg]);
    popc_q[f][1] = static_cast<int>(query_popc[8 * f + 2 * tg + 1]);
  }
  // A row past the span: a "popcount" that puts it beyond every limit.
  constexpr int kAbsent = 1 << 20;

  for (unsigned span = blockIdx.x; span < p.groups; span += gridDim.x) {
    const unsigned span_begin = span * p.group_items;
    const unsigned span_rows = min(p.group_items, p.items - span_begin);
    // Queries past the tile's end never take a key (threshold 0).
    for (unsigned j = t; j < kQueries; j += kHammingBlock) {
      count[j] = 0;
      threshold[j] = j < queries ? kNoKey : 0u;
    }
    if (t == 0) *compacted_round = 0;
    __syncthreads();
    const std::uint32_t* span_codes = p.database + std::uint64_t{span_begin} * words;
    const unsigned rounds = (span_rows + kRoundRows - 1) / kRoundRows;
    // The rows' first mma step is loaded a round ahead, so that its latency overlaps the round
    // before (measured on an H100, 1000 x 1M x 256-bit: k = 100 3.07 -> 2.56 ms).
    RowFragment next{};
    // The thread's word tg of its row a in the coming round: a cursor, advanced a round at a time
    // (the addressing stays a few instructions in the loop).
    const bool word_lo = tg < words, word_hi = tg + 4u < words;
    const unsigned row_b = 8u * words;  // row b's offset from row a
    const std::uint32_t* cursor = span_codes + (warp * kTileRows + g) * words + tg;
    const auto load_first_step = [&](unsigned la) {
      const bool va = la < span_rows, vb = la + 8u < span_rows;
      RowFragment r;
      r.a[0] = va && word_lo ? __ldg(cursor) : 0u;
      r.a[1] = vb && word_lo ? __ldg(cursor + row_b) : 0u;
      r.a[2] = va && word_hi ? __ldg(cursor + 4) : 0u;
      r.a[3] = vb && word_hi ? __ldg(cursor + row_b + 4) : 0u;
      return r;
    };
    if (Mma) next = load_first_step(warp * kTileRows + g);
    // A row of a round enters a query's buffer when its distance is below the distance of the
    // query's threshold key: every row of a later round has a larger index than the keys kept,
    // so a row at that distance would rank after the threshold key. With d = popc(q) + x, x =
    // popc(row) - 2 popc(q AND row): x < limit = threshold distance - popc(q). No threshold yet:
    // 8191 (past any distance); a query past the tile: 0 (nothing passes). Held in registers,
    // read again only after a round that compacted.
    int limit[Fragments][2];
    const auto load_limits = [&] {
#pragma unroll
      for (unsigned f = 0; f < Fragments; ++f) {
        limit[f][0] = static_cast<int>(threshold[8 * f + 2 * tg] >> kHammingScanLocalBits) - popc_q[f][0];
        limit[f][1] = static_cast<int>(threshold[8 * f + 2 * tg + 1] >> kHammingScanLocalBits) - popc_q[f][1];
      }
    };
    load_limits();
    for (unsigned round = 0; round < rounds; ++round) {
      // This thread's rows: la (mma rows g) and lb (g + 8) of the warp's tile.
      const unsigned la = round * kRoundRows + warp * kTileRows + g, lb = la + 8u;
      const bool va = la < span_rows, vb = lb < span_rows;
      const std::uint32_t* ra = span_codes + la * words;
      const std::uint32_t* rb = span_codes + lb * words;
      // x[f][e]: e = 0, 1: row la, queries 8f + 2tg, + 1; e = 2, 3: row lb, the same queries.
      int x[Fragments][4];
      if (Mma) {
        const RowFragment first = next;
        if (round + 1 < rounds) {
          cursor += kRoundRows * words;
          next = load_first_step(la + kRoundRows);
        }
        const uint2* fragments = reinterpret_cast<const uint2*>(codes) + lane;
        unsigned acc[Fragments][4];
#pragma unroll
        for (unsigned f = 0; f < Fragments; ++f) {
          acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0u;
          const uint2 b = fragments[f * 32u];
          mma_and_popc(acc[f], first.a[0], first.a[1], first.a[2], first.a[3], b.x, b.y);
        }
        unsigned popc_a = __popc(first.a[0]) + __popc(first.a[2]);
        unsigned popc_b = __popc(first.a[1]) + __popc(first.a[3]);
        for (unsigned s = 1; s < steps; ++s) {
          const unsigned w0 = 8u * s + tg, w1 = w0 + 4u;
          const unsigned a0 = va && w0 < words ? __ldg(ra + w0) : 0u;
          const unsigned a1 = vb && w0 < words ? __ldg(rb + w0) : 0u;
          const unsigned a2 = va && w1 < words ? __ldg(ra + w1) : 0u;
          const unsigned a3 = vb && w1 < words ? __ldg(rb + w1) : 0u;
          popc_a += __popc(a0) + __popc(a2);
          popc_b += __popc(a1) + __popc(a3);
#pragma unroll
          for (unsigned f = 0; f < Fragments; ++f) {
            const uint2 b = fragments[(s * Fragments + f) * 32u];
            mma_and_popc(acc[f], a0, a1, a2, a3, b.x, b.y);
          }
        }
        popc_a += __shfl_xor_sync(kFull, popc_a, 1);
        popc_a += __shfl_xor_sync(kFull, popc_a, 2);
        popc_b += __shfl_xor_sync(kFull, popc_b, 1);
        popc_b += __shfl_xor_sync(kFull, popc_b, 2);
        const int pa = va ? static_cast<int>(popc_a) : kAbsent;
        const int pb = vb ? static_cast<int>(popc_b) : kAbsent;
#pragma unroll
        for (unsigned f = 0; f < Fragments; ++f) {
          x[f][0] = pa - 2 * static_cast<int>(acc[f][0]);
          x[f][1] = pa - 2 * static_cast<int>(acc[f][1]);
          x[f][2] = pb - 2 * static_cast<int>(acc[f][2]);
          x[f][3] = pb - 2 * static_cast<int>(acc[f][3]);
        }
      } else {
        unsigned d[Fragments][4];
#pragma unroll
        for (unsigned f = 0; f < Fragments; ++f) d[f][0] = d[f][1] = d[f][2] = d[f][3] = 0u;
        for (unsigned w = 0; w < words; ++w) {
          const unsigned xa = va ? __ldg(ra + w) : 0u, xb = vb ? __ldg(rb + w) : 0u;
#pragma unroll
          for (unsigned f = 0; f < Fragments; ++f) {
            const unsigned qa = codes[(8u * f + 2u * tg) * words + w];
            const unsigned qb = codes[(8u * f + 2u * tg + 1u) * words + w];
            d[f][0] += __popc(xa ^ qa);
            d[f][1] += __popc(xa ^ qb);
            d[f][2] += __popc(xb ^ qa);
            d[f][3] += __popc(xb ^ qb);
          }
        }
#pragma unroll
        for (unsigned f = 0; f < Fragments; ++f) {
#pragma unroll
          for (unsigned e = 0; e < 4; ++e)
            x[f][e] = ((e < 2 ? va : vb) ? static_cast<int>(d[f][e]) : kAbsent) - popc_q[f][e & 1u];
        }
      }
      // Keys below their query's limit go to its buffer: rare once the thresholds settle, so
      // the common test is one compare per distance, or-ed into one flag (ISETP's predicate
      // combine), and the keys are made only when a lane of the warp has one.
      bool any = false;
#pragma unroll
      for (unsigned f = 0; f < Fragments; ++f) {
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) any = any || x[f][e] < limit[f][e & 1u];
      }
      if (__any_sync(kFull, any)) {
#pragma unroll
        for (unsigned f = 0; f < Fragments; ++f) {
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            if (x[f][e] < limit[f][e & 1u]) {
              const unsigned j = 8u * f + 2u * tg + (e & 1u);
              const unsigned distance = static_cast<unsigned>(x[f][e] + popc_q[f][e & 1u]);
              keys[j * p.cap + atomicAdd(&count[j], 1u)] =
                  (distance << kHammingScanLocalBits) | (e < 2 ? la : lb);
            }
          }
        }
      }
      __syncthreads();
      // A round adds at most kRoundRows keys per query: compact the buffers it could overflow.
      for (unsigned j = warp; j < queries; j += kWarps) {
        if (count[j] > p.cap - kRoundRows) {
          const unsigned kth = keep_smallest(keys + j * p.cap, count + j, p.k, lane, histograms + warp * 256);
          if (lane == 0) {
            threshold[j] = kth;
            atomicExch(compacted_round, round + 1);  // several warps may: the same value
          }
        }
      }
      __syncthreads();
      if (*compacted_round == round + 1) load_limits();  // the same for the whole block
    }
    // The span's result per query: its min(k, rows) smallest keys, sorted.
    const unsigned keep = min(p.k, span_rows);
    for (unsigned j = warp; j < queries; j += kWarps) {
      unsigned* buffer = keys + j * p.cap;
      if (count[j] > keep) keep_smallest(buffer, count + j, keep, lane, histograms + warp * 256);
      sort_keys(buffer, keep, lane);
      const unsigned q = tile + j;
      if (p.final) {
        for (unsigned i = lane; i < p.k; i += 32) {
          const std::uint64_t at = std::uint64_t{p.query_begin + q} * p.k + i;
          p.distances[at] = i < keep ? buffer[i] >> kHammingScanLocalBits : kNone;
          p.indices[at] = i < keep ? span_begin + (buffer[i] & kLocalMask) : kNone;
        }
      } else {
        const std::uint64_t run = std::uint64_t{p.out_base} + std::uint64_t{q} * p.out_stride +
                                  std::uint64_t{span} * min(p.k, p.group_items);
        for (unsigned i = lane; i < keep; i += 32) {
          p.scratch[2 * (run + i)] = buffer[i] >> kHammingScanLocalBits;
          p.scratch[2 * (run + i) + 1] = span_begin + (buffer[i] & kLocalMask);
        }
      }
    }
    __syncthreads();  // the buffers are reset for the next span
  }
}

}  // namespace ferry::cuda::scan
