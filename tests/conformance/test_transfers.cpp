// Transfers: pinned (leases, host buffers) and pageable (ferry::upload / ferry::download) round
// trips of random sizes from 1 byte to 64 MiB at unaligned offsets, and device-to-device copies.
// Destinations are poisoned first and checked whole, so bytes written out of place show up.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::BufferRef;
using ferry::CommandList;
using ferry::Lease;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::SubmitSync;
using ferry::TimelinePoint;
using ferry_test::BackendUnderTest;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// Pinned host memory for one side of a transfer: a lease when one fits, else a host buffer.
struct PinnedHost {
  Lease lease;
  Buffer buffer;

  BufferRef ref() const { return lease ? BufferRef(lease) : BufferRef(buffer); }
  std::span<std::byte> bytes() const {
    if (lease) return lease.data();
    const auto span = buffer.host_span();
    REQUIRE_OK(span);
    return span.value();
  }
  const char* kind() const { return lease ? "lease" : "host buffer"; }
};

PinnedHost pinned_host(const ferry::Device& device, const ferry::StagingPool& pool,
                       std::uint64_t size, bool prefer_lease, MemoryKind kind) {
  PinnedHost host;
  if (prefer_lease && size <= pool.options().slab_bytes) {
    host.lease = REQUIRE_VALUE(pool.acquire(size, ferry_test::kLongWait));
    REQUIRE(host.lease.size() == size);
    REQUIRE(host.lease.data().size() == size);
  } else {
    host.buffer = REQUIRE_VALUE(device.create_buffer(size, kind));
    REQUIRE(host.buffer.size() == size);
    REQUIRE(host.buffer.memory_kind() == kind);
  }
  return host;
}

std::vector<std::uint64_t> transfer_sizes(std::mt19937_64& rng) {
  std::vector<std::uint64_t> sizes = {1, 2, 3, 5, 255, 256, 257, 4095, 4097, 65537};
  for (int i = 0; i < 8; ++i) sizes.push_back(ferry_test::log_uniform_size(rng, 1, 6 * kMiB));
  sizes.push_back(64 * kMiB);
  return sizes;
}

// One pinned round trip: host -> device (upload queue) -> host (download queue), the download
// waiting on the upload through the timeline (no host round trip in between). The three copy
// offsets are multiples of `offset_unit` (16: what Vulkan's copy shader takes, copy_shader.hpp).
void pinned_round_trip(BackendUnderTest& t, const ferry::StagingPool& upload_pool,
                       const ferry::StagingPool& readback_pool, std::uint64_t size,
                       bool use_leases, std::uint64_t offset_unit = 1) {
  auto offset = [&] { return offset_unit * ferry_test::uniform(t.rng, 0, 300 / offset_unit); };
  const std::uint64_t src_offset = offset();
  const std::uint64_t dev_offset = offset();
  const std::uint64_t dev_tail = ferry_test::uniform(t.rng, 0, 300);
  const std::uint64_t dst_offset = offset();
  const std::uint64_t dst_tail = ferry_test::uniform(t.rng, 0, 300);
  std::ostringstream what;
  what << size << " bytes, src offset " << src_offset << ", device offset " << dev_offset
       << ", readback offset " << dst_offset;
  INFO(what.str());

  const PinnedHost src =
      pinned_host(t.device, upload_pool, src_offset + size, use_leases, MemoryKind::host_upload);
  const PinnedHost dst = pinned_host(t.device, readback_pool, dst_offset + size + dst_tail,
                                     use_leases, MemoryKind::host_readback);
  INFO("source: ", src.kind(), ", destination: ", dst.kind());
  const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
  ferry_test::fill_poison(src.bytes(), 1);
  std::memcpy(src.bytes().data() + src_offset, data.data(), size);
  ferry_test::fill_poison(dst.bytes(), 2);

  const std::uint64_t dev_size = dev_offset + size + dev_tail;
  Buffer device = REQUIRE_VALUE(t.device.create_buffer(dev_size));
  const std::vector<std::byte> dev_poison = ferry_test::poison_bytes(dev_size, 3);
  REQUIRE_OK(ferry_test::write_bytes(t.device, device, 0, dev_poison));

  CommandList up;
  REQUIRE_OK(up.copy(src.ref(), src_offset, device, dev_offset, size));
  const TimelinePoint uploaded =
      REQUIRE_VALUE(t.device.queue(QueueKind::upload).submit(std::move(up)));
  CommandList down;
  REQUIRE_OK(down.copy(device, dev_offset, dst.ref(), dst_offset, size));
  const TimelinePoint downloaded =
      REQUIRE_VALUE(t.device.queue(QueueKind::download)
                        .submit(std::move(down), {.wait = {uploaded}, .signal = {}}));
  REQUIRE_OK(downloaded.wait(ferry_test::kLongWait));
  CHECK(uploaded.reached());

  std::vector<std::byte> expected_dst = ferry_test::poison_bytes(dst.bytes().size(), 2);
  std::memcpy(expected_dst.data() + dst_offset, data.data(), size);
  ferry_test::check_bytes_equal(dst.bytes(), expected_dst, "readback after round trip");

  std::vector<std::byte> expected_dev = dev_poison;
  std::memcpy(expected_dev.data() + dev_offset, data.data(), size);
  const auto dev_bytes = REQUIRE_VALUE(ferry_test::read_bytes(t.device, device, 0, dev_size));
  ferry_test::check_bytes_equal(dev_bytes, expected_dev, "device buffer after upload");
}

}  // namespace

