// StagingPool: first-fit sub-allocation from a few pinned slabs, with backpressure.
#include <algorithm>
#include <atomic>
#include <string>

#include "core/faults.hpp"
#include "core/numa.hpp"
#include "core/state.hpp"
#include "ferry/device.hpp"
#include "ferry/staging_pool.hpp"

namespace ferry {
namespace detail {

namespace {

// First fit within one slab; returns the offset or nothing. `spare` receives the map node of a
// free range used up whole, or a new node otherwise, for the lease to give its range back with.
std::optional<std::uint64_t> carve(Slab& slab, std::uint64_t size, FreeRanges::node_type& spare) {
  for (auto it = slab.free_ranges.begin(); it != slab.free_ranges.end(); ++it) {
    if (it->second < size) continue;
    const std::uint64_t offset = it->first;
    const std::uint64_t left = it->second - size;
    if (left == 0) {
      spare = slab.free_ranges.extract(it);
    } else {
      // Allocate the lease's node before changing anything, so a failure changes nothing.
      FreeRanges scratch;
      scratch.emplace(0, 0);
      spare = scratch.extract(scratch.begin());
      auto node = slab.free_ranges.extract(it);
      node.key() = offset + size;
      node.mapped() = left;
      slab.free_ranges.insert(std::move(node));
    }
    slab.used += size;
    return offset;
  }
  return std::nullopt;
}

}  // namespace

LeaseState::~LeaseState() {
  if (pool) pool->give_back(slab, offset, reserved, std::move(spare));
}

void PoolState::trace_bytes_in_use() noexcept {
  if (trace_counter != nullptr) {
    device->trace->counter(trace_counter, static_cast<std::int64_t>(stats.bytes_in_use));
  }
}

void PoolState::give_back(Slab* slab, std::uint64_t offset, std::uint64_t size,
                          FreeRanges::node_type&& node) noexcept {
  {
    std::lock_guard lock(mutex);
    FreeRanges::iterator it;
    if (node.empty()) {
      // Cannot happen (every lease gets its node with its range); kept so that a bug here loses
      // no memory, at the price of an allocation.
      it = slab->free_ranges.emplace(offset, size).first;
    } else {
      node.key() = offset;
      node.mapped() = size;
      it = slab->free_ranges.insert(std::move(node)).position;
    }
    // Coalesce with the following and the preceding free range.
    if (auto next = std::next(it); next != slab->free_ranges.end() && it->first + it->second == next->first) {
      it->second += next->second;
      slab->free_ranges.erase(next);
    }
    if (it != slab->free_ranges.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        slab->free_ranges.erase(it);
      }
    }
    slab->used -= size;
    stats.bytes_in_use -= size;
    trace_bytes_in_use();
  }
  released.notify_all();
}

// With pool->mutex held: a new slab, if the capacity bound allows.
static Result<Slab*> add_slab(PoolState& pool) {
  if (pool.slabs.size() >= pool.options.max_slabs) {
    return Status(ErrorCode::resource_exhausted, "staging pool is at its slab limit");
  }
  auto buffer = allocate_unless_injected("allocating a staging-pool slab", [&] {
    // Pinned pages come from the node of the thread that allocates them: the device's node.
    ScopedCpuPlacement placed(pool.device->host_cpus);
    return pool.device->impl->create_buffer(pool.options.slab_bytes, pool.options.kind);
  });
  if (!buffer.ok()) {
    Status status = buffer.status();
    status.with_context("StagingPool: allocating a slab of " +
                        describe_bytes(pool.options.slab_bytes));
    return status;
  }
  auto slab = std::make_unique<Slab>();
  slab->buffer = std::make_shared<BufferState>();
  slab->buffer->device = pool.device;
  slab->buffer->impl = std::move(buffer).value();
  slab->buffer->size = pool.options.slab_bytes;
  slab->buffer->kind = pool.options.kind;
  slab->free_ranges.emplace(0, pool.options.slab_bytes);
  pool.slabs.push_back(std::move(slab));
  pool.stats.slabs = static_cast<std::uint32_t>(pool.slabs.size());
  pool.stats.bytes_reserved += pool.options.slab_bytes;
  return pool.slabs.back().get();
}

}  // namespace detail

