#include "transfer_modes.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>

#include "bench_common.hpp"

namespace ferry::cli {

namespace {

// Long enough for a 1 GiB copy on a slow software device; a hang becomes an error instead.
constexpr Timeout kWaitTimeout = std::chrono::seconds(120);
constexpr std::uint64_t kSlabBytes = 64ull << 20;

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// One direction of the pool path: chunks of pinned lease memory, a bounded number in flight.
// H2D drops each lease right after submitting (the pool takes it back once the copy is done);
// D2H keeps it until the copy has landed and its bytes were consumed.
class PoolStream {
 public:
  PoolStream(const Queue& queue, const StagingPool& pool, TransferDirection direction,
             const Buffer& device_buffer, const TransferSettings& settings,
             const std::byte* upload_source, std::byte* download_target)
      : queue_(queue),
        pool_(pool),
        direction_(direction),
        device_buffer_(device_buffer),
        settings_(settings),
        upload_source_(upload_source),
        download_target_(download_target) {}

  bool all_submitted() const { return next_offset_ >= device_buffer_.size(); }

  // Submits the next chunk, first retiring the oldest one when the window is full.
  Status submit_next() {
    if (all_submitted()) return ok_status();
    if (in_flight_.size() >= settings_.in_flight) FERRY_RETURN_IF_ERROR(retire_oldest());
    const std::uint64_t offset = next_offset_;
    const std::uint64_t bytes = std::min(settings_.chunk_bytes, device_buffer_.size() - offset);
    FERRY_ASSIGN_OR_RETURN(Lease lease, pool_.acquire(bytes, kWaitTimeout));
    CommandList commands;
    if (direction_ == TransferDirection::h2d) {
      // Timed runs send whatever the lease holds: the data is "already pinned" by assumption.
      if (upload_source_ != nullptr) std::memcpy(lease.data().data(), upload_source_ + offset, bytes);
      FERRY_RETURN_IF_ERROR(commands.copy(lease, 0, device_buffer_, offset, bytes));
    } else {
      FERRY_RETURN_IF_ERROR(commands.copy(device_buffer_, offset, lease, 0, bytes));
    }
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue_.submit(std::move(commands)));
    if (direction_ == TransferDirection::h2d) lease.release();
    in_flight_.push_back({std::move(lease), std::move(done), offset, bytes});
    next_offset_ += bytes;
    return ok_status();
  }

  Status finish() {
    while (!in_flight_.empty()) FERRY_RETURN_IF_ERROR(retire_oldest());
    return ok_status();
  }

 private:
  struct Chunk {
    Lease lease;  // empty for H2D
    TimelinePoint done;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };

  Status retire_oldest() {
    Chunk& chunk = in_flight_.front();
    FERRY_RETURN_IF_ERROR(chunk.done.wait(kWaitTimeout));
    if (download_target_ != nullptr && chunk.lease) {
      std::memcpy(download_target_ + chunk.offset, chunk.lease.data().data(), chunk.bytes);
    }
    in_flight_.pop_front();
    return ok_status();
  }

  const Queue& queue_;
  const StagingPool& pool_;
  TransferDirection direction_;
  const Buffer& device_buffer_;
  const TransferSettings& settings_;
  const std::byte* upload_source_;
  std::byte* download_target_;
  std::uint64_t next_offset_ = 0;
  std::deque<Chunk> in_flight_;
};

}  // namespace

std::string_view to_string(TransferMode mode) {
  switch (mode) {
    case TransferMode::direct: return "direct";
    case TransferMode::pool: return "pool";
    case TransferMode::pageable: return "pageable";
    case TransferMode::pageable_naive: return "pageable-naive";
  }
  return "?";
}

std::string_view to_string(TransferDirection direction) {
  switch (direction) {
    case TransferDirection::h2d: return "h2d";
    case TransferDirection::d2h: return "d2h";
    case TransferDirection::both: return "both";
  }
  return "?";
}

