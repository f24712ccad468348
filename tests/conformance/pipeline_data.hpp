// Inputs and checks shared by the pipeline tests (ingress, failures, faults, soak).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "ferry/ferry.hpp"
#include "harness.hpp"

namespace ferry_test {

// Small RGB batches with an awkward shape: odd sizes, a crop, mirrored, float16 output.
ferry::NormalizeParams awkward_params(std::mt19937_64& rng);

// `count` random host batches of `bytes` each, made up front so the truth of each is known.
std::vector<std::vector<std::byte>> make_batches(std::mt19937_64& rng, std::size_t count,
                                                 std::uint64_t bytes);

// CHECKs that the batch's tensor (of t.device, or of `device`) is the normalize truth of `input`.
void check_batch(BackendUnderTest& t, const ferry::IngressBatch& batch,
                 const ferry::NormalizeParams& params, const std::vector<std::byte>& input);
void check_batch(const ferry::Device& device, const ferry::IngressBatch& batch,
                 const ferry::NormalizeParams& params, const std::vector<std::byte>& input);

// Waits (briefly polling) until `counter` reaches `value`; false on a 20 s timeout.
bool eventually_equals(const std::atomic<std::uint64_t>& counter, std::uint64_t value);

// A source handing out `batches` as pageable memory, then the end of the stream.
ferry::IngressSource pageable_source(const std::vector<std::vector<std::byte>>& batches);

}  // namespace ferry_test