TEST_CASE("pinned round trips: 1 byte to 64 MiB, unaligned offsets, leases and host buffers") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool upload_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, 8 * kMiB, 2)));
    const ferry::StagingPool readback_pool = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_readback, 8 * kMiB, 2)));
    const std::vector<std::uint64_t> sizes = transfer_sizes(t.rng);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      pinned_round_trip(t, upload_pool, readback_pool, sizes[i], i % 2 == 0);
    }
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(upload_pool.stats().bytes_in_use == 0);
    CHECK(readback_pool.stats().bytes_in_use == 0);
  });
}

// What Vulkan's copy shader takes (FERRY_VULKAN_COPIES=shader runs this on it: tests/CMakeLists.txt):
// offsets on 16 bytes, sizes with and without a tail of under 16 bytes for the copy engine.
TEST_CASE("pinned round trips at 16-byte offsets: 1 byte to 6 MiB, with and without a tail") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool upload_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, 8 * kMiB, 2)));
    const ferry::StagingPool readback_pool = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_readback, 8 * kMiB, 2)));
    std::vector<std::uint64_t> sizes = {1, 15, 16, 17, 31, 4096, 4096 + 15, 65536 + 16};
    for (int i = 0; i < 6; ++i) {
      const std::uint64_t size = ferry_test::log_uniform_size(t.rng, 16, 6 * kMiB);
      sizes.push_back(size / 16 * 16);  // no tail
      sizes.push_back(size);
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      pinned_round_trip(t, upload_pool, readback_pool, sizes[i], i % 2 == 0, 16);
    }
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
  });
}

