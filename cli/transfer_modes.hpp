// The transfer paths `ferry bench transfer` compares, each run once per call, for one device
// and one size at a time. Timing is the caller's business; this file moves and checks bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry::cli {

enum class TransferMode : std::uint8_t {
  direct,          // one CommandList::copy from/to a whole host buffer, one submission, wait
  pool,            // pinned data in staging-pool leases, chunked, several chunks in flight
  pageable,        // std::vector through ferry::upload / ferry::download
  pageable_naive,  // memcpy into a host buffer, then one copy (and the reverse for D2H)
};
enum class TransferDirection : std::uint8_t { h2d, d2h, both };

std::string_view to_string(TransferMode mode);
std::string_view to_string(TransferDirection direction);

struct TransferSettings {
  std::uint64_t chunk_bytes = 16ull << 20;  // pool and pageable paths
  unsigned in_flight = 4;                   // pool chunks in flight per direction
};

// Queues and staging pools of one device, plus the buffers of the size being measured.
class TransferBench {
 public:
  static Result<std::unique_ptr<TransferBench>> create(const Device& device,
                                                       const TransferSettings& settings);

  // Allocates the buffers for `size` bytes and fills the source pattern with random bytes
  // (`seed` picks them). Frees the buffers of the previous size first.
  Status prepare(std::uint64_t size, std::uint64_t seed);
  // Frees the buffers of the current size.
  void release_size();

  // One transfer of the current size. `both` is only valid for the pool mode: H2D and D2H at
  // once on the upload and download queues.
  Status run(TransferMode mode, TransferDirection direction);
  // One transfer whose result is compared with the random source; an ErrorCode::internal
  // status names the first wrong byte.
  Status verify(TransferMode mode, TransferDirection direction);

  StagingPoolStats upload_pool_stats() const { return upload_pool_.stats(); }
  StagingPoolStats readback_pool_stats() const { return readback_pool_.stats(); }

 private:
  TransferBench() = default;
  Status run_impl(TransferMode mode, TransferDirection direction, bool verifying);
  Status run_pool(TransferDirection direction, bool verifying);
  // Plain single-copy helpers also used to set up and read back verification data.
  Status copy_and_wait(const Queue& queue, const BufferRef& src, const BufferRef& dst) const;
  Status clear_device(const Buffer& buffer) const;
  Status compare(std::span<const std::byte> actual, std::string_view what) const;

  Device device_;
  Queue compute_, upload_, download_;
  StagingPool upload_pool_, readback_pool_;
  TransferSettings settings_;

  std::uint64_t size_ = 0;
  Buffer device_a_;        // H2D target; D2H source
  Buffer device_b_;        // D2H source while `both` uploads into device_a_
  Buffer host_upload_;     // pinned source of the direct and naive paths; holds the pattern
  Buffer host_readback_;   // pinned target of the direct and naive paths
  std::vector<std::byte> pattern_;       // random bytes: the pageable source
  std::vector<std::byte> pageable_dst_;  // pageable target
};

}  // namespace ferry::cli
