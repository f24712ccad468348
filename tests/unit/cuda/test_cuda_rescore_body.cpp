// The CUDA rescore kernel's ranking keys (ops/rescore_thread.cuh, which nvcc builds without
// ferry's headers) against shaders/rescore_score.h, which the CPU reference and the Vulkan shader
// use: the same key and the same score back for every class of float32 and int32 score, both
// metrics. Built only with the CUDA backend.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/rescore_thread.cuh"
#include "rescore_score.h"

TEST_CASE("CUDA rescore keys: the same as the CPU reference's and the Vulkan shader's") {
  namespace score = ferry::shaders::rescore;
  std::vector<std::uint32_t> values = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u,
                                       0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
                                       0x7F800001u, 0x3F800000u, 0xBF800000u, 0x7FFFFFFFu,
                                       0xFFFFFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu};
  std::mt19937 rng(99);
  for (int i = 0; i < 100000; ++i) values.push_back(static_cast<std::uint32_t>(rng()));
  CHECK(ferry::cuda::kRescoreNaNBits == FERRY_RESCORE_NAN_BITS);
  CHECK(ferry::cuda::kRescoreWorstKey == FERRY_RESCORE_WORST_KEY);
  for (const std::uint32_t value : values) {
    for (const bool is_float : {false, true}) {
      for (const bool larger_better : {false, true}) {
        const std::uint32_t key = score::ferry_rescore_key(value, is_float, larger_better);
        REQUIRE(ferry::cuda::rescore_key(value, is_float, larger_better) == key);
        REQUIRE(ferry::cuda::rescore_key_score(key, is_float, larger_better) ==
                score::ferry_rescore_key_score(key, is_float, larger_better));
      }
    }
  }
}
