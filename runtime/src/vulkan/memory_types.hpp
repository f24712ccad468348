// Choice of a Vulkan memory type for each MemoryKind: a pure function of the device's memory
// types, unit-tested without a GPU (tests/unit/test_memory_types.cpp).
//
// device:        DEVICE_LOCAL, preferably not host visible (keeps a resizable-BAR window free).
// host_upload:   HOST_VISIBLE | HOST_COHERENT, preferably not device local (system memory the
//                copy engine reads; write-combined is fine for data the host only writes).
// host_readback: HOST_VISIBLE | HOST_COHERENT, preferably HOST_CACHED (the host reads it back),
//                then preferably not device local.
// Ties go to the larger heap, then to the lower type index.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ferry/types.hpp"

namespace ferry::vulkan {

struct MemoryTypeInfo {
  std::uint64_t heap_size = 0;
  bool device_local = false;
  bool host_visible = false;
  bool host_coherent = false;
  bool host_cached = false;
};

// allowed_type_bits: VkMemoryRequirements::memoryTypeBits (bit i allows types[i]).
std::optional<std::uint32_t> choose_memory_type(std::span<const MemoryTypeInfo> types,
                                                std::uint32_t allowed_type_bits, MemoryKind kind);

}  // namespace ferry::vulkan
