// The hamming_topk kernels: one launch per pass of the plan (runtime/src/ops/hamming_topk.hpp).
// Level 0 is the scan kernel (hamming_topk_scan.cuh: a warp per span of rows and tile of queries,
// distances on the binary tensor cores or by popcount, a running threshold per query), after
// the bound passes on the tensor-core path (the same kernel over a sample of rows, then
// hamming_bound_kernel below); for the pooled search (hamming_topk_kernel.cpp) the scan fills
// each query's pool and hamming_select_kernel below picks its k, with no merges. The merges are
// the shader's (shaders/hamming_topk.comp), line for
// line where they can be: a block keeps, per query, the min(k, count) smallest (distance, index)
// pairs of its group of `count` candidates: a histogram of the distances gives the threshold T, a
// bitmask of the items at T the lowest positions among them, and the kept keys (distance << 16 |
// position) are sorted with a bitonic sort in shared memory. Unlike the shader's, a group may
// hold padding (distance kNone: a span whose rows the bound turned away), which sorts last.
#include <cstdint>

#include "hamming_topk_launch.hpp"
#include "hamming_topk_scan.cuh"

namespace ferry::cuda {
namespace {

constexpr unsigned kNone = 0xFFFFFFFFu;
constexpr unsigned kItemsPerThread = kHammingMerge / kHammingBlock;  // 64

struct Shared {
  unsigned hist[kHammingBits + 1];
  unsigned ties[kHammingMerge / 32];
  unsigned keys[kHammingK];
  unsigned partial[kHammingBlock];
  unsigned threshold, nearer, cut, count;
};

// `dist[i]`: the distance of the thread's item i (local position i * block + thread), or kNone.
template <unsigned Items>
__device__ void select_and_write(Shared& s, const unsigned (&dist)[Items], const HammingLaunch& p,
                                 unsigned count, unsigned keep, unsigned query, unsigned in_at,
                                 unsigned out_at) {
  const unsigned t = threadIdx.x;
  const unsigned bins = p.words * 32u + 1u;
  for (unsigned b = t; b < bins; b += kHammingBlock) s.hist[b] = 0u;
  for (unsigned w = t; w < (count + 31u) / 32u; w += kHammingBlock) s.ties[w] = 0u;
  if (t == 0u) s.count = 0u;
  __syncthreads();
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) {
    if (dist[i] != kNone) atomicAdd(&s.hist[dist[i]], 1u);
  }
  __syncthreads();
  const unsigned per = (bins + kHammingBlock - 1u) / kHammingBlock;
  unsigned sum = 0u;
  for (unsigned b = t * per; b < min(bins, t * per + per); ++b) sum += s.hist[b];
  s.partial[t] = sum;
  __syncthreads();
  // Inclusive prefix sums of the threads' bins (log2(block) steps); the one thread whose bins
  // hold the keep-th item walks them.
  for (unsigned offset = 1u; offset < kHammingBlock; offset <<= 1) {
    const unsigned add = t >= offset ? s.partial[t - offset] : 0u;
    __syncthreads();
    s.partial[t] += add;
    __syncthreads();
  }
  const unsigned inclusive = s.partial[t];
  // Padding entries are not counted: keep at most the group's real entries (the rest of the
  // slots are written as padding). The count is the block's, so every thread takes the same
  // branch below (its barriers included).
  const unsigned slots = keep;
  keep = min(keep, s.partial[kHammingBlock - 1]);
  if (keep > 0u) {  // else padding only: every slot is written as padding below
    if (inclusive - sum < keep && inclusive >= keep) {
      unsigned nearer = inclusive - sum, threshold = t * per;
      while (nearer + s.hist[threshold] < keep) nearer += s.hist[threshold++];
      s.threshold = threshold;
      s.nearer = nearer;
    }
    __syncthreads();
    const unsigned threshold = s.threshold;
#pragma unroll
    for (unsigned i = 0; i < Items; ++i) {
      if (dist[i] == threshold) {
        const unsigned local = i * kHammingBlock + t;
        atomicOr(&s.ties[local >> 5], 1u << (local & 31u));
      }
    }
    __syncthreads();
    if (t == 0u) {
      // The position of the (keep - nearer)-th item at the threshold, counted from 1.
      unsigned need = keep - s.nearer, w = 0u;
      while (static_cast<unsigned>(__popc(s.ties[w])) < need) need -= __popc(s.ties[w++]);
      unsigned bits = s.ties[w];
      for (unsigned r = 1u; r < need; ++r) bits &= bits - 1u;
      s.cut = w * 32u + static_cast<unsigned>(__ffs(static_cast<int>(bits)) - 1);
    }
    __syncthreads();
    const unsigned cut = s.cut;
#pragma unroll
    for (unsigned i = 0; i < Items; ++i) {
      const unsigned d = dist[i], local = i * kHammingBlock + t;
      if (d != kNone && (d < threshold || (d == threshold && local <= cut))) {
        s.keys[atomicAdd(&s.count, 1u)] = (d << 16) | local;
      }
    }
    __syncthreads();
    unsigned size = 1u;
    while (size < keep) size <<= 1;
    for (unsigned i = keep + t; i < size; i += kHammingBlock) s.keys[i] = kNone;
    __syncthreads();
    for (unsigned block = 2u; block <= size; block <<= 1) {
      for (unsigned stride = block >> 1; stride > 0u; stride >>= 1) {
        for (unsigned i = t; i < size / 2u; i += kHammingBlock) {
          const unsigned a = (i / stride) * 2u * stride + (i % stride), b = a + stride;
          const unsigned ka = s.keys[a], kb = s.keys[b];
          if ((ka > kb) == ((a & block) == 0u)) {
            s.keys[a] = kb;
            s.keys[b] = ka;
          }
        }
        __syncthreads();
      }
    }
  }
  const unsigned written = p.final ? p.k : slots;
  for (unsigned i = t; i < written; i += kHammingBlock) {
    unsigned d = kNone, index = kNone;
    if (i < keep) {
      const unsigned key = s.keys[i], local = key & 0xFFFFu;
      d = key >> 16;
      index = p.scratch[2ull * (in_at + local) + 1u];
    }
    if (p.final) {
      const std::uint64_t at = std::uint64_t{p.query_begin + query} * p.k + i;
      p.distances[at] = d;
      p.indices[at] = index;
    } else {
      p.scratch[2ull * (out_at + i)] = d;
      p.scratch[2ull * (out_at + i) + 1u] = index;
    }
  }
  __syncthreads();  // shared memory is reused by the next call
}

__global__ void __launch_bounds__(kHammingBlock) hamming_merge_kernel(HammingLaunch p) {
  __shared__ Shared s;
  const unsigned t = threadIdx.x;
  const unsigned q = blockIdx.y;
  const unsigned keep_full = min(p.k, kHammingMerge);
  for (unsigned g = blockIdx.x; g < p.groups; g += gridDim.x) {
    const unsigned first = g * kHammingMerge;
    const unsigned count = min(kHammingMerge, p.items - first);
    const unsigned in_at = p.in_base + q * p.in_stride + first;
    unsigned dist[kItemsPerThread];
#pragma unroll
    for (unsigned i = 0; i < kItemsPerThread; ++i) {
      const unsigned local = i * kHammingBlock + t;
      dist[i] = local < count ? p.scratch[2ull * (in_at + local)] : kNone;
    }
    select_and_write(s, dist, p, count, min(p.k, count), q, in_at,
                     p.out_base + q * p.out_stride + g * keep_full);
  }
}

// The bound passes' second: per query of the slice (a block each), the k-th smallest of the
// sample's group minima (a histogram of the distances) is its bound: k different rows lie at or
// within it, so no row beyond it is among the k nearest. Fewer than k minima: no bound (kNone).
__global__ void __launch_bounds__(kHammingBlock) hamming_bound_kernel(HammingLaunch p) {
  __shared__ unsigned hist[kHammingBits + 1];
  __shared__ unsigned partial[kHammingBlock];
  __shared__ unsigned bound;
  const unsigned t = threadIdx.x, q = blockIdx.x;
  const unsigned bins = p.words * 32u + 1u;
  for (unsigned b = t; b < bins; b += kHammingBlock) hist[b] = 0u;
  if (t == 0u) bound = kNone;
  __syncthreads();
  const std::uint32_t* minima = p.minima + std::uint64_t{q} * p.sample_stride;
  for (unsigned i = t; i < p.sample_groups; i += kHammingBlock) {
    const unsigned m = minima[i];
    if (m < bins) atomicAdd(&hist[m], 1u);
  }
  __syncthreads();
  const unsigned per = (bins + kHammingBlock - 1u) / kHammingBlock;
  unsigned sum = 0u;
  for (unsigned b = t * per; b < min(bins, t * per + per); ++b) sum += hist[b];
  partial[t] = sum;
  __syncthreads();
  for (unsigned offset = 1u; offset < kHammingBlock; offset <<= 1) {
    const unsigned add = t >= offset ? partial[t - offset] : 0u;
    __syncthreads();
    partial[t] += add;
    __syncthreads();
  }
  const unsigned inclusive = partial[t];
  if (inclusive - sum < p.k && inclusive >= p.k) {
    unsigned below = inclusive - sum, b = t * per;
    while (below + hist[b] < p.k) below += hist[b++];
    bound = b;
  }
  __syncthreads();
  if (t == 0u) {
    p.bounds[std::uint64_t{q} * p.sample_stride] = bound;
    if (p.pool_counts != nullptr) p.pool_counts[q] = 0u;  // the pooled scan's, next
  }
}

// Sorts keys[0, size) ascending; size a power of two. Every thread of the block calls (after a
// barrier that follows the keys' writes).
__device__ void sort_keys64(unsigned long long* keys, unsigned size) {
  const unsigned t = threadIdx.x;
  for (unsigned block = 2u; block <= size; block <<= 1) {
    for (unsigned stride = block >> 1; stride > 0u; stride >>= 1) {
      for (unsigned i = t; i < size / 2u; i += kHammingBlock) {
        const unsigned a = 2u * i - (i & (stride - 1u)), b = a + stride;
        const unsigned long long ka = keys[a], kb = keys[b];
        if ((ka > kb) == ((a & block) == 0u)) {
          keys[a] = kb;
          keys[b] = ka;
        }
      }
      __syncthreads();
    }
  }
}

constexpr unsigned kSelectWarps = kHammingBlock / 32u;
// The select pass's shared memory: the query's code (room for the longest), then its keys; the
// exact pass has, after its kHammingK keys, the histogram, the ties per warp of a chunk and three
// counters.
constexpr unsigned kSelectCodeWords = kHammingBits / 32u;
constexpr unsigned kExactWords = kHammingBits + 1u + kSelectWarps + 3u;
// Pools of at most this many keys are sorted whole; larger ones first keep their keys at or
// within the k-th distance (keep_within_kth), which needs a histogram after the pool's keys.
constexpr unsigned kSelectSortAll = 64u;

// popc(row XOR query) for a row of the database and the query's code in shared memory.
__device__ unsigned row_distance(const HammingLaunch& p, const unsigned* code, unsigned row) {
  const std::uint32_t* x = p.database + std::uint64_t{row} * p.words;
  unsigned d = 0u;
  for (unsigned w = 0; w < p.words; ++w) d += __popc(__ldg(x + w) ^ code[w]);
  return d;
}

// Of the counts hist[0, bins), the first bin whose prefix sum (itself included) reaches `keep`
// into out[0] (the keep-th smallest distance, T), and the count of the bins before it into out[1]
// (the distances nearer than T). The first warp of the block, 32 bins at a time.
__device__ void histogram_kth(const unsigned* hist, unsigned bins, unsigned keep, unsigned* out) {
  const unsigned lane = threadIdx.x & 31u;
  unsigned below = 0u;
  for (unsigned first = 0u; first < bins; first += 32u) {
    const unsigned count = first + lane < bins ? hist[first + lane] : 0u;
    unsigned inclusive = count;
    for (unsigned offset = 1u; offset < 32u; offset <<= 1) {
      const unsigned before = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
      if (lane >= offset) inclusive += before;
    }
    const unsigned reached = __ballot_sync(0xFFFFFFFFu, below + inclusive >= keep);
    if (reached != 0u) {
      const unsigned at = static_cast<unsigned>(__ffs(static_cast<int>(reached))) - 1u;
      const unsigned nearer = below + __shfl_sync(0xFFFFFFFFu, inclusive - count, at);
      if (lane == 0u) {
        out[0] = first + at;
        out[1] = nearer;
      }
      return;
    }
    below += __shfl_sync(0xFFFFFFFFu, inclusive, 31);
  }
}

// The select pass for a pool that overflowed: query q's keep nearest rows, exactly, by a pass
// of its own over every row: a histogram of the distances gives the keep-th distance T; the rows
// nearer than T all belong, and of the rows at T the first ones in index order (ranked chunk by
// chunk with votes). keys[0, keep) are then sorted. Slow (two passes over the database for one
// query), and only for ties beyond the pool: many rows at one distance.
__device__ void exact_select(const HammingLaunch& p, const unsigned* code, unsigned keep,
                             unsigned long long* keys) {
  unsigned* hist = reinterpret_cast<unsigned*>(keys + kHammingK);
  unsigned* warp_ties = hist + kHammingBits + 1u;
  unsigned* counters = warp_ties + kSelectWarps;  // threshold, nearer, nearer rows placed
  const unsigned t = threadIdx.x, lane = t & 31u, warp = t >> 5;
  const unsigned bins = p.words * 32u + 1u;
  for (unsigned b = t; b < bins; b += kHammingBlock) hist[b] = 0u;
  __syncthreads();
  for (unsigned row = t; row < p.items; row += kHammingBlock)
    atomicAdd(&hist[row_distance(p, code, row)], 1u);
  __syncthreads();
  if (t < 32u) histogram_kth(hist, bins, keep, counters);
  if (t == 0u) counters[2] = 0u;
  __syncthreads();
  const unsigned threshold = counters[0], nearer = counters[1], need = keep - nearer;
  unsigned taken = 0u;  // rows at the threshold met so far (the same in every thread)
  for (unsigned first = 0u; first < p.items; first += kHammingBlock) {
    const unsigned row = first + t;
    const unsigned d = row < p.items ? row_distance(p, code, row) : kNone;
    if (d < threshold) keys[atomicAdd(&counters[2], 1u)] = static_cast<unsigned long long>(d) << 32 | row;
    const bool tie = d == threshold;
    const unsigned mask = __ballot_sync(0xFFFFFFFFu, tie);
    if (lane == 0u) warp_ties[warp] = static_cast<unsigned>(__popc(mask));
    __syncthreads();
    unsigned rank = taken + static_cast<unsigned>(__popc(mask & ((1u << lane) - 1u)));
    unsigned chunk = 0u;
    for (unsigned w = 0; w < kSelectWarps; ++w) {
      if (w < warp) rank += warp_ties[w];
      chunk += warp_ties[w];
    }
    if (tie && rank < need) keys[nearer + rank] = static_cast<unsigned long long>(d) << 32 | row;
    taken += chunk;
    __syncthreads();  // the chunk's nearer rows are counted
    const bool done = taken >= need && counters[2] >= nearer;  // the same in every thread
    __syncthreads();  // every thread has read the count before the next chunk adds to it
    if (done) break;
  }
  unsigned size = 1u;
  while (size < keep) size <<= 1;
  for (unsigned i = keep + t; i < size; i += kHammingBlock) keys[i] = ~0ull;
  __syncthreads();
  sort_keys64(keys, size);
}

// Keeps, of the n keys in keys[0, n) (n >= keep), those whose distance is at most the keep-th
// smallest distance T (every key nearer than T and every key at T: at least keep of them), in
// place and unordered, and returns how many. The pool's k nearest are among them, and they are
// far fewer than a loose bound's pool (k = 100 over 1M rows pools ~1000-2000 rows a query), so
// the sort after it is short. `hist`: bins + 3 words of shared memory. Whole block.
__device__ unsigned keep_within_kth(unsigned long long* keys, unsigned n, unsigned keep,
                                    unsigned bins, unsigned* hist) {
  unsigned* counters = hist + bins;  // T, the keys nearer than T, the keys kept
  const unsigned t = threadIdx.x;
  for (unsigned b = t; b < bins; b += kHammingBlock) hist[b] = 0u;
  if (t == 0u) counters[2] = 0u;
  __syncthreads();
  for (unsigned i = t; i < n; i += kHammingBlock) atomicAdd(&hist[keys[i] >> 32], 1u);
  __syncthreads();
  if (t < 32u) histogram_kth(hist, bins, keep, counters);
  __syncthreads();
  const unsigned threshold = counters[0];
  // Kept keys are written below the chunk being read (their count never passes the keys read),
  // and a chunk is read whole before any of it is overwritten.
  for (unsigned first = 0u; first < n; first += kHammingBlock) {
    const unsigned i = first + t;
    const unsigned long long key = i < n ? keys[i] : ~0ull;
    __syncthreads();
    if (i < n && static_cast<unsigned>(key >> 32) <= threshold)
      keys[atomicAdd(&counters[2], 1u)] = key;
  }
  __syncthreads();
  return counters[2];
}

// The pooled search's select pass: a block per query of the slice takes the rows of the query's
// pool (every row within its bound, so its k nearest are the answer), with their distances
// recomputed, keeps those at or within the k-th distance (a large pool) and sorts their keys,
// and writes the k smallest; an overflowed pool goes to exact_select.
__global__ void __launch_bounds__(kHammingBlock) hamming_select_kernel(HammingLaunch p) {
  extern __shared__ unsigned long long select_shared[];
  unsigned* code = reinterpret_cast<unsigned*>(select_shared);
  unsigned long long* keys = select_shared + kSelectCodeWords / 2u;
  const unsigned t = threadIdx.x, q = blockIdx.x;
  const std::uint32_t* query = p.queries + std::uint64_t{p.query_begin + q} * p.words;
  for (unsigned w = t; w < p.words; w += kHammingBlock) code[w] = query[w];
  const unsigned n = p.pool_counts[q];
  const unsigned keep = min(p.k, p.items);
  unsigned kept = keep;
  __syncthreads();
  if (n <= p.pool_cap) {
    const std::uint32_t* pool = p.pool + std::uint64_t{q} * p.pool_cap;
    for (unsigned i = t; i < n; i += kHammingBlock) {
      const unsigned row = pool[i];
      keys[i] = static_cast<unsigned long long>(row_distance(p, code, row)) << 32 | row;
    }
    __syncthreads();
    unsigned sorted = n;
    if (n > kSelectSortAll && n > 2u * keep) {
      sorted = keep_within_kth(keys, n, keep, p.words * 32u + 1u,
                               reinterpret_cast<unsigned*>(keys + p.pool_cap));
    }
    unsigned size = 1u;
    while (size < sorted) size <<= 1;
    for (unsigned i = sorted + t; i < size; i += kHammingBlock) keys[i] = ~0ull;
    __syncthreads();
    sort_keys64(keys, size);
    kept = min(keep, n);  // n >= keep: the bound has k rows within it
  } else {
    exact_select(p, code, keep, keys);
  }
  for (unsigned i = t; i < p.k; i += kHammingBlock) {
    const std::uint64_t at = std::uint64_t{p.query_begin + q} * p.k + i;
    const bool real = i < kept;
    p.distances[at] = real ? static_cast<unsigned>(keys[i] >> 32) : kNone;
    p.indices[at] = real ? static_cast<unsigned>(keys[i]) : kNone;
  }
}

// The scan kernel of a tile size and path, as a function pointer (one switch for every use).
using ScanKernel = void (*)(HammingLaunch);
template <unsigned Fragments>
ScanKernel scan_kernel_of(bool mma, bool staged) {
  if (!mma) return scan::hamming_scan_kernel<Fragments, false, false>;
  return staged ? scan::hamming_scan_kernel<Fragments, true, true>
                : scan::hamming_scan_kernel<Fragments, true, false>;
}
ScanKernel scan_kernel(unsigned fragments, bool mma, bool staged) {
  switch (fragments) {
    case 1: return scan_kernel_of<1>(mma, staged);
    case 2: return scan_kernel_of<2>(mma, staged);
    case 4: return scan_kernel_of<4>(mma, staged);
    default: return nullptr;
  }
}

}  // namespace

