#include "pipeline_data.hpp"

#include <chrono>
#include <optional>
#include <thread>

#include "device_io.hpp"
#include "ops/normalize_truth.hpp"
#include "test_data.hpp"

namespace ferry_test {

ferry::NormalizeParams awkward_params(std::mt19937_64& rng) {
  ferry::NormalizeParams p;
  p.input.batch = static_cast<std::uint32_t>(uniform(rng, 1, 3));
  p.input.height = static_cast<std::uint32_t>(uniform(rng, 5, 31));
  p.input.width = static_cast<std::uint32_t>(uniform(rng, 5, 47));
  p.input.channels = 3;
  p.crop = {1, 2, p.input.width - 2, p.input.height - 2};
  p.mirror = true;
  p.output_type = ferry::ElementType::float16;
  p.mean = {123.675, 116.28, 103.53, 0};
  p.std = {58.395, 57.12, 57.375, 1};
  return p;
}

std::vector<std::vector<std::byte>> make_batches(std::mt19937_64& rng, std::size_t count,
                                                 std::uint64_t bytes) {
  std::vector<std::vector<std::byte>> batches;
  for (std::size_t i = 0; i < count; ++i) batches.push_back(random_bytes(rng, bytes));
  return batches;
}

void check_batch(BackendUnderTest& t, const ferry::IngressBatch& batch,
                 const ferry::NormalizeParams& params, const std::vector<std::byte>& input) {
  check_batch(t.device, batch, params, input);
}

void check_batch(const ferry::Device& device, const ferry::IngressBatch& batch,
                 const ferry::NormalizeParams& params, const std::vector<std::byte>& input) {
  INFO("batch " << batch.index() << ": " << describe(params));
  REQUIRE_OK(batch.ready().wait(kLongWait));
  const auto actual = REQUIRE_VALUE(read_bytes(device, batch.tensor(), 0, batch.tensor_bytes()));
  check_bytes_equal(actual, expected_output(params, input), "ingress tensor");
}

bool eventually_equals(const std::atomic<std::uint64_t>& counter, std::uint64_t value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (counter.load() != value) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

ferry::IngressSource pageable_source(const std::vector<std::vector<std::byte>>& batches) {
  return [&batches](std::uint64_t index) -> ferry::Result<std::optional<ferry::HostBatch>> {
    if (index >= batches.size()) return std::optional<ferry::HostBatch>();
    return std::optional<ferry::HostBatch>(ferry::HostBatch::pageable(batches[index]));
  };
}

}  // namespace ferry_test