TEST_CASE("pageable round trips through the pool: 1 byte to 64 MiB, unaligned, many chunks") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool upload_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, 2 * kMiB, 3)));
    const ferry::StagingPool readback_pool = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_readback, 2 * kMiB, 3)));
    const ferry::Timeline timeline = REQUIRE_VALUE(t.device.create_timeline());
    const ferry::Timeline downloaded = REQUIRE_VALUE(t.device.create_timeline());
    std::uint64_t next_value = 1;

    const std::vector<std::uint64_t> sizes = transfer_sizes(t.rng);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::uint64_t size = sizes[i];
      // Unaligned user pointers: the data starts 1..7 bytes into its allocation.
      const std::uint64_t src_misalign = ferry_test::uniform(t.rng, 1, 7);
      const std::uint64_t dst_misalign = ferry_test::uniform(t.rng, 1, 7);
      const std::uint64_t dev_offset = ferry_test::uniform(t.rng, 0, 300);
      const std::uint64_t dev_tail = ferry_test::uniform(t.rng, 0, 300);
      ferry::TransferOptions options;
      options.chunk_bytes = ferry_test::log_uniform_size(t.rng, 4096, 2 * kMiB);
      options.host_threads = static_cast<unsigned>(ferry_test::uniform(t.rng, 0, 3));
      options.acquire_timeout = ferry_test::kLongWait;
      std::ostringstream what;
      what << size << " bytes, device offset " << dev_offset << ", chunk " << options.chunk_bytes
           << ", host threads " << options.host_threads;
      INFO(what.str());

      std::vector<std::byte> src_storage = ferry_test::poison_bytes(src_misalign + size, 4);
      ferry_test::fill_random(t.rng, std::span(src_storage).subspan(src_misalign));
      const std::span<const std::byte> src = std::span(src_storage).subspan(src_misalign);

      const std::uint64_t dev_size = dev_offset + size + dev_tail;
      Buffer device = REQUIRE_VALUE(t.device.create_buffer(dev_size));
      const std::vector<std::byte> dev_poison = ferry_test::poison_bytes(dev_size, 5);
      REQUIRE_OK(ferry_test::write_bytes(t.device, device, 0, dev_poison));

      const std::uint64_t signal_value = next_value++;
      const TimelinePoint uploaded = REQUIRE_VALUE(
          ferry::upload(t.device.queue(QueueKind::upload), upload_pool, src, device, dev_offset,
                        {.wait = {}, .signal = {{timeline, signal_value}}}, options));
      // The source may be reused as soon as upload() returns.
      std::vector<std::byte> expected_dev = dev_poison;
      std::memcpy(expected_dev.data() + dev_offset, src.data(), size);
      ferry_test::fill_poison(src_storage, 6);

      std::vector<std::byte> dst_storage = ferry_test::poison_bytes(dst_misalign + size + 64, 7);
      const std::span<std::byte> dst = std::span(dst_storage).subspan(dst_misalign, size);
      // The download waits for the upload on the device side.
      REQUIRE_OK(ferry::download(
          t.device.queue(QueueKind::download), readback_pool, device, dev_offset, dst,
          {.wait = {uploaded}, .signal = {{downloaded, signal_value}}}, options));
      CHECK_OK(downloaded.wait(signal_value, ferry_test::kLongWait));
      CHECK(uploaded.reached());  // the download waited for it
      CHECK_OK(timeline.wait(signal_value, ferry_test::kLongWait));

      std::vector<std::byte> expected_dst = ferry_test::poison_bytes(dst_storage.size(), 7);
      std::memcpy(expected_dst.data() + dst_misalign, expected_dev.data() + dev_offset, size);
      ferry_test::check_bytes_equal(dst_storage, expected_dst, "host memory after download");

      const auto dev_bytes = REQUIRE_VALUE(ferry_test::read_bytes(t.device, device, 0, dev_size));
      ferry_test::check_bytes_equal(dev_bytes, expected_dev, "device buffer after upload");
    }
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(upload_pool.stats().bytes_in_use == 0);
    CHECK(readback_pool.stats().bytes_in_use == 0);
  });
}

