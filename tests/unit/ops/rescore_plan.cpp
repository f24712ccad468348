// ops::rescore_max_rounds and ops::rescore_loop_iterations (the budget the Vulkan backend holds a
// rescore to on lavapipe) against a replay of shaders/rescore.comp's loops: every loop iteration
// of the busiest invocation counted, candidates all valid and distinct and every kept score zero
// (so that each is recomputed), which is the most work an invocation can get.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "ops/rescore.hpp"

namespace {

using ferry::ops::RescoreArgs;

// The loop iterations of invocation `t` of one workgroup, as the shader runs them.
std::uint64_t replay(const RescoreArgs& args, std::uint32_t t) {
  const std::uint32_t wg = ferry::ops::kRescoreWorkgroupSize;
  const std::uint32_t unroll = args.element == ferry::RescoreElement::float32
                                   ? ferry::ops::kRescoreFloatUnroll
                                   : ferry::ops::kRescoreInt8Unroll;
  const std::uint64_t chain = (args.dims + unroll - 1) / unroll;
  std::uint64_t count = 0;
  std::uint32_t kept = 0, next = 0;
  for (;;) {
    ++count;
    const std::uint32_t fresh = std::min(ferry::ops::kRescoreSlots - kept, args.candidates - next);
    const std::uint32_t filled = kept + fresh;
    std::uint32_t size = 1;
    while (size < filled) {
      size <<= 1;
      ++count;
    }
    for (std::uint32_t slot = kept + t; slot < size; slot += wg) {
      ++count;
      if (slot < filled) count += chain;
    }
    next += fresh;
    for (int sort = 0; sort < 2; ++sort) {
      for (std::uint32_t block = 2; block <= size; block <<= 1) {
        ++count;
        for (std::uint32_t stride = block >> 1; stride > 0; stride >>= 1) {
          ++count;
          for (std::uint32_t i = t; i < size / 2; i += wg) ++count;
        }
      }
    }
    for (std::uint32_t slot = t; slot < size; slot += wg) count += 2;  // the duplicate loops
    std::uint32_t low = 0, high = size;  // every entry real: the search ends at `filled`
    while (low < high) {
      ++count;
      const std::uint32_t middle = (low + high) / 2;
      if (middle < filled) low = middle + 1; else high = middle;
    }
    kept = std::min(args.k, low);
    if (next >= args.candidates) break;
  }
  for (std::uint32_t i = t; i < args.k; i += wg) {
    ++count;
    if (i < kept) count += chain;
  }
  return count;
}

}  // namespace

TEST_CASE("rescore plan: rounds") {
  CHECK(ferry::ops::rescore_max_rounds(1, 1) == 1);
  CHECK(ferry::ops::rescore_max_rounds(2048, 1024) == 1);
  CHECK(ferry::ops::rescore_max_rounds(2049, 1) == 2);
  CHECK(ferry::ops::rescore_max_rounds(4095, 1) == 2);  // 2048, then 2047 (one slot kept)
  CHECK(ferry::ops::rescore_max_rounds(4096, 1) == 3);
  CHECK(ferry::ops::rescore_max_rounds(4096, 1024) == 3);
  CHECK(ferry::ops::rescore_max_rounds(3073, 1024) == 3);
}

TEST_CASE("rescore plan: the loop budget bounds every invocation's loops") {
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    RescoreArgs args;
    args.element = rng() % 2 == 0 ? ferry::RescoreElement::float32 : ferry::RescoreElement::int8;
    args.candidates = 1 + static_cast<std::uint32_t>(rng() % ferry::kRescoreMaxCandidates);
    args.k = 1 + static_cast<std::uint32_t>(rng() % std::min(args.candidates, ferry::kRescoreMaxK));
    args.dims = 1 + static_cast<std::uint32_t>(rng() % (i % 2 == 0 ? 100 : ferry::kRescoreMaxDims));
    args.queries = 1;
    args.rows = 1;
    const std::uint64_t bound = ferry::ops::rescore_loop_iterations(args);
    for (const std::uint32_t t : {0u, 1u, 255u}) {
      INFO("candidates " << args.candidates << ", k " << args.k << ", dims " << args.dims
                         << ", invocation " << t);
      REQUIRE(replay(args, t) <= bound);
    }
  }
  // What docs/OPS.md says: 4096 candidates of 5500 float32 dims (k 1024) fit lavapipe's 65535,
  // 5600 do not.
  RescoreArgs args;
  args.candidates = 4096;
  args.k = 1024;
  args.dims = 5500;
  CHECK(ferry::ops::rescore_loop_iterations(args) <= 65535);
  args.dims = 5600;
  CHECK(ferry::ops::rescore_loop_iterations(args) > 65535);
}
