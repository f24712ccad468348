// Submissions on one queue run one after another in submission order (like a CUDA stream): a
// submission sees what the ones before it wrote, with no timeline wait between them.
#include <cstring>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

TEST_CASE("queue order: each submission sees the previous one's writes, on every queue") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    constexpr std::uint64_t kSubmissions = 24;
    const std::uint64_t size = 4099;
    for (const QueueKind kind : {QueueKind::upload, QueueKind::download, QueueKind::compute}) {
      INFO("queue ", ferry::to_string(kind));
      // Submission k first saves the target into history slot k, then overwrites the target
      // with source k. In order, slot k holds source k-1 (slot 0 the initial contents).
      const std::vector<std::byte> sources = ferry_test::random_bytes(t.rng, kSubmissions * size);
      const std::vector<std::byte> initial = ferry_test::poison_bytes(size, 18);
      Buffer source = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, sources));
      Buffer target = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, initial));
      Buffer history = REQUIRE_VALUE(t.device.create_buffer(kSubmissions * size));

      ferry::TimelinePoint last;
      for (std::uint64_t k = 0; k < kSubmissions; ++k) {
        CommandList commands;
        REQUIRE_OK(commands.copy(target, 0, history, k * size, size));
        REQUIRE_OK(commands.copy(source, k * size, target, 0, size));
        last = REQUIRE_VALUE(t.device.queue(kind).submit(std::move(commands)));
      }
      REQUIRE_OK(last.wait(ferry_test::kLongWait));

      std::vector<std::byte> expected(kSubmissions * size);
      std::memcpy(expected.data(), initial.data(), size);
      std::memcpy(expected.data() + size, sources.data(), (kSubmissions - 1) * size);
      ferry_test::check_bytes_equal(
          REQUIRE_VALUE(ferry_test::read_bytes(t.device, history, 0, kSubmissions * size)),
          expected, "history of the target");
      ferry_test::check_bytes_equal(
          REQUIRE_VALUE(ferry_test::read_bytes(t.device, target, 0, size)),
          std::span(sources).subspan((kSubmissions - 1) * size), "target after the last");
    }
  });
}
