// copy_between_devices: random bytes of awkward sizes and offsets between every pair of devices
// the run can open (the backend's device 0 and its other devices or a second handle on device 0,
// and the CPU reference), device and host memory on either side, the direct and host-staged
// paths, small chunks through given pools; each target checked byte for byte, with its bytes
// around the range untouched. Bad arguments are refused before anything is copied.
#include <string>
#include <vector>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::Device;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::PeerCopyOptions;
using ferry::PeerCopyPath;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

std::string name_of(const Device& device) {
  return std::string(ferry::to_string(device.backend())) + ":" + std::to_string(device.info().index);
}

// The devices of the run: t.device, the backend's device 1 where it has one (else device 0
// opened again), and the CPU reference (on the cpu backend, a third cpu device).
std::vector<Device> peer_devices(BackendUnderTest& t) {
  std::size_t listed = 1;
  for (const ferry::BackendInfo& info : ferry::list_backends()) {
    if (info.backend == t.backend) listed = info.devices.size();
  }
  std::vector<Device> devices = {t.device};
  if (listed > 1) {
    Device other = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 1, t.options));
    t.extra_devices.push_back(other);
    devices.push_back(other);
  } else {
    devices.push_back(REQUIRE_VALUE(t.open_another()));
  }
  devices.push_back(REQUIRE_VALUE(t.open_cpu_reference()));
  return devices;
}

// The path copy_between_devices must take between these two device handles.
PeerCopyPath expected_path(const Device& a, const Device& b, bool allow_direct) {
  if (a.state() == b.state()) return PeerCopyPath::same_device;
  if (allow_direct && a.backend() == ferry::Backend::cuda && b.backend() == ferry::Backend::cuda) {
    return PeerCopyPath::direct;
  }
  return PeerCopyPath::host_staged;
}

}  // namespace

TEST_CASE("peer copies: every pair of devices, device and host memory, both paths") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::vector<Device> devices = peer_devices(t);
    // A few chunks of either path (a tenth under the sanitizers, which check threads and memory).
    const std::uint64_t size =
        (ferry_test::light_run() ? (300ull << 10) : (3ull << 20)) + 4 * (t.rng() % 1000) + 12;
    const std::uint64_t src_offset = 4 * (t.rng() % 777), dst_offset = 4 * (t.rng() % 555) + 8;
    for (const Device& from : devices) {
      for (const Device& to : devices) {
        for (const MemoryKind src_kind : {MemoryKind::device, MemoryKind::host_upload}) {
          for (const bool allow_direct : {true, false}) {
            const MemoryKind dst_kind = allow_direct ? MemoryKind::device : MemoryKind::host_readback;
            INFO(name_of(from) << " -> " << name_of(to) << ", source " << ferry::to_string(src_kind)
                               << ", target " << ferry::to_string(dst_kind) << ", direct allowed "
                               << allow_direct);
            const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
            const Buffer src = REQUIRE_VALUE(from.create_buffer(src_offset + size + 40, src_kind));
            REQUIRE_OK(ferry_test::write_bytes(from, src, src_offset, data));
            const std::vector<std::byte> before =
                ferry_test::random_bytes(t.rng, dst_offset + size + 64);
            const Buffer dst = REQUIRE_VALUE(to.create_buffer(before.size(), dst_kind));
            REQUIRE_OK(ferry_test::write_bytes(to, dst, 0, before));
            PeerCopyOptions options;
            options.allow_direct = allow_direct;
            options.chunk_bytes = allow_direct ? (1u << 20) : (64u << 10) + 512;  // several chunks
            if (!allow_direct) {  // pools given, of one chunk each: every chunk waits for the last
              ferry::StagingPoolOptions pool;
              pool.slab_bytes = 64u << 10;
              pool.max_slabs = 1;
              pool.kind = MemoryKind::host_readback;
              options.source_pool = REQUIRE_VALUE(from.create_staging_pool(pool));
              pool.kind = MemoryKind::host_upload;
              options.target_pool = REQUIRE_VALUE(to.create_staging_pool(pool));
            }
            const PeerCopyPath path = REQUIRE_VALUE(ferry::copy_between_devices(
                from.queue(QueueKind::download), src, src_offset, to.queue(QueueKind::upload), dst,
                dst_offset, size, options));
            CHECK(path == expected_path(from, to, allow_direct));
            std::vector<std::byte> expected = before;
            std::copy(data.begin(), data.end(), expected.begin() + static_cast<std::ptrdiff_t>(dst_offset));
            const std::vector<std::byte> got =
                REQUIRE_VALUE(ferry_test::read_bytes(to, dst, 0, before.size()));
            CHECK_MESSAGE(got == expected, "first difference at byte "
                                               << (std::mismatch(got.begin(), got.end(), expected.begin()).first - got.begin()));
          }
        }
      }
    }
  });
}

TEST_CASE("peer copies: bad arguments are refused and copy nothing") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const Device other = REQUIRE_VALUE(t.open_cpu_reference());
    const Buffer a = REQUIRE_VALUE(t.device.create_buffer(4096));
    const Buffer b = REQUIRE_VALUE(other.create_buffer(4096));
    const ferry::Queue source = t.device.queue(QueueKind::download);
    const ferry::Queue target = other.queue(QueueKind::upload);
    auto expect = [](const ferry::Status& status, ErrorCode code, const char* text) {
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK_MESSAGE(status.message().find(text) != std::string::npos, status.to_string());
    };
    expect(ferry::copy_between_devices(source, a, 0, target, b, 0, 0).status(),
           ErrorCode::invalid_argument, "size must be > 0");
    expect(ferry::copy_between_devices(source, a, 4000, target, b, 0, 100).status(),
           ErrorCode::out_of_range, "source");
    expect(ferry::copy_between_devices(source, a, 0, target, b, 4000, 100).status(),
           ErrorCode::out_of_range, "target");
    expect(ferry::copy_between_devices(source, b, 0, target, a, 0, 100).status(),
           ErrorCode::invalid_argument, "another device than the source queue");
    expect(ferry::copy_between_devices(source, a, 0, source, a, 50, 100).status(),
           ErrorCode::invalid_argument, "overlap");
    expect(ferry::copy_between_devices(ferry::Queue(), a, 0, target, b, 0, 100).status(),
           ErrorCode::released, "no source queue");
    expect(ferry::copy_between_devices(source, Buffer(), 0, target, b, 0, 100).status(),
           ErrorCode::released, "");
    PeerCopyOptions options;
    ferry::StagingPoolOptions pool;
    pool.slab_bytes = 1 << 16;
    pool.kind = MemoryKind::host_upload;  // a source pool must be host_readback
    options.source_pool = REQUIRE_VALUE(t.device.create_staging_pool(pool));
    expect(ferry::copy_between_devices(source, a, 0, target, b, 0, 100, options).status(),
           ErrorCode::invalid_argument, "source_pool must be a host_readback pool");
    pool.kind = MemoryKind::host_readback;
    options.source_pool = REQUIRE_VALUE(other.create_staging_pool(pool));  // the wrong device
    expect(ferry::copy_between_devices(source, a, 0, target, b, 0, 100, options).status(),
           ErrorCode::invalid_argument, "source_pool belongs to another device");
  });
}
