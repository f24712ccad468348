// The rescore kernel: the algorithm of runtime/src/ops/rescore.hpp, line for line the same as
// shaders/rescore.comp where it can be. A block per query (a 2D grid) ranks its candidates in
// rounds through slots of 64-bit (score key << 32 | row index) keys in shared memory: new
// candidates scored into the free slots, a bitonic sort, duplicates dropped, a second sort, the
// best k kept; the first k written with padding.
//
// Scoring, unlike the shader's: a warp scores 32 slots at a time, one fma chain per lane, and
// stages its 32 rows through shared memory in chunks of 32 elements, each row's chunk read by one
// whole-warp load (128 or 32 contiguous bytes). A lane reading its own row (16 bytes from each of
// 32 rows a load) fetched twice the sectors it used and thrashed the L1 cache: 0.51 ms for 1000
// queries x 100 candidates of 768 dimensions on the H200 (docs/PERFORMANCE.md).
#include <algorithm>
#include <cstdint>

#include "rescore_launch.hpp"
#include "rescore_thread.cuh"

namespace ferry::cuda {
namespace {

constexpr unsigned kNone = 0xFFFFFFFFu;
constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr unsigned long long kSkipped = ~0ull;  // sorts after every real entry
constexpr unsigned kWarps = kRescoreBlock / 32;
// Blocks an SM should hold at once (registers capped to let it): 1000 queries in one wave.
constexpr unsigned kRescoreBlocksPerSm = 8;
// A scoring warp's stage: 32 rows x 32 elements (32-bit words; int8 widened), each row padded by
// a word so that lane t reading element j of row t hits bank (t + j) mod 32.
constexpr unsigned kChunk = 32;
constexpr unsigned kStageRowWords = kChunk + 1;
constexpr unsigned kStageWords = 32 * kStageRowWords;
static_assert(kRescoreSlotCount / kRescoreBlock <= 32, "a thread's duplicates are one word's bits");
static_assert(kRescoreSlotCount * 8 + kWarps * kStageWords * 4 <= 48 * 1024,
              "the largest block's shared memory is within what a launch gets without asking");

// IEEE operations rounded once to nearest even, subnormals kept. Written as PTX because
// __fmaf_rn and __fsub_rn follow -ftz=true (becoming the flush-to-zero variants), and no build
// flag may change a score.
__device__ inline float fma_rn(float a, float b, float c) {
  float result;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(result) : "f"(a), "f"(b), "f"(c));
  return result;
}
__device__ inline float sub_rn(float a, float b) {
  float result;
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

// A float32 chain's result as score bits: every NaN the one NaN.
__device__ unsigned score_bits(float s) {
  const unsigned bits = __float_as_uint(s);
  return (bits & 0x7FFFFFFFu) > 0x7F800000u ? kRescoreNaNBits : bits;
}

// One step of a float32 chain: s + q * x, or s + (q - x)^2 for L2.
template <bool L2>
__device__ __forceinline__ float chain_step(float q, float x, float s) {
  if constexpr (L2) {
    const float e = sub_rn(q, x);
    return fma_rn(e, e, s);
  } else {
    return fma_rn(q, x, s);
  }
}

// The float32 score bits of `query` (its first element) against database row `row`, by one
// thread: the chain as score_rows computes it (only for the rare -0.0 score's sign).
template <bool L2>
__device__ unsigned float_score_of(const RescoreLaunch& p, const unsigned char* query,
                                   unsigned row) {
  const auto* qf = reinterpret_cast<const float*>(query);
  const auto* xf = reinterpret_cast<const float*>(p.database +
                                                  static_cast<std::uint64_t>(row) *
                                                      p.database_stride);
  float s = 0.0f;
  for (unsigned j = 0; j < p.dims; ++j) s = chain_step<L2>(qf[j], xf[j], s);
  return score_bits(s);
}

// Element `at` of a vector as a 32-bit word: float32 bits, or an int8 value widened.
template <bool Int8>
__device__ __forceinline__ unsigned element(const unsigned char* vector, unsigned at) {
  if constexpr (Int8) {
    const int value = reinterpret_cast<const signed char*>(vector)[at];
    return static_cast<unsigned>(value);
  } else {
    return reinterpret_cast<const unsigned*>(vector)[at];
  }
}

// The score bits of the warp's 32 candidates against `query` (the warp's lanes together), lane
// t's of row `row` when `valid` (others: garbage, not to be used). Chunk by chunk, row r's next
// 32 elements come from one whole-warp load into stage[r * kStageRowWords + lane]; then lane t
// runs its chain over stage[t * kStageRowWords + j], the query's element j from lane j.
// Warp-uniform: every lane calls.
template <bool Int8, bool L2>
__device__ unsigned score_rows(const RescoreLaunch& p, const unsigned char* query, unsigned row,
                               bool valid, unsigned* stage, unsigned lane) {
  const unsigned live = __ballot_sync(kFull, valid);
  const std::uint64_t offset = valid ? static_cast<std::uint64_t>(row) * p.database_stride : 0;
  float s = 0.0f;
  int si = 0;
  for (unsigned first = 0; live != 0u && first < p.dims; first += kChunk) {
    const unsigned n = min(kChunk, p.dims - first);
    const bool mine = lane < n;
    const unsigned q = mine ? element<Int8>(query, first + lane) : 0u;
    unsigned x[32];
#pragma unroll
    for (unsigned r = 0; r < 32; ++r) {
      const std::uint64_t row_offset = __shfl_sync(kFull, offset, r);
      x[r] = mine && ((live >> r) & 1u) != 0u ? element<Int8>(p.database + row_offset, first + lane)
                                               : 0u;
    }
    __syncwarp();  // the chains have read the chunk before
#pragma unroll
    for (unsigned r = 0; r < 32; ++r) stage[r * kStageRowWords + lane] = x[r];
    __syncwarp();
    const unsigned* mine_row = stage + lane * kStageRowWords;
#pragma unroll
    for (unsigned j = 0; j < kChunk; ++j) {
      if (j >= n) break;  // uniform
      const unsigned qj = __shfl_sync(kFull, q, j), xj = mine_row[j];
      if constexpr (Int8) {
        const int a = static_cast<int>(qj), b = static_cast<int>(xj);
        si += L2 ? (a - b) * (a - b) : a * b;  // exact: any order would do
      } else {
        s = chain_step<L2>(__uint_as_float(qj), __uint_as_float(xj), s);
      }
    }
  }
  if constexpr (Int8) return static_cast<unsigned>(si);
  return score_bits(s);
}

// Keys for slots [base, base + 32) (those below `size`; the filled ones below `filled` score their
// candidates, the rest are skipped entries), one slot a lane. Warp-uniform.
template <bool Int8, bool L2>
__device__ void score_slots(const RescoreLaunch& p, const unsigned char* query,
                            const std::uint32_t* fresh, unsigned base, unsigned kept,
                            unsigned filled, unsigned size, unsigned long long* keys,
                            unsigned* stage, unsigned lane) {
  const unsigned slot = base + lane;
  unsigned row = kNone;
  if (slot < filled) row = fresh[slot - kept];
  const bool valid = row < p.rows;
  const unsigned score = score_rows<Int8, L2>(p, query, row, valid, stage, lane);
  if (slot < size) {
    keys[slot] = valid ? static_cast<unsigned long long>(rescore_key(score, !Int8, !L2)) << 32 | row
                       : kSkipped;
  }
}

// Sorts keys[0, size) ascending; size a power of two. Every thread calls.
__device__ void sort_slots(unsigned long long* keys, unsigned size) {
  const unsigned t = threadIdx.x;
  for (unsigned block = 2u; block <= size; block <<= 1) {
    for (unsigned stride = block >> 1; stride > 0u; stride >>= 1) {
      for (unsigned i = t; i < size / 2u; i += kRescoreBlock) {
        const unsigned a = (i / stride) * 2u * stride + (i % stride), b = a + stride;
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

// `slots`: kRescoreSlotCount, or the candidates rounded up to a power of two where they fit in
// fewer (one round either way, the same result); `stage_warps`: the warps that score, each with
// its stage after the slots in the dynamic shared memory (rescore_shared_bytes).
template <bool Int8, bool L2>
__global__ void __launch_bounds__(kRescoreBlock, kRescoreBlocksPerSm)
    rescore_kernel(RescoreLaunch p, unsigned slots, unsigned stage_warps) {
  extern __shared__ unsigned long long keys[];
  unsigned* stages = reinterpret_cast<unsigned*>(keys + slots);
  const unsigned t = threadIdx.x, lane = t & 31u, warp = t >> 5;
  constexpr bool is_float = !Int8;
  constexpr bool larger_better = !L2;
  const unsigned q = blockIdx.y * gridDim.x + blockIdx.x;
  if (q >= p.queries_count) return;  // uniform: the whole block
  const unsigned char* query = p.queries + static_cast<std::uint64_t>(q) * p.query_stride;
  const std::uint32_t* candidates =
      p.candidates + static_cast<std::uint64_t>(q) * p.candidates_count;
  unsigned kept = 0u, next = 0u;
  for (;;) {  // rounds; uniform: every thread computes the same kept and next
    const unsigned fresh = min(slots - kept, p.candidates_count - next);
    const unsigned filled = kept + fresh;
    unsigned size = 1u;
    while (size < filled) size <<= 1;
    if (warp < stage_warps) {
      for (unsigned base = kept + 32u * warp; base < size; base += 32u * stage_warps) {
        score_slots<Int8, L2>(p, query, candidates + next, base, kept, filled, size, keys,
                              stages + warp * kStageWords, lane);
      }
    }
    next += fresh;
    __syncthreads();
    sort_slots(keys, size);
    // Duplicates (the same key as the slot before) become skipped entries, then sort last.
    unsigned duplicates = 0u;  // bit i: slot t + i * block
    for (unsigned slot = t, i = 0u; slot < size; slot += kRescoreBlock, ++i) {
      if (slot > 0u && keys[slot] != kSkipped && keys[slot] == keys[slot - 1u]) {
        duplicates |= 1u << i;
      }
    }
    __syncthreads();
    for (unsigned slot = t, i = 0u; slot < size; slot += kRescoreBlock, ++i) {
      if ((duplicates & (1u << i)) != 0u) keys[slot] = kSkipped;
    }
    __syncthreads();
    sort_slots(keys, size);
    // kept: the real entries (before the first skipped one), at most k.
    unsigned low = 0u, high = size;
    while (low < high) {
      const unsigned middle = (low + high) / 2u;
      if (keys[middle] != kSkipped) low = middle + 1u; else high = middle;
    }
    kept = min(p.k, low);
    __syncthreads();  // every thread has read the slots before the next round refills them
    if (next >= p.candidates_count) break;
  }
  for (unsigned i = t; i < p.k; i += kRescoreBlock) {
    unsigned score = kNone, row = kNone;
    if (i < kept) {
      const unsigned long long key = keys[i];
      row = static_cast<unsigned>(key);
      score = rescore_key_score(static_cast<unsigned>(key >> 32), is_float, larger_better);
      // A zero's key does not say its sign: a -0.0 score is recomputed for it (rare).
      if (is_float && score == 0u) score = float_score_of<L2>(p, query, row);
    }
    const std::uint64_t at = static_cast<std::uint64_t>(q) * p.k + i;
    p.scores[at] = score;
    p.indices[at] = row;
  }
}

// One block's slots and scoring warps for `candidates` per query (rescore_kernel).
struct RescoreShape {
  unsigned slots, stage_warps;
};
RescoreShape rescore_shape(unsigned candidates) {
  unsigned slots = kRescoreSlotCount;
  if (candidates <= kRescoreSlotCount) {
    slots = 1u;
    while (slots < candidates) slots <<= 1;
  }
  return {slots, std::min((slots + 31u) / 32u, kWarps)};
}
std::size_t rescore_shared_bytes(RescoreShape shape) {
  return std::size_t{shape.slots} * sizeof(unsigned long long) +
         std::size_t{shape.stage_warps} * kStageWords * sizeof(unsigned);
}

// The kernels by [int8][l2].
using RescoreKernelFunction = void (*)(RescoreLaunch, unsigned, unsigned);
constexpr RescoreKernelFunction kKernels[2][2] = {
    {rescore_kernel<false, false>, rescore_kernel<false, true>},
    {rescore_kernel<true, false>, rescore_kernel<true, true>}};

}  // namespace

cudaError_t launch_rescore(const RescoreLaunch& launch, cudaStream_t stream) {
  (void)cudaGetLastError();  // report this launch only
  // One block per query, in rows of up to 2^31 - 1 (the grid's x limit).
  const unsigned x = launch.queries_count < 0x7FFFFFFFu ? launch.queries_count : 0x7FFFFFFFu;
  const dim3 grid(x, (launch.queries_count + x - 1) / x, 1);
  const RescoreShape shape = rescore_shape(launch.candidates_count);
  const std::size_t shared = rescore_shared_bytes(shape);
  kKernels[launch.int8 ? 1 : 0][launch.l2 ? 1 : 0]<<<grid, kRescoreBlock, shared, stream>>>(
      launch, shape.slots, shape.stage_warps);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