Result<std::unique_ptr<TransferBench>> TransferBench::create(const Device& device,
                                                             const TransferSettings& settings) {
  std::unique_ptr<TransferBench> bench(new TransferBench());
  bench->device_ = device;
  bench->settings_ = settings;
  bench->compute_ = device.queue(QueueKind::compute);
  bench->upload_ = device.queue(QueueKind::upload);
  bench->download_ = device.queue(QueueKind::download);

  // Room for the whole window plus one chunk (a lease comes back only once the pool sees its
  // copy complete), all reserved up front so that no pinned allocation is ever timed.
  StagingPoolOptions options;
  options.slab_bytes = std::max(kSlabBytes, round_up(settings.chunk_bytes, kStagingAlignment));
  const std::uint64_t chunks_per_slab =
      options.slab_bytes / round_up(settings.chunk_bytes, kStagingAlignment);
  const std::uint64_t chunks = settings.in_flight + 1;
  options.max_slabs = static_cast<std::uint32_t>((chunks + chunks_per_slab - 1) / chunks_per_slab);
  options.reserved_slabs = options.max_slabs;

  options.kind = MemoryKind::host_upload;
  FERRY_ASSIGN_OR_RETURN(bench->upload_pool_, device.create_staging_pool(options));
  options.kind = MemoryKind::host_readback;
  FERRY_ASSIGN_OR_RETURN(bench->readback_pool_, device.create_staging_pool(options));
  return bench;
}

void TransferBench::release_size() {
  device_a_.release();
  device_b_.release();
  host_upload_.release();
  host_readback_.release();
  pattern_ = {};
  pageable_dst_ = {};
  size_ = 0;
}

Status TransferBench::prepare(std::uint64_t size, std::uint64_t seed) {
  release_size();
  FERRY_RETURN_IF_ERROR(device_.wait_idle(kWaitTimeout));  // let the old buffers go first
  FERRY_ASSIGN_OR_RETURN(device_a_, device_.create_buffer(size, MemoryKind::device));
  FERRY_ASSIGN_OR_RETURN(device_b_, device_.create_buffer(size, MemoryKind::device));
  FERRY_ASSIGN_OR_RETURN(host_upload_, device_.create_buffer(size, MemoryKind::host_upload));
  FERRY_ASSIGN_OR_RETURN(host_readback_, device_.create_buffer(size, MemoryKind::host_readback));
  pattern_.resize(size);
  pageable_dst_.resize(size);
  size_ = size;
  fill_random(pattern_, seed);

  // The pinned source holds the pattern; both device buffers start with it too.
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> upload_bytes, host_upload_.host_span());
  std::memcpy(upload_bytes.data(), pattern_.data(), size);
  FERRY_RETURN_IF_ERROR(copy_and_wait(upload_, host_upload_, device_a_));
  return copy_and_wait(upload_, host_upload_, device_b_);
}

Status TransferBench::copy_and_wait(const Queue& queue, const BufferRef& src,
                                    const BufferRef& dst) const {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(commands.copy(src, 0, dst, 0, size_));
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(commands)));
  return done.wait(kWaitTimeout);
}

Status TransferBench::clear_device(const Buffer& buffer) const {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(ferry::fill(commands, buffer, 0, size_, 0));
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute_.submit(std::move(commands)));
  return done.wait(kWaitTimeout);
}

Status TransferBench::compare(std::span<const std::byte> actual, std::string_view what) const {
  if (std::memcmp(actual.data(), pattern_.data(), size_) == 0) return ok_status();
  std::uint64_t first = 0;
  while (actual[first] == pattern_[first]) ++first;
  std::uint64_t wrong = 0;
  for (std::uint64_t i = first; i < size_; ++i) wrong += actual[i] != pattern_[i] ? 1 : 0;
  char detail[160];
  std::snprintf(detail, sizeof detail,
                ": %llu of %llu bytes wrong, first at offset %llu (expected 0x%02x, got 0x%02x)",
                static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(size_),
                static_cast<unsigned long long>(first), std::to_integer<unsigned>(pattern_[first]),
                std::to_integer<unsigned>(actual[first]));
  return Status(ErrorCode::internal, "data mismatch in " + std::string(what) + detail);
}

Status TransferBench::run(TransferMode mode, TransferDirection direction) {
  return run_impl(mode, direction, false);
}