TEST_CASE("device-to-device copies with offsets, across queues and within one submission") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    constexpr int kBuffers = 3;
    std::vector<std::vector<std::byte>> model;
    std::vector<Buffer> buffers;
    for (int i = 0; i < kBuffers; ++i) {
      const std::uint64_t size = ferry_test::uniform(t.rng, 1, 3 * kMiB);
      model.push_back(ferry_test::random_bytes(t.rng, size));
      buffers.push_back(REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, model.back())));
    }

    // Random copies; each submission waits on the previous one (on whatever queue), so the
    // final contents are defined; several copies per submission must see each other's results.
    std::optional<TimelinePoint> previous;
    int copies = 0;
    for (int submission = 0; submission < 24; ++submission) {
      CommandList commands;
      const int count = static_cast<int>(ferry_test::uniform(t.rng, 1, 4));
      for (int c = 0; c < count; ++c) {
        const auto src = static_cast<std::size_t>(ferry_test::uniform(t.rng, 0, kBuffers - 1));
        const auto dst = static_cast<std::size_t>(ferry_test::uniform(t.rng, 0, kBuffers - 1));
        const std::uint64_t src_size = model[src].size();
        const std::uint64_t dst_size = model[dst].size();
        const std::uint64_t size =
            ferry_test::log_uniform_size(t.rng, 1, std::min(src_size, dst_size));
        std::uint64_t src_offset = ferry_test::uniform(t.rng, 0, src_size - size);
        std::uint64_t dst_offset = ferry_test::uniform(t.rng, 0, dst_size - size);
        if (src == dst) {
          // Same buffer: pick disjoint ranges, or skip when none fits.
          if (2 * size > src_size) continue;
          src_offset = ferry_test::uniform(t.rng, 0, src_size - 2 * size);
          dst_offset = ferry_test::uniform(t.rng, src_offset + size, src_size - size);
          if (ferry_test::uniform(t.rng, 0, 1) == 1) std::swap(src_offset, dst_offset);
        }
        REQUIRE_OK(commands.copy(buffers[src], src_offset, buffers[dst], dst_offset, size));
        std::memmove(model[dst].data() + dst_offset, model[src].data() + src_offset, size);
        ++copies;
      }
      if (commands.empty()) continue;
      const auto kind = static_cast<QueueKind>(ferry_test::uniform(t.rng, 0, 2));
      SubmitSync sync;
      if (previous) sync.wait.push_back(*previous);
      previous = REQUIRE_VALUE(t.device.queue(kind).submit(std::move(commands), sync));
    }
    REQUIRE(previous.has_value());
    REQUIRE_OK(previous->wait(ferry_test::kLongWait));
    MESSAGE(copies, " device-to-device copies");
    for (int i = 0; i < kBuffers; ++i) {
      const auto index = static_cast<std::size_t>(i);
      const auto bytes =
          REQUIRE_VALUE(ferry_test::read_bytes(t.device, buffers[index], 0, model[index].size()));
      ferry_test::check_bytes_equal(bytes, model[index], "device buffer after random copies");
    }
  });
}

TEST_CASE("copies between pinned host memory: lease to host buffer and back") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, kMiB, 2)));
    const std::uint64_t size = 300001;
    Lease lease = REQUIRE_VALUE(pool.acquire(size));
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    std::memcpy(lease.data().data(), data.data(), size);
    Buffer readback = REQUIRE_VALUE(t.device.create_buffer(size + 10, MemoryKind::host_readback));
    const auto readback_bytes = REQUIRE_VALUE(readback.host_span());
    ferry_test::fill_poison(readback_bytes, 8);
    REQUIRE_OK(
        ferry_test::copy_and_wait(t.device, QueueKind::download, lease, 0, readback, 7, size));
    std::vector<std::byte> expected = ferry_test::poison_bytes(size + 10, 8);
    std::memcpy(expected.data() + 7, data.data(), size);
    ferry_test::check_bytes_equal(readback_bytes, expected, "host readback buffer");
  });
}

// Page-aligned, page-multiple host memory: what every backend can register (4096 covers
// minImportedHostPointerAlignment on NVIDIA and lavapipe, and cudaHostRegister).
constexpr std::uint64_t kPage = 4096;

