// Small vocabulary types shared by every concept.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace ferry {

enum class Backend : std::uint8_t { cpu, vulkan, cuda };
std::string_view to_string(Backend backend) noexcept;

// The three queues every device exposes. Upload and download map to dedicated copy engines
// where the hardware has them, so both directions and compute can run at once.
enum class QueueKind : std::uint8_t { compute = 0, upload = 1, download = 2 };
inline constexpr int kQueueKindCount = 3;
std::string_view to_string(QueueKind kind) noexcept;

// Where a buffer lives.
enum class MemoryKind : std::uint8_t {
  device,         // device-local; not host visible
  host_upload,    // host memory the device reads by DMA (pinned; write-combined allowed)
  host_readback,  // host memory the device writes by DMA (pinned; host cached when possible)
};
std::string_view to_string(MemoryKind kind) noexcept;

using Timeout = std::chrono::nanoseconds;
inline constexpr Timeout kInfinite = Timeout::max();

}  // namespace ferry