namespace {

// One attempt, with the pool lock held: existing slabs first, then a new slab.
Result<Lease> allocate_locked(const std::shared_ptr<detail::PoolState>& pool, std::uint64_t size,
                              std::uint64_t reserved) {
  detail::Slab* slab = nullptr;
  detail::FreeRanges::node_type spare;
  std::optional<std::uint64_t> offset;
  for (auto& candidate : pool->slabs) {
    if ((offset = detail::carve(*candidate, reserved, spare))) {
      slab = candidate.get();
      break;
    }
  }
  if (!offset) {
    auto added = detail::add_slab(*pool);
    if (!added.ok()) return added.status();
    slab = *added;
    offset = detail::carve(*slab, reserved, spare);
  }
  auto lease = std::make_shared<detail::LeaseState>();
  lease->pool = pool;
  lease->slab = slab;
  lease->buffer = slab->buffer;
  lease->offset = *offset;
  lease->size = size;
  lease->reserved = reserved;
  lease->spare = std::move(spare);
  pool->stats.bytes_in_use += reserved;
  pool->stats.high_water_bytes = std::max(pool->stats.high_water_bytes, pool->stats.bytes_in_use);
  pool->trace_bytes_in_use();
  return Lease(std::move(lease));
}

Status validate_request(const detail::PoolState& pool, std::uint64_t size, const char* call) {
  if (size == 0) return Status(ErrorCode::invalid_argument, std::string(call) + ": size must be > 0");
  if (size > pool.options.slab_bytes) {
    return Status(ErrorCode::resource_exhausted,
                  std::string(call) + ": a lease of " + detail::describe_bytes(size) +
                      " can never fit: the pool's slabs hold " +
                      detail::describe_bytes(pool.options.slab_bytes) + " each");
  }
  std::lock_guard lock(pool.device->mutex);
  if (pool.device->closing) return pool.device->closed_error(call);
  return Status();
}

Status full_error(const detail::PoolState& pool, std::uint64_t size, const char* call) {
  return Status(ErrorCode::timeout,
                std::string(call) + ": staging pool full: " + detail::describe_bytes(size) +
                    " requested, " + detail::describe_bytes(pool.stats.bytes_in_use) +
                    " in use of a capacity of " + detail::describe_bytes(pool.stats.capacity_bytes));
}

}  // namespace