struct FreeAligned {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedMemory = std::unique_ptr<std::byte, FreeAligned>;

AlignedMemory allocate_pages(std::uint64_t pages) {
  return AlignedMemory(static_cast<std::byte*>(std::aligned_alloc(kPage, pages * kPage)));
}

// Registers `memory`, or returns nullopt (with a message) where the backend cannot register
// host memory at all; any other failure fails the test.
std::optional<Buffer> register_or_skip(BackendUnderTest& t, std::span<std::byte> memory,
                                       MemoryKind kind) {
  ferry::Result<Buffer> registered = t.device.register_host_memory(memory, kind);
  if (!registered.ok() && registered.status().code() == ferry::ErrorCode::unavailable) {
    MESSAGE("register_host_memory is unavailable on this backend: ",
            registered.status().to_string());
    return std::nullopt;
  }
  return REQUIRE_VALUE(std::move(registered));
}

TEST_CASE("registered host memory: pinned in place, copied without staging") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t page = kPage;
    const std::uint64_t size = 64 * page;
    const AlignedMemory up_memory = allocate_pages(64);
    const AlignedMemory down_memory = allocate_pages(64);
    REQUIRE(up_memory);
    REQUIRE(down_memory);
    const std::span<std::byte> up_span(up_memory.get(), size);
    const std::span<std::byte> down_span(down_memory.get(), size);

    std::optional<Buffer> registered = register_or_skip(t, up_span, MemoryKind::host_upload);
    if (!registered) return;
    Buffer up = std::move(*registered);
    Buffer down =
        REQUIRE_VALUE(t.device.register_host_memory(down_span, MemoryKind::host_readback));
    CHECK(up.size() == size);
    CHECK(up.memory_kind() == MemoryKind::host_upload);
    CHECK(down.memory_kind() == MemoryKind::host_readback);
    CHECK(REQUIRE_VALUE(up.host_span()).data() == up_memory.get());
    CHECK(REQUIRE_VALUE(down.host_span()).data() == down_memory.get());

    ferry_test::fill_random(t.rng, up_span);
    ferry_test::fill_poison(down_span, 19);
    const std::uint64_t offset = 777;
    const std::uint64_t count = size - 2 * offset;
    Buffer device = REQUIRE_VALUE(t.device.create_buffer(size));
    REQUIRE_OK(
        ferry_test::copy_and_wait(t.device, QueueKind::upload, up, offset, device, 1, count));
    REQUIRE_OK(ferry_test::copy_and_wait(t.device, QueueKind::download, device, 1, down, offset + 5,
                                         count));
    std::vector<std::byte> expected = ferry_test::poison_bytes(size, 19);
    std::memcpy(expected.data() + offset + 5, up_span.data() + offset, count);
    ferry_test::check_bytes_equal(down_span, expected, "registered readback memory");

    CHECK_ERROR(t.device.register_host_memory({}, MemoryKind::host_upload),
                ferry::ErrorCode::invalid_argument);
    CHECK_ERROR(t.device.register_host_memory(up_span, MemoryKind::device),
                ferry::ErrorCode::invalid_argument);
    // Misaligned by one byte (in memory registered nowhere else: CUDA refuses overlaps). Vulkan
    // imports whole minImportedHostPointerAlignment granules and refuses rather than pinning the
    // caller's neighbours; CPU and CUDA accept any range.
    const AlignedMemory spare_memory = allocate_pages(2);
    REQUIRE(spare_memory);
    const std::span<std::byte> spare_span(spare_memory.get(), 2 * page);
    const std::span<std::byte> misaligned_start = spare_span.subspan(1, page);
    const std::span<std::byte> misaligned_size = spare_span.subspan(0, page + 1);
    for (const std::span<std::byte> misaligned : {misaligned_start, misaligned_size}) {
      ferry::Result<Buffer> result =
          t.device.register_host_memory(misaligned, MemoryKind::host_upload);
      if (t.backend == ferry::Backend::vulkan) {
        REQUIRE_FALSE(result.ok());
        CHECK(result.status().code() == ferry::ErrorCode::invalid_argument);
        // The error names the alignment the caller must meet.
        CHECK_MESSAGE(result.status().message().find("multiples of") != std::string::npos,
                      result.status().to_string());
      } else if (!result.ok()) {
        CHECK_MESSAGE(result.status().code() == ferry::ErrorCode::invalid_argument,
                      result.status().to_string());
      }
    }
    // The memory must outlive the buffers and the submissions using them: drop the buffers and
    // let the device retire its work before the memory is freed at the end of the scope.
    up.release();
    down.release();
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
  });
}

