// The rescore kernel: the algorithm of runtime/src/ops/rescore.hpp, line for line the same as
// shaders/rescore.comp where it can be. A block per query (a 2D grid) ranks its candidates in
// rounds through kRescoreSlotCount slots of 64-bit (score key << 32 | row index) keys in shared
// memory: new candidates scored into the free slots, a bitonic sort, duplicates dropped, a second
// sort, the best k kept; the first k written with padding.
#include <cstdint>

#include "rescore_launch.hpp"
#include "rescore_thread.cuh"

namespace ferry::cuda {
namespace {

constexpr unsigned kNone = 0xFFFFFFFFu;
constexpr unsigned long long kSkipped = ~0ull;  // sorts after every real entry

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

__device__ bool is_nan_bits(unsigned bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }

// The score bits of `query` (its first element) against database row `row`.
__device__ unsigned score_of(const RescoreLaunch& p, const unsigned char* query, unsigned row) {
  const unsigned char* x = p.database + static_cast<std::uint64_t>(row) * p.database_stride;
  if (p.int8) {
    const auto* qi = reinterpret_cast<const signed char*>(query);
    const auto* xi = reinterpret_cast<const signed char*>(x);
    int s = 0;
    for (unsigned j = 0; j < p.dims; ++j) {
      const int q = qi[j], v = xi[j];
      s += p.l2 ? (q - v) * (q - v) : q * v;
    }
    return static_cast<unsigned>(s);
  }
  // float32: the chain in dimension order, without a test per step (a NaN stays NaN through
  // every later step, so testing once at the end is the same), in 16-byte loads where both rows
  // are aligned: the loads of later steps are then in flight while the chain waits.
  const auto* qf = reinterpret_cast<const float*>(query);
  const auto* xf = reinterpret_cast<const float*>(x);
  float s = 0.0f;
  unsigned j = 0;
  if (((reinterpret_cast<std::uintptr_t>(qf) | reinterpret_cast<std::uintptr_t>(xf)) & 15u) == 0u) {
    const auto* q4 = reinterpret_cast<const float4*>(qf);
    const auto* x4 = reinterpret_cast<const float4*>(xf);
#pragma unroll 8
    for (; j + 4u <= p.dims; j += 4u) {
      const float4 a = q4[j / 4u], b = x4[j / 4u];
      if (p.l2) {
        float e = sub_rn(a.x, b.x);
        s = fma_rn(e, e, s);
        e = sub_rn(a.y, b.y);
        s = fma_rn(e, e, s);
        e = sub_rn(a.z, b.z);
        s = fma_rn(e, e, s);
        e = sub_rn(a.w, b.w);
        s = fma_rn(e, e, s);
      } else {
        s = fma_rn(a.x, b.x, s);
        s = fma_rn(a.y, b.y, s);
        s = fma_rn(a.z, b.z, s);
        s = fma_rn(a.w, b.w, s);
      }
    }
  }
  for (; j < p.dims; ++j) {
    if (p.l2) {
      const float e = sub_rn(qf[j], xf[j]);
      s = fma_rn(e, e, s);
    } else {
      s = fma_rn(qf[j], xf[j], s);
    }
  }
  return is_nan_bits(__float_as_uint(s)) ? kRescoreNaNBits : __float_as_uint(s);
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

__global__ void __launch_bounds__(kRescoreBlock) rescore_kernel(RescoreLaunch p) {
  __shared__ unsigned long long keys[kRescoreSlotCount];
  const unsigned t = threadIdx.x;
  const bool is_float = !p.int8;
  const bool larger_better = !p.l2;
  const unsigned q = blockIdx.y * gridDim.x + blockIdx.x;
  if (q >= p.queries_count) return;  // uniform: the whole block
  const unsigned char* query = p.queries + static_cast<std::uint64_t>(q) * p.query_stride;
  const std::uint32_t* candidates =
      p.candidates + static_cast<std::uint64_t>(q) * p.candidates_count;
  unsigned kept = 0u, next = 0u;
  for (;;) {  // rounds; uniform: every thread computes the same kept and next
    const unsigned fresh = min(kRescoreSlotCount - kept, p.candidates_count - next);
    const unsigned filled = kept + fresh;
    unsigned size = 1u;
    while (size < filled) size <<= 1;
    for (unsigned slot = kept + t; slot < size; slot += kRescoreBlock) {
      unsigned long long key = kSkipped;
      if (slot < filled) {
        const unsigned row = candidates[next + slot - kept];
        if (row < p.rows) {
          const unsigned score = rescore_key(score_of(p, query, row), is_float, larger_better);
          key = static_cast<unsigned long long>(score) << 32 | row;
        }
      }
      keys[slot] = key;
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
      if (is_float && score == 0u) score = score_of(p, query, row);
    }
    const std::uint64_t at = static_cast<std::uint64_t>(q) * p.k + i;
    p.scores[at] = score;
    p.indices[at] = row;
  }
}

}  // namespace

cudaError_t launch_rescore(const RescoreLaunch& launch, cudaStream_t stream) {
  (void)cudaGetLastError();  // report this launch only
  // One block per query, in rows of up to 2^31 - 1 (the grid's x limit).
  const unsigned x = launch.queries_count < 0x7FFFFFFFu ? launch.queries_count : 0x7FFFFFFFu;
  const dim3 grid(x, (launch.queries_count + x - 1) / x, 1);
  rescore_kernel<<<grid, kRescoreBlock, 0, stream>>>(launch);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
