// hamming_topk, as every backend runs it (ferry/ops/hamming_topk.hpp has the public call and its
// exact semantics), and the plan both GPU backends follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ferry/ops/hamming_topk.hpp"
#include "ferry/status.hpp"

namespace ferry::ops {

// Binding 0: the query codes, read (queries * words * 4 bytes). Binding 1: the database codes,
// read (rows * words * 4 bytes). Binding 2: distances, written; binding 3: indices, written
// (queries * k * 4 bytes each). Binding 4 (GPU backends only): scratch, read and written
// (HammingTopkPlan::scratch_bytes). Every binding starts on a multiple of 4 bytes.
struct HammingTopkArgs {
  std::uint32_t words = 0;    // 32-bit words per code: code_bits / 32
  std::uint32_t queries = 0;
  std::uint32_t rows = 0;     // database rows, < kHammingMaxDatabaseRows
  std::uint32_t k = 0;
  // The scratch budget the plan was made for (the device's scratch slab size when recorded):
  // plan_hamming_topk(args) gives the Vulkan backend the passes the public call reserved scratch
  // for; the CUDA backend plans its own level 0 within that scratch.
  std::uint64_t scratch_budget = 0;
};

// The CPU reference: `bindings` are the bindings' bytes. It runs run_hamming_topk_cpu with
// hamming_cpu_default_path() on the host worker threads (one thread for small searches).
void run_on_cpu(const HammingTopkArgs& args, std::span<const std::span<std::byte>> bindings);

// ---- The CPU backend's search (hamming_topk_cpu.cpp) ----
//
// Threads take tasks (a range of queries over a range of rows, ranges of rows only when there
// are too few queries for the threads); a task walks its rows in cache-sized blocks, copies each
// into a layout with 8 rows side by side per word, and computes the distances of 8 queries at a
// time into a small array, then scans it for the rows nearer than each query's k-th so far
// (kept in a buffer of 2k (distance, index) keys cut back to k by nth_element). The copy,
// distance and scan loops exist per instruction set, chosen at run time (__builtin_cpu_supports
// and [[gnu::target]] functions: no ifunc, whose resolvers run before the sanitizers' runtimes
// are ready); every path gives identical results.
enum class HammingCpuPath : std::uint8_t {
  portable,  // plain C++ (the popcnt instruction where the CPU has it)
  avx2,      // AVX2: popcounts of 4 words at once by nibble lookup (vpshufb, vpsadbw)
  avx512,    // AVX-512 F/BW/DQ/VL + VPOPCNTDQ: 8 words' popcounts in one instruction
};
inline constexpr HammingCpuPath kHammingCpuPaths[] = {HammingCpuPath::portable,
                                                      HammingCpuPath::avx2,
                                                      HammingCpuPath::avx512};
const char* to_string(HammingCpuPath path);
// The path in words, for DeviceInfo::search_path: its name and how it counts bits.
std::string hamming_cpu_path_description(HammingCpuPath path);
bool hamming_cpu_path_supported(HammingCpuPath path);
// The fastest path this CPU supports, at most the one the environment variable FERRY_CPU_ISA
// names (portable, avx2 or avx512; anything else is ignored).
HammingCpuPath hamming_cpu_default_path();

// The search on `path` (which must be supported), planned for `threads` threads (the results
// do not depend on either; tests run every supported path and several thread counts).
void run_hamming_topk_cpu(const HammingTopkArgs& args,
                          std::span<const std::span<std::byte>> bindings, HammingCpuPath path,
                          unsigned threads);

// ---- The GPU algorithm (docs/OPS.md, "hamming_topk", has it in full) ----
//
// Selection by levels, exact at each: level 0 splits the database into groups of `level0_rows`
// rows (spans: shaders/hamming_topk.comp and cuda_backend/ops/hamming_topk_scan.cuh scan a span
// per workgroup for a tile of queries, hamming_scan_span picks their length) and keeps, per
// query, each group's min(k, rows) smallest (distance, index) pairs as a sorted run. Each merge
// level does the same over groups of kHammingMergeGroup candidates (both backends alike: a
// histogram of the distances gives the threshold distance T and how many entries at T are
// needed, a bitmask of the entries at T gives the lowest-positioned of those, and the kept
// entries are sorted), until one group remains, whose run is the answer (written with padding to
// the outputs). Runs lie in row order, so among equal distances the position in the candidate
// array is the index order. Queries run in slices small enough that a slice's candidates fit the
// scratch budget: two candidate arrays (8 bytes per entry) used in turn by the levels.
inline constexpr std::uint32_t kHammingWorkgroupSize = 256;
// The level-0 group of the default plan, for which the public call reserves scratch; spans are
// never shorter than min(rows, this), so a plan of spans fits that scratch.
inline constexpr std::uint32_t kHammingChunkRows = 2048;
inline constexpr std::uint32_t kHammingMergeGroup = 16384;   // merges: 64 per invocation
inline constexpr std::uint32_t kHammingCandidateBytes = 8;   // distance, index (uint32 each)
inline constexpr std::uint64_t kHammingScratchTarget = 8ull << 20;   // per command, when possible
// Level 0's scan keys are distance << kHammingScanPositionBits | row position in the span (the
// distance is at most 4096: 13 bits), so a span has at most 2^19 rows.
inline constexpr std::uint32_t kHammingScanPositionBits = 19;
inline constexpr std::uint32_t kHammingScanMaxSpan = 1u << kHammingScanPositionBits;

// The rows of one level-0 span: enough spans that the grid (spans x query tiles of `tile`) is two
// waves of `resident_groups` workgroups, each span a multiple of `round_rows` rows, at least
// min(rows, kHammingChunkRows) (so that the plan fits the scratch the public call reserved) and
// at most kHammingScanMaxSpan.
std::uint32_t hamming_scan_span(std::uint32_t rows, std::uint32_t queries, std::uint32_t tile,
                                std::uint32_t round_rows, std::uint64_t resident_groups);

// A scan's key buffer per query: room for k keys, k more (so that a large k is not compacted
// every few rounds) and two rounds of `round_rows` (a buffer is compacted to k keys when the
// next round could overflow it), and for the final sort's power of two; a multiple of 32. The
// least that works is hamming_scan_min_cap.
std::uint32_t hamming_scan_cap(std::uint32_t k, std::uint32_t round_rows);
std::uint32_t hamming_scan_min_cap(std::uint32_t k, std::uint32_t round_rows);

// Bounds for level 0 (both GPU backends): the k-th smallest of the nearest distances of a
// sample's groups of kHammingBoundGroupRows rows (the database's first rows) is a bound per
// query: the k rows behind it are different rows, so no row beyond it is among the k nearest,
// and the scan lets only rows within it into its buffers. The sample's groups: at least 256, 4k
// for a large k, at most the database's; 0 (no bound) when they are fewer than k.
inline constexpr std::uint32_t kHammingBoundGroupRows = 256;
std::uint32_t hamming_bound_sample_groups(std::uint32_t rows, std::uint32_t k);
// The rows of `groups` sample groups: the database's first ones.
std::uint32_t hamming_bound_sample_rows(std::uint32_t rows, std::uint32_t groups);

// The pooled search (the CUDA backend's tensor-core path, cuda_backend/ops/hamming_topk_launch.hpp;
// Vulkan's portable path, shaders/hamming_topk.comp "Pools"):
// the bound passes, then every row within its query's bound into the query's pool, then a
// selection per query. About k rows per sample's worth of the database lie within a bound, so a
// pool holds three times that and k more, at least kHammingMinPool keys (a power of two); none
// beyond kHammingMaxPool (a large k over a small sample: the buffered scan does better) or
// without a bound. Pools that overflow all the same (ties at the bound) cost their query an exact
// pass of its own.
inline constexpr std::uint32_t kHammingMinPool = 1024;
inline constexpr std::uint32_t kHammingMaxPool = 8192;
// The pools pay for every k since CUDA's scan takes tiles of 32 queries (k = 1, 1000 x 1M x
// 256-bit on the H200: 0.307 ms against 0.528 with the buffered scan; docs/PERFORMANCE.md), and
// the public call offers a backend that pools scratch for them, up to kHammingPoolScratchTarget
// (the header's promise), in slices of queries. Each slice scans the whole database again, and
// a slice of fewer than 512 queries takes CUDA's tiles of 16: with 8 MiB, k = 100 over 1M rows
// (pools of 4096 rows, 17 KiB a query) ran 1000 queries in 3 slices.
inline constexpr std::uint64_t kHammingPoolScratchTarget = 32ull << 20;
// The pooled search's sample: hamming_bound_sample_groups, grown with the database to at least
// 1 / kHammingPoolSampleParts of it (at most kHammingPoolMaxSampleGroups groups, whose minima
// take scratch per query), so that the bound stays as tight as over 1M rows and the pools as
// small: with 256 groups, 10M rows made pools of 8192 rows for k = 10, in four slices of queries
// (7.22 ms on the H200, slower than the buffered scan's 6.10; 6.05 with this sample). Past that
// (a database of more than 16 x 4096 groups), no pools: 100M rows, k = 10, took 51.4 ms pooled in
// slices of 250 queries, 40.1 buffered.
inline constexpr std::uint32_t kHammingPoolSampleParts = 16;
inline constexpr std::uint32_t kHammingPoolMaxSampleGroups = 4096;
std::uint32_t hamming_pool_sample_groups(std::uint32_t rows, std::uint32_t k);
struct HammingPoolShape {
  std::uint32_t sample_groups = 0;  // hamming_pool_sample_groups
  std::uint32_t sample_rows = 0;    // the first rows, in groups of kHammingBoundGroupRows
  std::uint32_t pool_cap = 0;       // keys per query; 0: no pooled search for these arguments
  // Scratch per query, in 32-bit words: the pool (a row index a key: the selection recomputes
  // their distances), its count, the sample's minima and the bound (CUDA's layout).
  std::uint64_t words_per_query = 0;
  // The scratch per query the public call offers: the larger of the GPU backends' layouts
  // (Vulkan's keeps the minima and the bounds as candidates of two words: the pool, its count,
  // 2 x groups, 2 x k and a word to align the candidates).
  std::uint64_t offered_words_per_query = 0;
};
HammingPoolShape hamming_pool_shape(const HammingTopkArgs& args);
// The scratch the public call offers a backend that pools (BackendDevice::uses_optional_scratch):
// every query's pools (at most 65535 queries, kHammingPoolScratchTarget and the slab), or 0
// without a pool shape.
std::uint64_t hamming_pool_scratch_bytes(const HammingTopkArgs& args);

// One dispatch (per query slice).
struct HammingPass {
  bool from_codes = false;        // level 0 (else a merge of candidates)
  bool final = false;             // writes the outputs (else candidates into scratch)
  std::uint32_t query_begin = 0;  // the slice: queries [query_begin, query_begin + query_count)
  std::uint32_t query_count = 0;
  std::uint32_t items = 0;        // per query: database rows (level 0) or candidates in
  std::uint32_t groups = 0;       // per query (tile): items / (level0_rows at level 0, else
                                  // kHammingMergeGroup), rounded up
  std::uint32_t group_items = 0;  // items per group: level0_rows or kHammingMergeGroup
  std::uint32_t in_base = 0;      // merges: the first candidate in scratch (entries)
  std::uint32_t in_stride = 0;    // merges: candidates from a query to the next (entries)
  std::uint32_t out_base = 0;     // not final: the first candidate written (entries)
  std::uint32_t out_stride = 0;   // not final: entries from a query to the next
};

struct HammingTopkPlan {
  std::uint64_t scratch_bytes = 0;   // for one slice; 0 when one pass does it all
  std::vector<HammingPass> passes;   // in order; each reads what the one before wrote
  // The backend's own words per query of a slice (plan_hamming_topk's extra_words), after the
  // candidate arrays: from this 32-bit word of the scratch on.
  std::uint64_t extra_word_base = 0;
  // plan_bounded_hamming_topk: the sample groups its extra words hold the bounds of (0: none).
  std::uint32_t bound_groups = 0;
};

// The entries a group of `count` items keeps, and those of `items` items in groups of `group`.
constexpr std::uint32_t hamming_kept(std::uint32_t k, std::uint32_t count) {
  return count < k ? count : k;
}
std::uint32_t hamming_level_items(std::uint32_t k, std::uint32_t items, std::uint32_t group);

// The passes for `args` with at most args.scratch_budget bytes of scratch; resource_exhausted
// when one query's candidates do not fit it. `call` names the public call in messages.
// `level0_rows`: the database rows of one level-0 group (kHammingChunkRows: the plan the public
// call reserves scratch for; the backends' scan kernels take spans, never fewer than
// min(rows, kHammingChunkRows) rows, so their plans need no more scratch than this default one).
// `extra_words`: 32-bit words of scratch per query that the backend wants for itself (the CUDA
// scan's bounds), counted in the slices.
Result<HammingTopkPlan> plan_hamming_topk(const HammingTopkArgs& args, const char* call,
                                          std::uint32_t level0_rows = kHammingChunkRows,
                                          std::uint32_t extra_words = 0);
// The plan with room for level 0's bounds (hamming_bound_sample_groups groups): per query,
// `words_per_group` words per sample group plus `words_per_query`, as extra words; the plan
// without them (bound_groups 0) when the sample has fewer than k groups or they do not fit the
// scratch.
Result<HammingTopkPlan> plan_bounded_hamming_topk(const HammingTopkArgs& args, const char* call,
                                                  std::uint32_t level0_rows,
                                                  std::uint32_t words_per_group,
                                                  std::uint32_t words_per_query);

}  // namespace ferry::ops
