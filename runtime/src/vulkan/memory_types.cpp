#include "vulkan/memory_types.hpp"

#include <tuple>

namespace ferry::vulkan {
namespace {

bool meets_requirements(const MemoryTypeInfo& type, MemoryKind kind) {
  switch (kind) {
    case MemoryKind::device:
      return type.device_local;
    case MemoryKind::host_upload:
    case MemoryKind::host_readback:
      return type.host_visible && type.host_coherent;
  }
  return false;
}

// Higher is better; compared lexicographically.
std::tuple<int, int, std::uint64_t> preference(const MemoryTypeInfo& type, MemoryKind kind) {
  switch (kind) {
    case MemoryKind::device:
      return {!type.host_visible, 0, type.heap_size};
    case MemoryKind::host_upload:
      return {!type.device_local, 0, type.heap_size};
    case MemoryKind::host_readback:
      return {type.host_cached, !type.device_local, type.heap_size};
  }
  return {0, 0, 0};
}

}  // namespace

std::optional<std::uint32_t> choose_memory_type(std::span<const MemoryTypeInfo> types,
                                                std::uint32_t allowed_type_bits,
                                                MemoryKind kind) {
  std::optional<std::uint32_t> best;
  for (std::uint32_t i = 0; i < types.size() && i < 32; ++i) {
    if ((allowed_type_bits & (1u << i)) == 0 || !meets_requirements(types[i], kind)) continue;
    if (!best || preference(types[i], kind) > preference(types[*best], kind)) best = i;
  }
  return best;
}

}  // namespace ferry::vulkan
