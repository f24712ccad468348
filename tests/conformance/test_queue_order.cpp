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

// Copy-only submissions may run without a barrier against the ones before them where their memory
// does not conflict (Vulkan: vulkan/queue_hazards.hpp). Random chains of copies between device
// and host buffers, each submission its own, no timeline waits (the host waits now and then),
// ranges that often overlap, touch or miss each other (and fills on the compute queue, which
// always order): the result must be that of running them one after another.
TEST_CASE("queue order: random copy chains between device and host buffers") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    constexpr std::size_t kBuffers = 5;  // 0-2 device, 3 host_upload, 4 host_readback
    constexpr int kSubmissions = 80;
    for (const QueueKind kind : {QueueKind::upload, QueueKind::download, QueueKind::compute}) {
      INFO("queue ", ferry::to_string(kind));
      std::vector<std::uint64_t> sizes;
      std::vector<std::vector<std::byte>> model;
      std::vector<Buffer> buffers;
      for (std::size_t b = 0; b < kBuffers; ++b) {
        sizes.push_back(1000 + 37 * b + (t.rng() % 64));
        model.push_back(ferry_test::random_bytes(t.rng, sizes.back()));
        if (b < 3) {
          buffers.push_back(REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, model.back())));
        } else {
          buffers.push_back(REQUIRE_VALUE(t.device.create_buffer(
              sizes.back(), b == 3 ? ferry::MemoryKind::host_upload
                                   : ferry::MemoryKind::host_readback)));
          std::span<std::byte> host = REQUIRE_VALUE(buffers.back().host_span());
          std::memcpy(host.data(), model.back().data(), sizes.back());
        }
      }
      // Offsets from a few spots (so that ranges collide often), sizes from 1 byte to ~300.
      auto pick_range = [&](std::size_t b, std::uint64_t size) {
        const std::uint64_t spots[] = {0, 5, 16, 200, 333, sizes[b] - size};
        std::uint64_t offset = spots[t.rng() % 6];
        return std::min(offset, sizes[b] - size);
      };
      ferry::TimelinePoint last;
      for (int s = 0; s < kSubmissions; ++s) {
        CommandList commands;
        const int copies = 1 + static_cast<int>(t.rng() % 3);
        for (int c = 0; c < copies; ++c) {
          if (kind == QueueKind::compute && t.rng() % 5 == 0) {  // an op between the copies
            const std::size_t b = t.rng() % kBuffers;
            const std::uint64_t size = 1 + t.rng() % 300;
            const std::uint64_t offset = pick_range(b, size);
            const auto pattern = static_cast<std::uint32_t>(t.rng());
            REQUIRE_OK(ferry::fill(commands, buffers[b], offset, size, pattern));
            for (std::uint64_t i = 0; i < size; ++i) {
              model[b][offset + i] = static_cast<std::byte>(pattern >> (8 * (i % 4)));
            }
            continue;
          }
          const std::size_t src = t.rng() % kBuffers;
          const std::size_t dst = (src + 1 + t.rng() % (kBuffers - 1)) % kBuffers;
          const std::uint64_t size = 1 + t.rng() % 300;
          const std::uint64_t src_offset = pick_range(src, size);
          const std::uint64_t dst_offset = pick_range(dst, size);
          REQUIRE_OK(commands.copy(buffers[src], src_offset, buffers[dst], dst_offset, size));
          std::memcpy(model[dst].data() + dst_offset, model[src].data() + src_offset, size);
        }
        last = REQUIRE_VALUE(t.device.queue(kind).submit(std::move(commands)));
        // Now and then the host waits (what it has seen complete is ordered by that alone).
        if (t.rng() % 7 == 0) REQUIRE_OK(last.wait(ferry_test::kLongWait));
      }
      REQUIRE_OK(last.wait(ferry_test::kLongWait));
      for (std::size_t b = 0; b < kBuffers; ++b) {
        INFO("buffer ", b);
        if (b < 3) {
          ferry_test::check_bytes_equal(
              REQUIRE_VALUE(ferry_test::read_bytes(t.device, buffers[b], 0, sizes[b])), model[b],
              "device buffer after the chain");
        } else {
          std::span<std::byte> host = REQUIRE_VALUE(buffers[b].host_span());
          ferry_test::check_bytes_equal(std::vector<std::byte>(host.begin(), host.end()), model[b],
                                        "host buffer after the chain");
        }
      }
    }
  });
}