namespace detail {

Result<std::shared_ptr<PoolState>> create_pool(const std::shared_ptr<DeviceState>& device,
                                               const StagingPoolOptions& options,
                                               const char* call) {
  if (options.slab_bytes == 0 || options.max_slabs == 0 ||
      options.reserved_slabs > options.max_slabs) {
    return Status(ErrorCode::invalid_argument,
                  std::string(call) + ": need slab_bytes > 0, max_slabs > 0 and "
                  "reserved_slabs <= max_slabs (got " + std::to_string(options.slab_bytes) + ", " +
                      std::to_string(options.max_slabs) + ", " +
                      std::to_string(options.reserved_slabs) + ")");
  }
  const auto slab_bytes = checked_round_up(options.slab_bytes, kStagingAlignment);
  const auto capacity = slab_bytes ? checked_mul(*slab_bytes, options.max_slabs) : std::nullopt;
  if (!capacity) {
    return Status(ErrorCode::out_of_range,
                  std::string(call) + ": slab_bytes " + std::to_string(options.slab_bytes) +
                      " (rounded to " + std::to_string(kStagingAlignment) + " bytes) x max_slabs " +
                      std::to_string(options.max_slabs) + " does not fit 64 bits");
  }
  {
    std::lock_guard lock(device->core->mutex);
    if (device->core->closing) return device->core->closed_error(call);
  }
  auto pool = std::make_shared<PoolState>();
  pool->device = device->core;
  pool->runtime = device;
  pool->options = options;
  if (DeviceTrace* trace = device->core->trace.get()) {
    // Numbered per process: a counter track of its own for each pool.
    static std::atomic<std::uint64_t> pools{0};
    pool->trace_counter =
        trace->intern(options.kind == MemoryKind::device
                          ? "device scratch " + std::to_string(++pools) + ": bytes in use"
                          : "staging pool " + std::to_string(++pools) + " (" +
                                std::string(to_string(options.kind)) + "): bytes in use");
  }
  pool->options.slab_bytes = *slab_bytes;
  pool->stats.capacity_bytes = *capacity;
  {
    std::lock_guard lock(pool->mutex);
    for (std::uint32_t i = 0; i < options.reserved_slabs; ++i) {
      auto added = add_slab(*pool);
      if (!added.ok()) return added.status();
    }
  }
  return pool;
}

Result<Lease> acquire_scratch(DeviceState& device, std::uint64_t bytes, const char* call) {
  std::shared_ptr<PoolState> pool;
  {
    std::lock_guard lock(device.scratch_mutex);
    if (!device.scratch) {
      StagingPoolOptions options;
      options.kind = MemoryKind::device;
      options.slab_bytes = device.scratch_options.slab_bytes;
      options.max_slabs = device.scratch_options.max_slabs;
      options.reserved_slabs = 0;
      FERRY_ASSIGN_OR_RETURN(device.scratch,
                             create_pool(device.shared_from_this(), options, call));
    }
    pool = device.scratch;
  }
  if (bytes > pool->options.slab_bytes) {
    return Status(ErrorCode::resource_exhausted,
                  std::string(call) + ": the op needs " + describe_bytes(bytes) +
                      " of scratch memory; the device's scratch slabs hold " +
                      describe_bytes(pool->options.slab_bytes) +
                      " (DeviceOptions::scratch_slab_bytes)");
  }
  const StagingPool scratch(pool);
  for (;;) {
    Result<Lease> lease = scratch.try_acquire(bytes);
    if (lease.ok() || lease.status().code() != ErrorCode::timeout) return lease;
    // Full. Only work in flight gives scratch back by itself: wait for the oldest such
    // submission. Scratch held by recorded commands not yet submitted would never come back
    // while this thread waits, so that is an error rather than a wait.
    const std::optional<TimelinePoint> oldest = device.oldest_using(pool.get());
    if (!oldest) {
      return Status(ErrorCode::resource_exhausted,
                    std::string(call) + ": all " + describe_bytes(pool->stats.capacity_bytes) +
                        " of the device's scratch memory is held by recorded commands not yet "
                        "submitted; submit them first (or raise DeviceOptions::scratch_max_slabs)");
    }
    FERRY_RETURN_IF_ERROR(oldest->timeline.state()->impl->host_wait(oldest->value, kInfinite));
    device.retire();
  }
}

}  // namespace detail

Result<StagingPool> Device::create_staging_pool(const StagingPoolOptions& options) const {
  static constexpr const char* kCall = "Device::create_staging_pool";
  if (!state_) return Status(ErrorCode::released, "Device::create_staging_pool: no device");
  if (options.kind == MemoryKind::device) {
    return Status(ErrorCode::invalid_argument,
                  "Device::create_staging_pool: kind must be host_upload or host_readback");
  }
  FERRY_ASSIGN_OR_RETURN(auto pool, detail::create_pool(state_, options, kCall));
  return StagingPool(std::move(pool));
}

Result<Lease> StagingPool::try_acquire(std::uint64_t size) const {
  if (!state_) return Status(ErrorCode::released, "StagingPool::try_acquire: no pool");
  detail::TraceScope traced(state_->device->trace.get(), "StagingPool::try_acquire");
  traced.arg("bytes", static_cast<std::int64_t>(size));
  FERRY_RETURN_IF_ERROR(validate_request(*state_, size, "StagingPool::try_acquire"));
  // Cannot overflow: size <= slab_bytes, itself a multiple of the alignment.
  const std::uint64_t reserved = *detail::checked_round_up(size, kStagingAlignment);
  if (auto runtime = state_->runtime.lock()) runtime->retire();
  std::lock_guard lock(state_->mutex);
  ++state_->stats.acquires;
  auto lease = allocate_locked(state_, size, reserved);
  if (lease.ok() || lease.status().code() != ErrorCode::resource_exhausted) return lease;
  return full_error(*state_, size, "StagingPool::try_acquire");
}

