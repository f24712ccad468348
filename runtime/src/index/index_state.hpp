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
#include <string>
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

// A search's queries on the device: their codes, and the vectors rescore reads (float32 or
// int8 values; none for code queries), uploaded by `uploaded`.
struct DeviceQueries {
  BufferRef codes{Buffer()};
  BufferRef rescore{Buffer()};
  TimelinePoint uploaded;
};

}  // namespace ferry::index

namespace ferry {

// What a search's query rows are: vectors to quantize, or codes as they are.
enum class QueryInput : std::uint8_t { vectors, codes };

namespace index {

// What the first add fixes (first_add_mean thresholds, the int8 scale), computed from its rows on
// the host exactly as ferry/binary_index.hpp defines it; `need_*` say which to compute.
struct FirstAddValues {
  std::vector<float> thresholds;
  float int8_scale = 0.0f;
};
FirstAddValues first_add_values(const BinaryIndexOptions& options,
                                std::span<const std::byte> rows, std::uint64_t count,
                                bool need_mean, bool need_scale);

// Where an index's state stood before a change, to put it back (ShardedIndex: a shard's add
// undone when another shard's failed).
struct StateMark {
  std::uint64_t rows = 0;
  std::size_t code_segments = 0, vector_segments = 0;
  std::vector<float> thresholds;
  float int8_scale = 0.0f;
};

}  // namespace index

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
    // Host memory a search reuses: large blocks freed go back to the OS, and taking them again
    // page by page cost a 1000-query search milliseconds (measured on an H200 host).
    struct Host {
      std::vector<float> query_values;
      std::vector<std::int8_t> query_int8;
      std::vector<std::uint32_t> lists, candidates, hit_segment;
    } host;
  } work;

  // Makes a state (pools, queues, stores) for validated options; thresholds given are uploaded.
  static Result<std::unique_ptr<State>> make(const Device& device,
                                             const BinaryIndexOptions& options);

  Result<std::uint64_t> add(std::span<const std::byte> vectors, std::uint64_t rows);
  Result<std::uint64_t> add_codes(std::span<const std::byte> codes, std::uint64_t rows);
  Result<SearchResults> search(std::span<const std::byte> queries, std::uint32_t count,
                               const SearchParams& params, QueryInput input);

  // Bytes of one row as the caller gives it, as the device quantizes it.
  std::uint64_t input_row_bytes() const;
  std::uint64_t device_row_bytes() const;
  // Rows per staging step: a slab's worth of the largest per-row upload.
  std::uint64_t step_rows() const;
  // Copies the thresholds in use to the device (thresholds_buffer).
  Status upload_thresholds(std::span<const float> values);

  // The steps of one block of a search, for search() and for ShardedIndex, which runs the first
  // on every shard, merges, then runs the second on each shard's share of the candidates.
  // Queries per block for `count` queries: what keeps every per-query work buffer within
  // segment_bytes (at least one query).
  std::uint64_t queries_per_block(std::uint32_t count, std::uint32_t candidates,
                                  std::uint32_t k) const;
  // 1-3: the queries uploaded (quantized), every part searched, and per query the best
  // `candidates` hits (ids are this index's rows). `rescore_queries` gets the device buffer
  // holding the queries as rescore reads them (vectors input only; valid until the next search).
  Status hamming_block(std::span<const std::byte> queries, QueryInput input, std::uint32_t count,
                       const SearchParams& params, std::uint32_t candidates,
                       std::vector<std::vector<index::HammingHit>>& hits,
                       BufferRef& rescore_queries, index::SubmittedWork& submitted);
  // The queries of a block uploaded (vectors: quantized by `commands`, which the caller submits
  // after `uploaded`).
  Result<index::DeviceQueries> upload_queries(std::span<const std::byte> queries, QueryInput input,
                                              std::uint32_t count, const SearchParams& params,
                                              CommandList& commands,
                                              index::SubmittedWork& submitted);
  // Whether a search (with rescoring or not) runs as one chain on the device: every code in one
  // device segment and, to rescore, every kept vector in another.
  bool searches_on_device(bool rescore) const;
  // A block of such a search: the queries uploaded (and quantized), hamming_topk over every row
  // (its lists are the candidates), rescore, in one submission, and one download of the final
  // lists into `ids` and `scores` ([count x k], padding left as it is).
  Status device_block(std::span<const std::byte> queries, QueryInput input, std::uint32_t count,
                      const SearchParams& params, std::uint32_t candidates,
                      std::span<std::uint64_t> ids, std::span<float> scores,
                      index::SubmittedWork& submitted);
  // 4: the candidates `hits` (ids are this index's rows) rescored; per query the best k of them,
  // best first, with rescore's raw scores.
  Status rescore_hits(std::uint32_t count, const SearchParams& params,
                      const std::vector<std::vector<index::HammingHit>>& hits,
                      const BufferRef& rescore_queries,
                      std::vector<std::vector<index::ScoredHit>>& best,
                      index::SubmittedWork& submitted);
  // The order rescore_hits' lists are in, and a raw score as search() reports it.
  RescoreElement rescore_element() const;
  RescoreMetric rescore_metric() const;
  float reported_score(const index::ScoredHit& hit) const;

  index::StateMark mark() const;
  void restore(const index::StateMark& mark);
  // Makes room for rows [0, end) of the codes (and the kept vectors with `keep`): a store that
  // is one device segment regrows as one (SegmentStore::reserve), its copy submitted here.
  Status reserve_rows(std::uint64_t end, bool keep, index::SubmittedWork& submitted);
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
};

}  // namespace ferry

namespace ferry::index {

// An index file written from, or read into, one or more states (index_io.cpp): BinaryIndex saves
// and loads its own, ShardedIndex its shards' as the file of one index holding every row, so
// that either loads what the other saved.

// Rows [first, first + count) of one state.
struct RowRun {
  const BinaryIndex::State* state = nullptr;
  std::uint64_t first = 0;
  std::uint64_t count = 0;
};

// Writes, atomically, the file of one index whose rows are those of `runs` in order: the options,
// thresholds and int8 scale are `lead`'s (the same on every shard of a ShardedIndex); the payload
// is the thresholds, the codes of every run, then the kept vectors of every run.
Status save_file(const std::filesystem::path& path, const BinaryIndex::State& lead,
                 std::span<const RowRun> runs);

// What the start of an index file says: its header, the options it gives (placed by the memory
// load() was given, validated) and its stored thresholds (empty when none are stored).
struct FileStart {
  FileHeader header;
  BinaryIndexOptions options;
  std::vector<float> thresholds;
};
// Opens `reader`'s file and reads the header and thresholds, refusing a file that is not an
// index, of another version, truncated or inconsistent. Errors start with `call`.
Result<FileStart> read_file_start(FileReader& reader, const std::string& call,
                                  const BinaryIndexMemory& memory);

// Reads the rest of the file (codes, then kept vectors) into `states`, empty states made by
// State::make from start.options: states[i] gets the next rows[i] rows of the file (the rows add
// up to the header's). Only once every row is in place and the payload's CRC matches does each
// state take its rows, the thresholds and the int8 scale; after an error the states are half
// filled and must be discarded (their device work has completed).
Status load_file_rows(FileReader& reader, const FileStart& start,
                      std::span<BinaryIndex::State* const> states,
                      std::span<const std::uint64_t> rows);

}  // namespace ferry::index
