// Buffer: a range of device memory (or pinned host memory the device can reach), owned RAII.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry {

namespace detail {
struct BufferState;
}

// Move-only. Destroying or release()-ing a Buffer gives up the user's hold on it; the memory is
// freed once no submission in flight still uses it. Any later use of a released or moved-from
// Buffer returns ErrorCode::released.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() = default;

  std::uint64_t size() const noexcept;
  MemoryKind memory_kind() const noexcept;
  // Host view of host_upload / host_readback buffers. Error for device memory or a released
  // buffer. The host may read it only after the GPU work writing it has completed.
  Result<std::span<std::byte>> host_span() const;

  void release() noexcept { state_.reset(); }
  bool valid() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  const std::shared_ptr<detail::BufferState>& state() const { return state_; }
  explicit Buffer(std::shared_ptr<detail::BufferState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<detail::BufferState> state_;
};

}  // namespace ferry