TEST_CASE("registered host memory: both directions, inside a larger allocation, with a fill") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    // Registered ranges start one page into their allocations; the guard pages around them must
    // come through untouched.
    const std::uint64_t pages = 16;
    const std::uint64_t size = pages * kPage;
    const AlignedMemory up_memory = allocate_pages(pages + 2);
    const AlignedMemory down_memory = allocate_pages(pages + 2);
    REQUIRE(up_memory);
    REQUIRE(down_memory);
    const std::span<std::byte> up_all(up_memory.get(), size + 2 * kPage);
    const std::span<std::byte> down_all(down_memory.get(), size + 2 * kPage);
    const std::span<std::byte> up_span = up_all.subspan(kPage, size);
    const std::span<std::byte> down_span = down_all.subspan(kPage, size);
    ferry_test::fill_poison(up_all, 3);
    ferry_test::fill_poison(down_all, 4);

    std::optional<Buffer> registered = register_or_skip(t, up_span, MemoryKind::host_upload);
    if (!registered) return;
    Buffer up = std::move(*registered);
    Buffer down =
        REQUIRE_VALUE(t.device.register_host_memory(down_span, MemoryKind::host_readback));

    // Upload: registered host_upload -> device, checked by reading the device buffer back
    // through ordinary (non-registered) memory.
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    std::memcpy(up_span.data(), data.data(), size);
    Buffer device = REQUIRE_VALUE(t.device.create_buffer(size));
    REQUIRE_OK(ferry_test::copy_and_wait(t.device, QueueKind::upload, up, 0, device, 0, size));
    const std::vector<std::byte> on_device =
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, device, 0, size));
    ferry_test::check_bytes_equal(on_device, data, "device buffer uploaded from registered memory");

    // Download: device -> registered host_readback, the whole range.
    ferry_test::fill_poison(down_span, 9);
    REQUIRE_OK(
        ferry_test::copy_and_wait(t.device, QueueKind::download, device, 0, down, 0, size));
    ferry_test::check_bytes_equal(down_span, data, "registered memory downloaded into");

    // Registered to registered, and a fill on the compute queue ending at the range's last byte.
    const std::uint64_t fill_offset = size - 1001;
    REQUIRE_OK(
        ferry_test::copy_and_wait(t.device, QueueKind::upload, up, 5, down, 3, size - 2000));
    REQUIRE_OK(ferry_test::fill_and_wait(t.device, down, fill_offset, 1001, 0xA1B2C3D4u));
    std::vector<std::byte> expected = data;
    std::memcpy(expected.data() + 3, data.data() + 5, size - 2000);
    ferry_test::apply_fill(expected, fill_offset, 1001, 0xA1B2C3D4u);
    ferry_test::check_bytes_equal(down_span, expected, "registered memory after copy and fill");

    const std::vector<std::byte> up_guard = ferry_test::poison_bytes(size + 2 * kPage, 3);
    const std::vector<std::byte> down_guard = ferry_test::poison_bytes(size + 2 * kPage, 4);
    const auto guards = [&](std::span<const std::byte> all, const std::vector<std::byte>& poison,
                            const char* what) {
      ferry_test::check_bytes_equal(all.first(kPage), std::span(poison).first(kPage), what);
      ferry_test::check_bytes_equal(all.last(kPage), std::span(poison).last(kPage), what);
    };
    guards(up_all, up_guard, "pages around the registered upload range");
    guards(down_all, down_guard, "pages around the registered readback range");

    up.release();
    down.release();
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
  });
}
