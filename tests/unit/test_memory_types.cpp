// Memory-type choice of the Vulkan backend (pure function, no GPU).
#include <doctest/doctest.h>

#include <vector>

#include "vulkan/memory_types.hpp"

namespace {

using ferry::MemoryKind;
using ferry::vulkan::choose_memory_type;
using ferry::vulkan::MemoryTypeInfo;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

MemoryTypeInfo type(std::uint64_t heap_size, bool device_local, bool host_visible,
                    bool host_coherent, bool host_cached) {
  return MemoryTypeInfo{heap_size, device_local, host_visible, host_coherent, host_cached};
}

// An NVIDIA discrete GPU with resizable BAR: device-local, host (uncached and cached) and a
// device-local host-visible window.
const std::vector<MemoryTypeInfo> kNvidia = {
    type(80 * kGiB, true, false, false, false),  // 0: VRAM
    type(94 * kGiB, false, true, true, false),   // 1: host, write-combined
    type(94 * kGiB, false, true, true, true),    // 2: host, cached
    type(80 * kGiB, true, true, true, false),    // 3: VRAM through the BAR
};

// lavapipe: one type that is everything.
const std::vector<MemoryTypeInfo> kLavapipe = {type(2 * kGiB, true, true, true, true)};

}  // namespace

TEST_CASE("memory types: NVIDIA with resizable BAR") {
  CHECK(choose_memory_type(kNvidia, ~0u, MemoryKind::device) == 0u);
  CHECK(choose_memory_type(kNvidia, ~0u, MemoryKind::host_upload) == 1u);
  CHECK(choose_memory_type(kNvidia, ~0u, MemoryKind::host_readback) == 2u);
}

TEST_CASE("memory types: lavapipe's single type serves every kind") {
  for (MemoryKind kind : {MemoryKind::device, MemoryKind::host_upload, MemoryKind::host_readback}) {
    CHECK(choose_memory_type(kLavapipe, ~0u, kind) == 0u);
  }
}

TEST_CASE("memory types: the buffer's allowed bits restrict the choice") {
  CHECK(choose_memory_type(kNvidia, 0b1000u, MemoryKind::device) == 3u);
  CHECK(choose_memory_type(kNvidia, 0b0010u, MemoryKind::host_readback) == 1u);  // no CACHED
  CHECK(choose_memory_type(kNvidia, 0b1000u, MemoryKind::host_upload) == 3u);
  CHECK_FALSE(choose_memory_type(kNvidia, 0b0001u, MemoryKind::host_upload).has_value());
  CHECK_FALSE(choose_memory_type(kNvidia, 0u, MemoryKind::device).has_value());
}

TEST_CASE("memory types: host-visible memory needs HOST_COHERENT") {
  const std::vector<MemoryTypeInfo> types = {
      type(8 * kGiB, false, true, false, true),  // visible but not coherent
      type(8 * kGiB, true, true, true, false),
  };
  CHECK(choose_memory_type(types, ~0u, MemoryKind::host_readback) == 1u);
  CHECK(choose_memory_type(types, ~0u, MemoryKind::host_upload) == 1u);
}

TEST_CASE("memory types: readback prefers cached over not device local; ties take the larger heap") {
  const std::vector<MemoryTypeInfo> types = {
      type(16 * kGiB, false, true, true, false),
      type(4 * kGiB, true, true, true, true),    // integrated GPU: cached and device local
      type(32 * kGiB, false, true, true, false),
  };
  CHECK(choose_memory_type(types, ~0u, MemoryKind::host_readback) == 1u);
  CHECK(choose_memory_type(types, ~0u, MemoryKind::host_upload) == 2u);
  CHECK_FALSE(choose_memory_type({}, ~0u, MemoryKind::device).has_value());
}