Result<Lease> StagingPool::acquire(std::uint64_t size, Timeout timeout) const {
  if (!state_) return Status(ErrorCode::released, "StagingPool::acquire: no pool");
  detail::TraceScope traced(state_->device->trace.get(), "StagingPool::acquire");
  traced.arg("bytes", static_cast<std::int64_t>(size));
  FERRY_RETURN_IF_ERROR(validate_request(*state_, size, "StagingPool::acquire"));
  const std::uint64_t reserved = *detail::checked_round_up(size, kStagingAlignment);
  const detail::Deadline deadline(timeout);
  bool counted_wait = false;
  {
    std::lock_guard lock(state_->mutex);
    ++state_->stats.acquires;
  }
  for (;;) {
    {
      std::lock_guard lock(state_->mutex);
      auto lease = allocate_locked(state_, size, reserved);
      if (lease.ok() || lease.status().code() != ErrorCode::resource_exhausted) return lease;
      if (!counted_wait) {
        ++state_->stats.waits;
        counted_wait = true;
      }
      if (deadline.passed()) return full_error(*state_, size, "StagingPool::acquire");
    }
    // Full: make room by retiring completed submissions, else wait for the oldest one that
    // holds one of our leases, else for a user to drop a lease.
    std::optional<TimelinePoint> oldest;
    if (auto runtime = state_->runtime.lock()) {
      runtime->retire();
      oldest = runtime->oldest_using(state_.get());
    }
    {
      std::lock_guard lock(state_->device->mutex);
      if (state_->device->closing) return state_->device->closed_error("StagingPool::acquire");
    }
    constexpr Timeout kSlice = std::chrono::milliseconds(2);
    detail::TraceScope waiting(state_->device->trace.get(), "staging pool full: waiting");
    if (oldest) {
      // Handed to the backend (a failed submission too: its progress value was still signalled
      // behind it), so it completes: wait for it whole in the backend, which blocks in the
      // driver instead of polling. This is ferry's own wait, so fault injection leaves it alone.
      Status waited = oldest->timeline.state()->impl->host_wait(oldest->value, deadline.remaining());
      if (!waited.ok() && waited.code() != ErrorCode::timeout) {
        return waited.with_context("StagingPool::acquire: waiting for a submission using a lease");
      }
    } else {
      // Leases held by the host (or by held-back submissions) come back without a device
      // signal; a short slice also notices held-back work that was released meanwhile.
      std::unique_lock lock(state_->mutex);
      state_->released.wait_for(lock, std::min(deadline.remaining(), kSlice));
    }
  }
}

std::uint64_t StagingPool::trim() const {
  if (!state_) return 0;
  if (auto runtime = state_->runtime.lock()) runtime->retire();
  std::vector<std::unique_ptr<detail::Slab>> freed;  // destroyed outside the lock
  {
    std::lock_guard lock(state_->mutex);
    auto& slabs = state_->slabs;
    for (std::size_t i = slabs.size(); i-- > 0 && slabs.size() > state_->options.reserved_slabs;) {
      if (slabs[i]->used == 0) {
        freed.push_back(std::move(slabs[i]));
        slabs.erase(slabs.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    state_->stats.slabs = static_cast<std::uint32_t>(slabs.size());
    state_->stats.bytes_reserved -= freed.size() * state_->options.slab_bytes;
  }
  return freed.size() * state_->options.slab_bytes;
}

StagingPoolStats StagingPool::stats() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

const StagingPoolOptions& StagingPool::options() const {
  static const StagingPoolOptions none{};
  return state_ ? state_->options : none;
}

// ---- Lease ----

std::uint64_t Lease::size() const noexcept { return state_ ? state_->size : 0; }

std::span<std::byte> Lease::data() const noexcept {
  if (!state_) return {};
  return {state_->buffer->impl->host_data() + state_->offset, state_->size};
}

}  // namespace ferry
