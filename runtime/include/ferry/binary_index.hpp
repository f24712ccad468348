// BinaryIndex: binary-quantized vector search, the class a retrieval (RAG) application calls.
//
// Vectors are added as float rows; each is quantized on the device to one bit per dimension
// (binary_quantize) and its code kept in device memory (rows past the device budget in host
// memory, streamed through the device at search time). A search quantizes the queries the same
// way, finds the k * oversample nearest codes by Hamming distance (hamming_topk) and, when asked,
// re-ranks them by the exact metric against vectors the index kept (rescore), returning the best
// k. Results are identical on every backend: the ops are bit-exact and everything the index does
// on the host (normalizing, merging per-chunk lists) is deterministic integer or IEEE code.
//
// Codes can also be added and searched as they are (add_codes, search_codes), for binary
// embeddings that arrive packed: no quantization, a sixteenth of the upload of float16 rows.
//
// Ids are row numbers: the rows of the first add() get 0, 1, ..., the next add() (or
// add_codes()) continues.
//
// What the index computes on the host, exactly (so that anyone can reproduce its results):
//   float16 / bfloat16 rows are converted to float32 exactly wherever float32 is needed.
//   cosine: every added and searched row x (as float32) becomes y_j = float(x_j / n), with
//     n = sqrt(sum over j in order of double(x_j)^2) in double precision; a row whose n is 0 or
//     not finite is kept as it is. Scores are then inner products of these normalized vectors.
//   IndexThreshold::first_add_mean: t_j = float(sum_r double(x_rj) / rows), the sum taken in
//     row order over every row of the first add() (after normalization for cosine).
//   KeptVectors::int8: one global scale s for database and queries (so inner products and L2
//     distances of the int8 vectors rank like the float ones up to rounding):
//     q_j = clamp(round(double(x_j) * s), -127, 127), round half away from zero, NaN -> 0.
//     s = BinaryIndexOptions::int8_scale when given, else float(127 / m) with m the largest |x_j|
//     over the finite values of the first add() (s = 1 when m is 0). Values beyond 127 / s in
//     later rows or queries are clamped. Reported scores are the int32 score / s^2 (in double,
//     rounded to float).
//
// Memory: codes and kept vectors live in device buffers (memory.device_segment_bytes at most
// each), allocated as rows arrive while they fit their device budget (growing by chunks; while
// the rows fit one device buffer, that buffer is replaced by a larger one, the rows copied on the
// device, so that the index stays one segment); rows beyond it keep their codes in host memory (streamed in chunks through the staging pool at
// search time, the upload of chunk i + 1 overlapping the search of chunk i) and their kept
// vectors in pinned host memory that the device reads in place. Placement never changes results.
//
// Thread safety: calls on one index may come from several threads; they run one at a time.
// Every call returns only after the device work it submitted has completed (or failed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/element_type.hpp"
#include "ferry/status.hpp"

namespace ferry {

enum class IndexMetric : std::uint8_t {
  inner_product = 0,  // larger is better
  l2 = 1,             // squared Euclidean distance, smaller is better
  cosine = 2,         // inner product of vectors normalized on the host (see above)
};

enum class IndexThreshold : std::uint8_t {
  zero = 0,            // bit j = x_j > 0 (the sign)
  given = 1,           // bit j = x_j > BinaryIndexOptions::thresholds[j]
  first_add_mean = 2,  // bit j = x_j > the per-dimension mean of the first add() (see above)
};

// What the index keeps of each added vector, for rescoring.
enum class KeptVectors : std::uint8_t { none = 0, float32 = 1, int8 = 2 };

std::string_view to_string(IndexMetric metric) noexcept;
std::string_view to_string(IndexThreshold threshold) noexcept;
std::string_view to_string(KeptVectors kept) noexcept;

// The longest code hamming_topk searches.
inline constexpr std::uint32_t kBinaryIndexMaxDims = 4096;
// The padding of results with fewer than k entries (k above the rows searched).
inline constexpr std::uint64_t kBinaryIndexNoId = std::numeric_limits<std::uint64_t>::max();

// Where the index keeps its data; not part of the saved file (load() takes its own).
struct BinaryIndexMemory {
  // Device memory for codes, and for kept vectors. Rows past a budget live in host memory.
  std::uint64_t code_budget_bytes = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t vector_budget_bytes = std::numeric_limits<std::uint64_t>::max();
  // The largest device buffer holding codes or kept vectors. 0 (the default): the largest range
  // an op binds on the device (DeviceInfo::max_op_binding_bytes), below 4 GiB. An index whose
  // codes are one device buffer, and its kept vectors another, searches with rescoring in one
  // chain on the device (see search()); more segments take a merge on the host. A lone device
  // segment regrows as one while the rows fit this.
  std::uint64_t device_segment_bytes = 0;
  // The largest host block holding codes or vectors; also bounds the chunks streamed at search
  // time and the index's work buffers.
  std::uint64_t segment_bytes = 64ull << 20;
  // The index's two staging pools (upload and readback): slab size and count. A slab bounds the
  // rows of one add or search step.
  std::uint64_t staging_slab_bytes = 16ull << 20;
  std::uint32_t staging_slabs = 4;
};

struct BinaryIndexOptions {
  std::uint32_t dims = 0;  // 1 to kBinaryIndexMaxDims
  IndexMetric metric = IndexMetric::inner_product;
  ElementType input_type = ElementType::float32;  // of the rows add() and search() take
  IndexThreshold threshold = IndexThreshold::zero;
  std::vector<float> thresholds;  // with IndexThreshold::given: dims finite values
  KeptVectors keep = KeptVectors::none;
  float int8_scale = 0.0f;  // with KeptVectors::int8: 0 = from the first add(), else > 0, finite
  BinaryIndexMemory memory;
};

struct SearchParams {
  std::uint32_t k = 10;  // 1 to kHammingMaxK (1024)
  // With rescore, the Hamming search keeps k * oversample candidates per query (at most
  // kHammingMaxK) for the exact scores to re-rank; ignored without rescore.
  std::uint32_t oversample = 1;
  bool rescore = false;  // needs kept vectors
};

// For query i, entries [i * k, i * k + k): ids best first, with their scores: the Hamming
// distance without rescoring (ascending; equal distances by ascending id), the metric's score
// with it (inner product and cosine descending, squared L2 ascending; equal scores by ascending
// id; NaN scores last). Fewer than k results (k above the rows) are padded with
// kBinaryIndexNoId and a NaN score.
struct SearchResults {
  std::uint32_t queries = 0;
  std::uint32_t k = 0;
  std::vector<std::uint64_t> ids;
  std::vector<float> scores;
};

struct BinaryIndexStats {
  std::uint64_t rows = 0;
  std::uint64_t device_code_rows = 0;    // the first rows; the rest are streamed from the host
  std::uint64_t device_vector_rows = 0;  // kept vectors on the device; the rest in host memory
  std::uint64_t device_bytes = 0;        // allocated for codes and kept vectors
  std::uint64_t host_bytes = 0;
  std::uint32_t code_segments = 0;       // device buffers and host blocks of codes
  std::uint32_t vector_segments = 0;
};

class BinaryIndex {
 public:
  // Validates the options (errors name the field and value) and makes an empty index.
  static Result<BinaryIndex> create(const Device& device, const BinaryIndexOptions& options);
  // Reads an index saved by save() (docs/SEARCH.md has the format) onto `device`, placing it by
  // `memory`. A file that is not such an index, of another format version, truncated or
  // corrupted (a checksum mismatch) is refused with ErrorCode::data_corrupt naming the file and
  // the problem; a missing path is not_found; a directory, FIFO or device invalid_argument (at
  // once: nothing blocks).
  static Result<BinaryIndex> load(const Device& device, const std::filesystem::path& path,
                                  const BinaryIndexMemory& memory = {});