Status TransferBench::verify(TransferMode mode, TransferDirection direction) {
  const std::string what = std::string(to_string(mode)) + " " + std::string(to_string(direction)) +
                           " of " + std::to_string(size_) + " bytes";
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> readback_bytes, host_readback_.host_span());
  const bool uploads = direction != TransferDirection::d2h;
  const bool downloads = direction != TransferDirection::h2d;
  // Targets start cleared so stale data from an earlier run cannot pass for a good copy.
  if (uploads) FERRY_RETURN_IF_ERROR(clear_device(device_a_));
  if (downloads) {
    if (direction == TransferDirection::d2h) {
      FERRY_RETURN_IF_ERROR(copy_and_wait(upload_, host_upload_, device_a_));
    }
    std::memset(readback_bytes.data(), 0, size_);
    std::memset(pageable_dst_.data(), 0, size_);
  }

  FERRY_RETURN_IF_ERROR(run_impl(mode, direction, true).with_context(what));

  if (downloads) {
    const bool lands_in_host_buffer = mode == TransferMode::direct;
    FERRY_RETURN_IF_ERROR(compare(lands_in_host_buffer ? readback_bytes : pageable_dst_,
                                  what + " (host side)"));
  }
  if (uploads) {
    std::memset(readback_bytes.data(), 0, size_);
    FERRY_RETURN_IF_ERROR(copy_and_wait(download_, device_a_, host_readback_));
    FERRY_RETURN_IF_ERROR(compare(readback_bytes, what + " (device side, read back directly)"));
  }
  return ok_status();
}

Status TransferBench::run_impl(TransferMode mode, TransferDirection direction, bool verifying) {
  if (size_ == 0) return Status(ErrorCode::failed_precondition, "no size prepared");
  if (direction == TransferDirection::both && mode != TransferMode::pool) {
    return Status(ErrorCode::invalid_argument, "both directions at once exist for the pool mode only");
  }
  TransferOptions transfer_options;
  transfer_options.chunk_bytes = settings_.chunk_bytes;
  transfer_options.acquire_timeout = kWaitTimeout;
  const bool h2d = direction == TransferDirection::h2d;

  switch (mode) {
    case TransferMode::direct:
      return h2d ? copy_and_wait(upload_, host_upload_, device_a_)
                 : copy_and_wait(download_, device_a_, host_readback_);

    case TransferMode::pool:
      return run_pool(direction, verifying);

    case TransferMode::pageable:
      if (h2d) {
        FERRY_ASSIGN_OR_RETURN(TimelinePoint done,
                               upload(upload_, upload_pool_, pattern_, device_a_, 0, {}, transfer_options));
        return done.wait(kWaitTimeout);
      }
      return download(download_, readback_pool_, device_a_, 0, pageable_dst_, {}, transfer_options);

    case TransferMode::pageable_naive: {
      if (h2d) {
        FERRY_ASSIGN_OR_RETURN(std::span<std::byte> staging, host_upload_.host_span());
        std::memcpy(staging.data(), pattern_.data(), size_);
        return copy_and_wait(upload_, host_upload_, device_a_);
      }
      FERRY_RETURN_IF_ERROR(copy_and_wait(download_, device_a_, host_readback_));
      FERRY_ASSIGN_OR_RETURN(std::span<std::byte> staging, host_readback_.host_span());
      std::memcpy(pageable_dst_.data(), staging.data(), size_);
      return ok_status();
    }
  }
  return Status(ErrorCode::invalid_argument, "unknown transfer mode");
}

Status TransferBench::run_pool(TransferDirection direction, bool verifying) {
  // In `both`, D2H reads device_b_ so that it never races the upload into device_a_.
  const Buffer& download_source = direction == TransferDirection::both ? device_b_ : device_a_;
  PoolStream up(upload_, upload_pool_, TransferDirection::h2d, device_a_, settings_,
                verifying ? pattern_.data() : nullptr, nullptr);
  PoolStream down(download_, readback_pool_, TransferDirection::d2h, download_source, settings_,
                  nullptr, verifying ? pageable_dst_.data() : nullptr);
  const bool uploads = direction != TransferDirection::d2h;
  const bool downloads = direction != TransferDirection::h2d;
  // Interleaved so that in `both` each queue always has chunks waiting.
  while ((uploads && !up.all_submitted()) || (downloads && !down.all_submitted())) {
    if (uploads) FERRY_RETURN_IF_ERROR(up.submit_next());
    if (downloads) FERRY_RETURN_IF_ERROR(down.submit_next());
  }
  if (uploads) FERRY_RETURN_IF_ERROR(up.finish());
  if (downloads) FERRY_RETURN_IF_ERROR(down.finish());
  return ok_status();
}

}  // namespace ferry::cli
