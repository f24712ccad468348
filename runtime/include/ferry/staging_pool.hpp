// StagingPool: bounded pinned host memory, sub-allocated from a few large slabs.
//
// Leases are carved out of slabs (first fit, rounded to kStagingAlignment, never to a power of
// two). A lease's range goes back to the pool when the user has dropped the Lease *and* every
// submission that used it has completed, so a range can never be reused while a copy still
// reads or writes it. acquire() blocks while the pool is full (backpressure) up to a timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry {

namespace detail {
struct PoolState;
struct LeaseState;
}  // namespace detail

inline constexpr std::uint64_t kStagingAlignment = 256;

struct StagingPoolOptions {
  MemoryKind kind = MemoryKind::host_upload;  // host_upload or host_readback
  std::uint64_t slab_bytes = 64ull << 20;     // largest possible lease
  std::uint32_t max_slabs = 4;                // capacity bound: slab_bytes * max_slabs
  std::uint32_t reserved_slabs = 1;           // allocated up front and kept by trim()
};

struct StagingPoolStats {
  std::uint64_t bytes_reserved = 0;  // held in slabs
  std::uint64_t bytes_in_use = 0;    // held by leases (including those still used by the GPU)
  std::uint64_t high_water_bytes = 0;
  std::uint64_t capacity_bytes = 0;  // slab_bytes * max_slabs
  std::uint64_t acquires = 0;
  std::uint64_t waits = 0;  // acquires that had to wait for space
  std::uint32_t slabs = 0;
};

// A range of a pool's slab. Move-only; use it in commands as the source or target of copies.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&&) noexcept = default;
  Lease& operator=(Lease&&) noexcept = default;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() = default;

  std::uint64_t size() const noexcept;
  // The host bytes. Write before submitting an upload; read after a download has completed.
  std::span<std::byte> data() const noexcept;

  // Gives up the user's hold; the range returns to the pool when the GPU is done with it.
  void release() noexcept { state_.reset(); }
  bool valid() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  const std::shared_ptr<detail::LeaseState>& state() const { return state_; }
  explicit Lease(std::shared_ptr<detail::LeaseState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<detail::LeaseState> state_;
};

class StagingPool {
 public:
  StagingPool() = default;

  // A lease of `size` bytes. Waits while the pool is full, up to `timeout` (ErrorCode::timeout).
  // ErrorCode::resource_exhausted at once when size exceeds slab_bytes: it could never fit.
  Result<Lease> acquire(std::uint64_t size, Timeout timeout = kInfinite) const;
  // Like acquire, but returns ErrorCode::timeout at once instead of waiting.
  Result<Lease> try_acquire(std::uint64_t size) const;

  // Frees empty slabs beyond reserved_slabs. Returns the bytes given back.
  std::uint64_t trim() const;
  StagingPoolStats stats() const;
  const StagingPoolOptions& options() const;

  explicit operator bool() const { return state_ != nullptr; }
  const std::shared_ptr<detail::PoolState>& state() const { return state_; }
  explicit StagingPool(std::shared_ptr<detail::PoolState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<detail::PoolState> state_;
};

}  // namespace ferry
