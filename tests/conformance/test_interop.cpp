// Interop (ferry/interop.hpp): ferry memory at native addresses, foreign memory wrapped in place,
// and ordering through native CUDA streams (the legacy default stream, which needs no CUDA code
// in the test: two hops through it must order a copy after another without a timeline wait).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Backend;
using ferry::Buffer;
using ferry::BufferRef;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::NativeMemoryKind;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uintptr_t kLegacyStream = 1;  // DLPack's number for CUDA's legacy default stream

std::vector<std::byte> read_back(BackendUnderTest& t, const BufferRef& src, std::uint64_t size) {
  return REQUIRE_VALUE(ferry_test::read_bytes(t.device, src, 0, size));
}

}  // namespace

TEST_CASE("interop: native addresses of buffers and leases hold their bytes") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = 12345;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);

    // A lease: its range of the slab, host memory on every backend.
    const ferry::StagingPool pool = REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    ferry::Lease first = REQUIRE_VALUE(pool.acquire(1000));  // so the next lease is not at 0
    ferry::Lease lease = REQUIRE_VALUE(pool.acquire(size));
    const ferry::NativeMemory leased = REQUIRE_VALUE(ferry::native_memory(lease));
    CHECK(leased.data == lease.data().data());
    CHECK(leased.size == size);
    CHECK(leased.kind == (t.backend == Backend::cuda ? NativeMemoryKind::cuda_pinned_host
                                                     : NativeMemoryKind::host));
    std::memcpy(leased.data, data.data(), size);
    ferry_test::check_bytes_equal(read_back(t, lease, size), data, "lease via native address");

    // Device memory: an address on the CPU and CUDA backends, none on Vulkan.
    Buffer device = REQUIRE_VALUE(t.device.create_buffer(size));
    ferry::Result<ferry::NativeMemory> native = ferry::native_memory(device);
    if (t.backend == Backend::vulkan) {
      CHECK_ERROR(native, ErrorCode::unavailable);
      CHECK(native.status().message().find("Vulkan") != std::string::npos);
    } else {
      REQUIRE_OK(native);
      CHECK(native->size == size);
      if (t.backend == Backend::cpu) {
        CHECK(native->kind == NativeMemoryKind::host);
        std::memcpy(native->data, data.data(), size);  // device memory is host memory here
        ferry_test::check_bytes_equal(read_back(t, device, size), data, "cpu device memory");
      } else {
        CHECK(native->kind == NativeMemoryKind::cuda_device);
        CHECK(native->device_ordinal == t.device.info().index);
      }
    }
    Buffer released = REQUIRE_VALUE(t.device.create_buffer(64));
    released.release();
    CHECK_ERROR(ferry::native_memory(released), ErrorCode::released);
  });
}

TEST_CASE("interop: wrapped host memory is used in place and its owner kept until the work is done") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = 8 * kPage;
    auto* memory = static_cast<std::byte*>(std::aligned_alloc(kPage, size));
    REQUIRE(memory != nullptr);
    ferry_test::fill_random(t.rng, {memory, size});
    const std::vector<std::byte> expected(memory, memory + size);
    auto released = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<void> owner(memory, [released](void* p) {
      std::free(p);
      released->store(true);
    });
    // The CPU backend takes host memory as device memory too; GPU backends as host memory.
    const MemoryKind kind = t.backend == Backend::cpu ? MemoryKind::device : MemoryKind::host_upload;
    ferry::Result<Buffer> wrapped = ferry::wrap_native_memory(t.device, {memory, size}, kind, owner);
    owner.reset();
    if (!wrapped.ok() && wrapped.status().code() == ErrorCode::unavailable) {
      MESSAGE("wrapping host memory is unavailable here: ", wrapped.status().to_string());
      return;
    }
    Buffer buffer = REQUIRE_VALUE(std::move(wrapped));
    CHECK(REQUIRE_VALUE(ferry::native_memory(buffer)).data == memory);

    // A copy out of it, held back on a gate while the Buffer handle is dropped: the owner must
    // outlive the copy.
    const ferry::Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    Buffer target = REQUIRE_VALUE(t.device.create_buffer(size));
    CommandList commands;
    REQUIRE_OK(commands.copy(buffer, 0, target, 0, size));
    const ferry::TimelinePoint copied = REQUIRE_VALUE(
        t.device.queue(QueueKind::upload).submit(std::move(commands), {.wait = {{gate, 1}}, .signal = {}}));
    buffer.release();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK_FALSE(released->load());
    REQUIRE_OK(gate.signal(1));
    REQUIRE_OK(copied.wait(ferry_test::kLongWait));
    ferry_test::check_bytes_equal(read_back(t, target, size), expected, "wrapped memory's copy");
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));  // retires the copy
    CHECK(released->load());

    // Bad input.
    CHECK_ERROR(ferry::wrap_native_memory(t.device, {}, kind), ErrorCode::invalid_argument);
    std::vector<std::byte> ordinary(256);
    if (t.backend == Backend::cuda) {
      // Ordinary host memory is no CUDA device memory.
      CHECK_ERROR(ferry::wrap_native_memory(t.device, ordinary, MemoryKind::device),
                  ErrorCode::invalid_argument);
    } else if (t.backend == Backend::vulkan) {
      CHECK_ERROR(ferry::wrap_native_memory(t.device, ordinary, MemoryKind::device),
                  ErrorCode::unavailable);
    }
  });
}