cudaError_t prepare_hamming_scan(HammingScanSupport& support) {
  int device = 0, major = 0, shared = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess)
    return e;
  for (const unsigned fragments : {1u, 2u, 4u}) {
    for (const bool mma : {false, true}) {
      for (const bool staged : {false, mma}) {
        const auto* kernel = reinterpret_cast<const void*>(scan_kernel(fragments, mma, staged));
        if (cudaError_t e =
                cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
            e != cudaSuccess)
          return e;
      }
    }
  }
  // The tensor-core path needs the device (sm_80+) and code built for it: machine code, or PTX,
  // of an sm_80 or later architecture (a build for older ones compiles it to a trap).
  cudaFuncAttributes attributes{};
  const auto* mma_kernel = reinterpret_cast<const void*>(scan_kernel(4, true, false));
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, mma_kernel);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(hamming_select_kernel),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
      e != cudaSuccess)
    return e;
  support.mma = major >= 8 && attributes.binaryVersion >= 80 && attributes.ptxVersion >= 80;
  support.max_shared_bytes = static_cast<unsigned>(shared);
  int l2 = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device); e != cudaSuccess)
    return e;
  support.l2_bytes = static_cast<unsigned>(l2);
  return cudaSuccess;
}

unsigned hamming_scan_shared_bytes(unsigned fragments, unsigned cap, unsigned words, bool staged,
                                   unsigned warps) {
  return 4 * warps * scan::warp_shared_words(fragments, cap, words, staged);
}

