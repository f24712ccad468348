// BinaryIndex's state and the steps its public calls dispatch to (binary_index.cpp validates;
// index_add.cpp, index_search.cpp and index_io.cpp do the work).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "ferry/binary_index.hpp"
#include "ferry/buffer.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/timeline.hpp"
#include "index/index_file.hpp"
#include "index/merge.hpp"
#include "index/segments.hpp"

namespace ferry::index {

// A device buffer reused across calls, replaced by a larger one when too small. Every call waits
// for its own device work before returning, so nothing still uses the old one.
class WorkBuffer {
 public:
  Result<BufferRef> at_least(const Device& device, std::uint64_t bytes, const char* what);

 private:
  Buffer buffer_;
};

// The last submission of one call on each queue. Queues run in order, so waiting for these waits
// for everything the call submitted: a call that fails half way does so before it returns.
class SubmittedWork {
 public:
  void note(QueueKind queue, const TimelinePoint& point) {
    last_[static_cast<std::size_t>(queue)] = point;
  }
  // Waits for each; failures are ignored (the call reports its own error).
  void settle() const;
  // Waits for each and returns the first failure.
  Status wait() const;

 private:
  std::array<TimelinePoint, kQueueKindCount> last_;
};

}  // namespace ferry::index

namespace ferry {

// What a search's query rows are: vectors to quantize, or codes as they are.
enum class QueryInput : std::uint8_t { vectors, codes };

struct BinaryIndex::State {
  Device device;
  BinaryIndexOptions options;     // as placed (memory) and validated
  std::uint32_t code_bytes = 0;   // per row: binary_code_bytes(dims)
  std::uint32_t vector_bytes = 0; // per kept row
  Queue compute, upload, download;
  StagingPool upload_pool, readback_pool;

  mutable std::mutex mutex;  // one call at a time
  std::uint64_t rows = 0;
  std::vector<float> thresholds;  // the thresholds in use; empty until known (first_add_mean)
  float int8_scale = 0.0f;        // with KeptVectors::int8: 0 until known
  Buffer thresholds_buffer;       // dims float32 on the device, unless the threshold is zero
  index::SegmentStore codes;
  index::SegmentStore vectors;    // kept vectors (none: empty)

  struct Work {
    std::array<index::WorkBuffer, 2> input, codes, stream;  // double-buffered steps
    index::WorkBuffer query_floats, query_int8, query_codes, results, candidates, rescored;
  } work;

  // Makes a state (pools, queues, stores) for validated options; thresholds given are uploaded.
  static Result<std::unique_ptr<State>> make(const Device& device,
                                             const BinaryIndexOptions& options);

  Result<std::uint64_t> add(std::span<const std::byte> vectors, std::uint64_t rows);
  Result<std::uint64_t> add_codes(std::span<const std::byte> codes, std::uint64_t rows);
  Result<SearchResults> search(std::span<const std::byte> queries, std::uint32_t count,
                               const SearchParams& params, QueryInput input);
  Status save(const std::filesystem::path& path);
  Status load_payload(index::FileReader& reader, const index::FileHeader& header);

  // Bytes of one row as the caller gives it, as the device quantizes it.
  std::uint64_t input_row_bytes() const;
  std::uint64_t device_row_bytes() const;
  // Rows per staging step: a slab's worth of the largest per-row upload.
  std::uint64_t step_rows() const;
  // Copies the thresholds in use to the device (thresholds_buffer).
  Status upload_thresholds(std::span<const float> values);
  // Puts rows [first, first + count) of `store`, whose places are reserved, in place as they are,
  // in steps of at most a staging slab: device segments through the upload pool, host segments
  // by a host copy. `next(bytes)` gives the next step's rows (in row order, `bytes` long), or an
  // error. Returns once every step is submitted; `submitted` has the uploads to wait for.
  using RowSource = std::function<Result<std::span<const std::byte>>(std::uint64_t bytes)>;
  Status store_rows(const index::SegmentStore& store, std::uint64_t first, std::uint64_t count,
                    const RowSource& next, index::SubmittedWork& submitted);

 private:
  Status add_rows(std::span<const std::byte> vectors, std::uint64_t first, std::uint64_t count,
                  float scale, index::SubmittedWork& submitted);
  Status search_block(std::span<const std::byte> queries, QueryInput input, std::uint32_t count,
                      const SearchParams& params, std::uint32_t candidates, SearchResults& out,
                      std::uint32_t out_first, index::SubmittedWork& submitted);
  Status rescore_block(std::uint32_t count, const SearchParams& params,
                       const std::vector<std::vector<index::HammingHit>>& hits,
                       const BufferRef& queries, SearchResults& out,
                       std::uint32_t out_first, index::SubmittedWork& submitted);
};

}  // namespace ferry
