// The hamming_topk kernel: one pass of the plan (runtime/src/ops/hamming_topk.hpp has the
// algorithm; shaders/hamming_topk.comp is the same on Vulkan, line for line where it can be).
// A block keeps, per query, the min(k, count) smallest (distance, index) pairs of its group of
// `count` items: a histogram of the distances gives the threshold T, a bitmask of the items at T
// the lowest positions among them, and the kept keys (distance << 16 | position) are sorted with
// a bitonic sort in shared memory.
#include <cstdint>

#include "hamming_topk_launch.hpp"

namespace ferry::cuda {
namespace {

constexpr unsigned kNone = 0xFFFFFFFFu;
constexpr unsigned kRowsPerThread = kHammingChunk / kHammingBlock;   // 8
constexpr unsigned kItemsPerThread = kHammingMerge / kHammingBlock;  // 64
constexpr unsigned kMaxWords = kHammingBits / 32;

struct Shared {
  unsigned hist[kHammingBits + 1];
  unsigned ties[kHammingMerge / 32];
  unsigned keys[kHammingK];
  unsigned query[kHammingTile * kMaxWords];
  unsigned partial[kHammingBlock];
  unsigned threshold, nearer, cut, count;
};

// `dist[i]`: the distance of the thread's item i (local position i * block + thread), or kNone.
template <unsigned Items>
__device__ void select_and_write(Shared& s, const unsigned (&dist)[Items], const HammingLaunch& p,
                                 unsigned count, unsigned keep, unsigned query, unsigned row0,
                                 unsigned in_at, unsigned out_at) {
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
  const unsigned written = p.final ? p.k : keep;
  for (unsigned i = t; i < written; i += kHammingBlock) {
    unsigned d = kNone, index = kNone;
    if (i < keep) {
      const unsigned key = s.keys[i], local = key & 0xFFFFu;
      d = key >> 16;
      index = p.from_codes ? row0 + local : p.scratch[2ull * (in_at + local) + 1u];
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

__global__ void __launch_bounds__(kHammingBlock) hamming_codes_kernel(HammingLaunch p) {
  __shared__ Shared s;
  const unsigned t = threadIdx.x;
  const unsigned tile = blockIdx.y * kHammingTile;
  const unsigned words = p.words;
  for (unsigned i = t; i < kHammingTile * words; i += kHammingBlock) {
    const unsigned j = i / words, q = tile + j;
    s.query[j * kMaxWords + i % words] =
        q < p.query_count ? p.queries[std::uint64_t{p.query_begin + q} * words + i % words] : 0u;
  }
  __syncthreads();
  const unsigned keep_full = min(p.k, kHammingChunk);
  for (unsigned g = blockIdx.x; g < p.groups; g += gridDim.x) {
    const unsigned row0 = g * kHammingChunk;
    const unsigned count = min(kHammingChunk, p.items - row0);
    unsigned acc[kHammingTile][kRowsPerThread];
#pragma unroll
    for (unsigned i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
      for (unsigned j = 0; j < kHammingTile; ++j) acc[j][i] = 0u;
      const unsigned local = i * kHammingBlock + t;
      if (local < count) {
        const std::uint32_t* row = p.database + std::uint64_t{row0 + local} * words;
        for (unsigned w = 0; w < words; ++w) {
          const unsigned x = row[w];
#pragma unroll
          for (unsigned j = 0; j < kHammingTile; ++j)
            acc[j][i] += __popc(x ^ s.query[j * kMaxWords + w]);
        }
      }
    }
    for (unsigned j = 0; j < kHammingTile; ++j) {
      if (tile + j >= p.query_count) break;  // uniform: the tile is the block's
      unsigned dist[kRowsPerThread];
#pragma unroll
      for (unsigned i = 0; i < kRowsPerThread; ++i)
        dist[i] = i * kHammingBlock + t < count ? acc[j][i] : kNone;
      const unsigned q = tile + j;
      select_and_write(s, dist, p, count, min(p.k, count), q, row0, 0u,
                       p.out_base + q * p.out_stride + g * keep_full);
    }
  }
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
    select_and_write(s, dist, p, count, min(p.k, count), q, 0u, in_at,
                     p.out_base + q * p.out_stride + g * keep_full);
  }
}

}  // namespace

cudaError_t launch_hamming_topk(const HammingLaunch& launch, cudaStream_t stream) {
  (void)cudaGetLastError();  // report this launch only
  const unsigned rows = launch.from_codes ? (launch.query_count + kHammingTile - 1) / kHammingTile
                                          : launch.query_count;
  const dim3 grid(launch.groups < 65535u ? launch.groups : 65535u, rows, 1);
  if (launch.from_codes) {
    hamming_codes_kernel<<<grid, kHammingBlock, 0, stream>>>(launch);
  } else {
    hamming_merge_kernel<<<grid, kHammingBlock, 0, stream>>>(launch);
  }
  return cudaGetLastError();
}

}  // namespace ferry::cuda