cudaError_t hamming_scan_blocks_per_sm(unsigned fragments, bool mma, bool staged, unsigned warps,
                                       unsigned shared_bytes, int& blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, scan_kernel(fragments, mma, staged), static_cast<int>(32 * warps), shared_bytes);
}

unsigned hamming_select_shared_bytes(unsigned pool_cap, unsigned words) {
  const unsigned exact = 8u * kHammingK + 4u * kExactWords;
  const unsigned pooled = 8u * pool_cap + 4u * (words * 32u + 1u + 3u);
  return 4u * kSelectCodeWords + (pooled > exact ? pooled : exact);
}

cudaError_t launch_hamming_topk(const HammingLaunch& launch, cudaStream_t stream) {
  (void)cudaGetLastError();  // report this launch only
  if (launch.select) {
    const unsigned shared = hamming_select_shared_bytes(launch.pool_cap, launch.words);
    hamming_select_kernel<<<launch.query_count, kHammingBlock, shared, stream>>>(launch);
  } else if (launch.bound) {
    hamming_bound_kernel<<<launch.query_count, kHammingBlock, 0, stream>>>(launch);
  } else if (launch.from_codes) {
    const ScanKernel kernel = scan_kernel(launch.fragments, launch.mma, launch.staged);
    if (kernel == nullptr) return cudaErrorInvalidValue;
    const unsigned tiles = (launch.query_count + 8 * launch.fragments - 1) / (8 * launch.fragments);
    const unsigned spans_per_block = launch.warps / launch.tiles_per_block;
    const dim3 grid((launch.groups + spans_per_block - 1) / spans_per_block,
                    (tiles + launch.tiles_per_block - 1) / launch.tiles_per_block, 1);
    kernel<<<grid, 32 * launch.warps,
             hamming_scan_shared_bytes(launch.fragments, launch.cap, launch.words, launch.staged,
                                       launch.warps),
             stream>>>(launch);
  } else {
    const dim3 grid(launch.groups < 65535u ? launch.groups : 65535u, launch.query_count, 1);
    hamming_merge_kernel<<<grid, kHammingBlock, 0, stream>>>(launch);
  }
  return cudaGetLastError();
}

}  // namespace ferry::cuda
