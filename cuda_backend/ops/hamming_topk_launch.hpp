// The hamming_topk kernel's launcher (ops/hamming_topk.cu), callable from host code built without
// nvcc; see kernels/launch.hpp for what launchers return. One launch runs one pass of the plan
// (runtime/src/ops/hamming_topk.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// The kernels' constants; hamming_topk_kernel.cpp checks them against the plan's.
inline constexpr unsigned kHammingBlock = 256;
inline constexpr unsigned kHammingMerge = 16384;
inline constexpr unsigned kHammingBits = 4096;
inline constexpr unsigned kHammingK = 1024;

// Level 0 (hamming_topk_scan.cuh): a warp scans a span of rows in steps of this many, for a
// tile of 8 * fragments queries, in blocks of at most kHammingScanWarps warps; keys hold the
// row's position in its span in kHammingScanLocalBits bits.
inline constexpr unsigned kHammingScanStepRows = 32;
inline constexpr unsigned kHammingScanWarps = 4;
inline constexpr unsigned kHammingScanLocalBits = 19;
inline constexpr unsigned kHammingScanMaxSpan = 1u << kHammingScanLocalBits;

struct HammingLaunch {
  const std::uint32_t* queries = nullptr;   // the whole query array (query 0 first)
  const std::uint32_t* database = nullptr;
  std::uint32_t* distances = nullptr;       // [queries x k]
  std::uint32_t* indices = nullptr;
  std::uint32_t* scratch = nullptr;         // candidates: distance, index
  bool from_codes = false;   // level 0: the scan kernel; else the merge kernel
  bool final = false;
  bool mma = false;          // level 0: distances on the binary tensor cores
  unsigned fragments = 0;    // level 0: queries per warp / 8 (1, 2 or 4)
  unsigned cap = 0;          // level 0: key buffer entries per query
  // The bound passes (the tensor-core path): per query of the slice, sample_stride words: the
  // minima of sample_groups groups of rows (the sample pass writes them, sample = true), then its
  // bound (kNone: none), which the scan starts its threshold from.
  std::uint32_t* minima = nullptr;
  std::uint32_t* bounds = nullptr;
  bool sample = false;
  bool bound = false;        // the pass that picks the bounds from the minima
  std::uint32_t sample_groups = 0;
  std::uint32_t sample_stride = 0;
  // The pooled search (the tensor-core path with bounds, hamming_topk_kernel.cpp): the scan
  // (pooled = true) appends every row within its query's bound to the query's pool (its index),
  // counting them in pool_counts (which the bound pass zeroes); then the select pass (select =
  // true, a block per query) recomputes the pool's distances, sorts the keys distance << 32 | row
  // and writes the k smallest, or, for a pool that overflowed (more than pool_cap rows within the
  // bound: ties), finds them by an exact pass of its own over every row.
  bool pooled = false;
  bool select = false;
  // The pooled search's sample and scan passes through the staged scan (hamming_topk_scan.cuh):
  // rows fetched ahead into shared memory, appends sent 32 at a time.
  bool staged = false;
  std::uint32_t pool_cap = 0;                  // rows per query: a power of two
  std::uint32_t* pool_counts = nullptr;        // per query of the slice
  std::uint32_t* pool = nullptr;               // [slice queries x pool_cap]
  unsigned warps = 0;        // level 0: warps per block (1, 2 or 4)
  unsigned tiles_per_block = 0;  // level 0: query tiles per block (divides warps); the block's
                                 // other warps take the next spans of those tiles
  std::uint32_t words = 0;
  std::uint32_t k = 0;
  std::uint32_t items = 0;
  std::uint32_t groups = 0;
  std::uint32_t group_items = 0;
  std::uint32_t query_begin = 0;
  std::uint32_t query_count = 0;
  std::uint32_t in_base = 0;
  std::uint32_t in_stride = 0;
  std::uint32_t out_base = 0;
  std::uint32_t out_stride = 0;
};

// What the current device offers the scan kernel: the binary tensor-core path (sm_80 or later,
// and machine code or PTX for it in this build) and the shared memory a block may take.
struct HammingScanSupport {
  bool mma = false;
  unsigned max_shared_bytes = 0;
  unsigned l2_bytes = 0;  // the L2 cache: the staged scan runs over databases that fit in it
};
// Raises the scan kernels' shared-memory limit to the device's and says what it offers.
cudaError_t prepare_hamming_scan(HammingScanSupport& support);
// Shared memory of a scan block of `warps` warps; blocks of it an SM holds at once (0: it cannot
// run).
unsigned hamming_scan_shared_bytes(unsigned fragments, unsigned cap, unsigned words, bool staged,
                                   unsigned warps);
cudaError_t hamming_scan_blocks_per_sm(unsigned fragments, bool mma, bool staged, unsigned warps,
                                       unsigned shared_bytes, int& blocks);

// The select pass's dynamic shared memory: the query code, then the pool's keys and a histogram
// of their distances, or the exact pass's kept keys and histogram.
unsigned hamming_select_shared_bytes(unsigned pool_cap, unsigned words);

cudaError_t launch_hamming_topk(const HammingLaunch& launch, cudaStream_t stream);

}  // namespace ferry::cuda
