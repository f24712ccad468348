// rescore, as every backend runs it (ferry/ops/rescore.hpp has the public call and its exact
// semantics), with the pitches resolved, and the algorithm both GPU backends follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/ops/rescore.hpp"

namespace ferry::ops {

// Binding 0: the queries, read: query q's element j at byte q * query_stride + j * element size.
// Binding 1: the database, read: row r's element j at byte r * database_stride + j * element
// size. Binding 2: the candidates, read: [queries x candidates] uint32. Binding 3: scores,
// written; binding 4: indices, written: [queries x k] 32-bit values each. The vector bindings
// start on a multiple of the element size, the others on a multiple of 4 bytes. Core has checked
// the shape (every field in its range, strides at least a row and a multiple of the element size)
// and that the outputs overlap nothing.
struct RescoreArgs {
  RescoreElement element = RescoreElement::float32;
  RescoreMetric metric = RescoreMetric::inner_product;
  std::uint32_t dims = 0;
  std::uint32_t queries = 0;
  std::uint32_t rows = 0;  // database rows, < kRescoreNoIndex
  std::uint32_t candidates = 0;
  std::uint32_t k = 0;
  std::uint64_t query_stride = 0;     // bytes
  std::uint64_t database_stride = 0;  // bytes

  std::uint32_t element_bytes() const noexcept {
    return element == RescoreElement::float32 ? 4u : 1u;
  }
  std::uint64_t row_bytes() const noexcept { return std::uint64_t{dims} * element_bytes(); }
};

// The CPU reference: `bindings` are the bindings' bytes.
void run_on_cpu(const RescoreArgs& args, std::span<const std::span<std::byte>> bindings);

// ---- The GPU algorithm (shaders/rescore.comp and cuda_backend/ops/rescore.cu) ----
//
// One dispatch; a workgroup of kRescoreWorkgroupSize takes one query (a 2D grid of them) and
// ranks its candidates in rounds through kRescoreSlots slots of shared memory (16 KiB, the least
// any Vulkan device has), each slot a 64-bit (score key, row index) pair that sorts ascending in
// rank order (shaders/rescore_score.h makes the keys; a skipped entry is all ones, last):
//   1. The slots past the `kept` best so far take the next candidates, each invocation scoring its
//      slots (one fma chain per candidate, dimension order).
//   2. A bitonic sort of the filled slots (rounded up to a power of two).
//   3. Duplicates, now side by side (same index: same score, same pair), become skipped entries,
//      and a second sort moves them last.
//   4. kept = min(k, entries before the first skipped one); the next round refills the rest.
// Every round adds at least kRescoreSlots - kRescoreMaxK candidates. The first k slots are the
// answer; a -0.0 score, whose key is that of +0.0, is recomputed for its sign when written.
inline constexpr std::uint32_t kRescoreWorkgroupSize = 256;
inline constexpr std::uint32_t kRescoreSlots = 2048;
static_assert(kRescoreSlots > kRescoreMaxK, "a round must have room for new candidates");
// Dimensions per iteration of the score loops (the shader's loop bodies are written for these).
inline constexpr std::uint32_t kRescoreFloatUnroll = 2;
inline constexpr std::uint32_t kRescoreInt8Unroll = 8;

// The rounds of one query when every candidate is valid and distinct (the most there can be).
std::uint32_t rescore_max_rounds(std::uint32_t candidates, std::uint32_t k);
// An upper bound of the loop iterations one invocation of shaders/rescore.comp runs (all its
// loops together), for lavapipe: Mesa's llvmpipe silently ends a shader's loops after 65535
// iterations in all (LP_MAX_TGSI_LOOP_ITERATIONS), so the Vulkan backend refuses a rescore above
// it there. An invocation scores at most ceil(candidates / workgroup) + rounds candidates, and
// recomputes at most ceil(k / workgroup) zero scores.
std::uint64_t rescore_loop_iterations(const RescoreArgs& args);

}  // namespace ferry::ops