  BinaryIndex();
  BinaryIndex(BinaryIndex&&) noexcept;
  BinaryIndex& operator=(BinaryIndex&&) noexcept;
  ~BinaryIndex();

  // Adds `rows` rows of options().dims elements of options().input_type, tightly packed
  // (vectors.size() must be exactly that many bytes). Returns the id of the first row. On any
  // error the index is as it was before the call.
  Result<std::uint64_t> add(std::span<const std::byte> vectors, std::uint64_t rows);
  Result<std::uint64_t> add(std::span<const float> vectors, std::uint64_t rows);  // float32

  // Adds `rows` packed binary codes as they are, not quantized: binary_code_bytes(dims) bytes per
  // row (codes.size() must be exactly rows times that), laid out as binary_quantize writes them
  // (bit j of a row is bit j % 8 of its byte j / 8; the bits past dims, padding, must be 0).
  // They are placed like add()'s codes. Only for an index that keeps no vectors
  // (KeptVectors::none: codes have none to keep); the threshold options do not apply to them,
  // but an index with IndexThreshold::first_add_mean takes codes only after its first add()
  // (which fixes the thresholds its float searches use). Returns the id of the first row; on any
  // error the index is as it was before the call.
  Result<std::uint64_t> add_codes(std::span<const std::byte> codes, std::uint64_t rows);

  // Searches `queries` rows laid out as add() takes them. An index whose codes are one device
  // segment (and, to rescore, its kept vectors another) keeps a batch on the device from the
  // upload of the queries to the download of the results; more segments merge on the host
  // (docs/SEARCH.md). The results are the same.
  Result<SearchResults> search(std::span<const std::byte> queries, std::uint32_t queries_count,
                               const SearchParams& params) const;
  Result<SearchResults> search(std::span<const float> queries, std::uint32_t queries_count,
                               const SearchParams& params) const;

  // Searches `queries` packed query codes laid out as add_codes() takes them, exactly as search()
  // searches the codes it quantizes. No rescoring (params.rescore must be false: rescoring needs
  // the query vectors).
  Result<SearchResults> search_codes(std::span<const std::byte> query_codes,
                                     std::uint32_t queries, const SearchParams& params) const;

  // Writes the index to `path` atomically: a temporary file next to it, flushed, then renamed.
  Status save(const std::filesystem::path& path) const;

  std::uint64_t size() const;  // rows added
  // The options (with memory as placed); empty options on a moved-from index.
  const BinaryIndexOptions& options() const;
  // The thresholds in use (dims values; zeros for IndexThreshold::zero; empty before the first
  // add() for first_add_mean), and the int8 scale in use (0 before it is known).
  std::vector<float> thresholds() const;
  float int8_scale() const;
  BinaryIndexStats stats() const;

  explicit operator bool() const noexcept { return state_ != nullptr; }

  struct State;

 private:
  friend class ShardedIndex;  // runs its shards' search steps itself
  explicit BinaryIndex(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ferry