TEST_CASE("interop: CUDA device memory wraps as device memory of its device") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    if (t.backend != Backend::cuda) return;  // the only backend with foreign device memory
    const std::uint64_t size = 70001;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer original = REQUIRE_VALUE(t.device.create_buffer(size));
    const ferry::NativeMemory native = REQUIRE_VALUE(ferry::native_memory(original));
    REQUIRE_OK(ferry_test::write_bytes(t.device, original, 0, data));
    // The same memory, wrapped again (as another library's would be): reads see the bytes.
    Buffer wrapped = REQUIRE_VALUE(ferry::wrap_native_memory(
        t.device, {native.data, size}, MemoryKind::device, original.state()));
    ferry_test::check_bytes_equal(read_back(t, wrapped, size), data, "wrapped device memory");
    // A device address as host memory is refused.
    CHECK_ERROR(ferry::wrap_native_memory(t.device, {native.data, size}, MemoryKind::host_upload),
                ErrorCode::invalid_argument);
  });
}

TEST_CASE("interop: native stream hops order a copy after another without a timeline wait") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = t.backend == Backend::cpu ? (1u << 20) : (32u << 20);
    const ferry::Queue upload = t.device.queue(QueueKind::upload);
    const ferry::Queue download = t.device.queue(QueueKind::download);
    if (t.backend != Backend::cuda) {
      // No streams: a stream wait waits on the host; a stream point does not exist.
      Buffer buffer = REQUIRE_VALUE(t.device.create_buffer(64));
      CommandList commands;
      REQUIRE_OK(ferry::fill(commands, buffer, 0, 64, 7));
      const ferry::TimelinePoint filled =
          REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
      REQUIRE_OK(ferry::native_stream_wait(filled, kLegacyStream, ferry_test::kLongWait));
      CHECK(filled.reached());
      CHECK_ERROR(ferry::native_stream_point(download, kLegacyStream), ErrorCode::unavailable);
      CHECK_OK(ferry::native_stream_wait(ferry::TimelinePoint{}, kLegacyStream));
      return;
    }
    Buffer source = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_upload));
    Buffer middle = REQUIRE_VALUE(t.device.create_buffer(size));
    Buffer readback = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_readback));
    for (int round = 0; round < 4; ++round) {
      const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
      std::memcpy(REQUIRE_VALUE(source.host_span()).data(), data.data(), size);
      ferry_test::fill_poison(REQUIRE_VALUE(readback.host_span()), static_cast<std::uint8_t>(round));
      CommandList in;
      REQUIRE_OK(in.copy(source, 0, middle, 0, size));
      const ferry::TimelinePoint uploaded = REQUIRE_VALUE(upload.submit(std::move(in)));
      // upload -> legacy stream -> download queue: the only ordering of the second copy.
      REQUIRE_OK(ferry::native_stream_wait(uploaded, kLegacyStream));
      const ferry::TimelinePoint hop = REQUIRE_VALUE(ferry::native_stream_point(download, kLegacyStream));
      CommandList out;
      REQUIRE_OK(out.copy(middle, 0, readback, 0, size));
      const ferry::TimelinePoint downloaded = REQUIRE_VALUE(download.submit(std::move(out)));
      CHECK(downloaded.value > hop.value);
      REQUIRE_OK(downloaded.wait(ferry_test::kLongWait));
      CHECK(uploaded.reached());
      ferry_test::check_bytes_equal(REQUIRE_VALUE(readback.host_span()), data, "ordered by the stream");
    }
    // A host-signalled value is reached already: nothing to wait for.
    const ferry::Timeline timeline = REQUIRE_VALUE(t.device.create_timeline());
    REQUIRE_OK(timeline.signal(5));
    CHECK_OK(ferry::native_stream_wait({timeline, 5}, kLegacyStream));
  });
}
