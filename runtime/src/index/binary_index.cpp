// BinaryIndex's public calls: validation (errors name the call, the field and its value), then
// the state's steps under its lock. Host allocations that fail (std::bad_alloc from a vector)
// become out_of_memory here: nothing throws out of the library.
#include "ferry/binary_index.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>

#include "core/checked.hpp"
#include "core/describe.hpp"
#include "ferry/ops/binary_quantize.hpp"
#include "ferry/ops/hamming_topk.hpp"
#include "ferry/transfer.hpp"
#include "index/host_vectors.hpp"
#include "index/index_checks.hpp"
#include "index/index_state.hpp"

namespace ferry {

using index::check_codes;
using index::check_rows;
using index::check_search;
using index::out_of_host_memory;
using index::validate_options;

std::string_view to_string(IndexMetric metric) noexcept {
  switch (metric) {
    case IndexMetric::inner_product: return "inner_product";
    case IndexMetric::l2: return "l2";
    case IndexMetric::cosine: return "cosine";
  }
  return "unknown metric";
}

std::string_view to_string(IndexThreshold threshold) noexcept {
  switch (threshold) {
    case IndexThreshold::zero: return "zero";
    case IndexThreshold::given: return "given";
    case IndexThreshold::first_add_mean: return "first_add_mean";
  }
  return "unknown threshold";
}

std::string_view to_string(KeptVectors kept) noexcept {
  switch (kept) {
    case KeptVectors::none: return "none";
    case KeptVectors::float32: return "float32";
    case KeptVectors::int8: return "int8";
  }
  return "unknown kept vectors";
}

namespace {

Status invalid(const char* call, const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(call) + ": " + what);
}

Status no_index(const char* call) {
  return Status(ErrorCode::released,
                std::string(call) + ": no index (default-constructed or moved from)");
}

Status validate_memory(const char* call, const BinaryIndexMemory& memory, std::uint32_t dims) {
  if (memory.segment_bytes == 0) return invalid(call, "memory.segment_bytes must be > 0");
  // One row of any upload (float32 values are the largest) must fit a slab.
  const std::uint64_t row = std::max<std::uint64_t>(std::uint64_t{dims} * 4, binary_code_bytes(dims));
  if (memory.staging_slab_bytes < std::max(row, kStagingAlignment)) {
    return invalid(call, "memory.staging_slab_bytes " + std::to_string(memory.staging_slab_bytes) +
                             " is below one row (" + std::to_string(row) + " bytes) or " +
                             std::to_string(kStagingAlignment));
  }
  if (memory.staging_slabs < 2) {
    return invalid(call, "memory.staging_slabs " + std::to_string(memory.staging_slabs) +
                             " must be at least 2 (one step fills a slab while another uploads)");
  }
  return Status();
}

}  // namespace

Status index::validate_options(const char* call, const BinaryIndexOptions& o) {
  if (o.dims == 0 || o.dims > kBinaryIndexMaxDims) {
    return invalid(call, "dims " + std::to_string(o.dims) + " outside 1.." +
                             std::to_string(kBinaryIndexMaxDims) + " (hamming_topk's longest code)");
  }
  if (o.metric != IndexMetric::inner_product && o.metric != IndexMetric::l2 &&
      o.metric != IndexMetric::cosine) {
    return invalid(call, "unknown metric " + std::to_string(static_cast<int>(o.metric)));
  }
  if (o.input_type != ElementType::float32 && o.input_type != ElementType::float16 &&
      o.input_type != ElementType::bfloat16) {
    return invalid(call, "unknown input_type " + std::to_string(static_cast<int>(o.input_type)));
  }
  if (o.keep != KeptVectors::none && o.keep != KeptVectors::float32 && o.keep != KeptVectors::int8) {
    return invalid(call, "unknown keep " + std::to_string(static_cast<int>(o.keep)));
  }
  switch (o.threshold) {
    case IndexThreshold::given:
      if (o.thresholds.size() != o.dims) {
        return invalid(call, "threshold given with " + std::to_string(o.thresholds.size()) +
                                 " thresholds for dims " + std::to_string(o.dims));
      }
      for (std::size_t j = 0; j < o.thresholds.size(); ++j) {
        if (!std::isfinite(o.thresholds[j])) {
          return invalid(call, "thresholds[" + std::to_string(j) + "] is " +
                                   detail::describe_number(o.thresholds[j]) + ", not finite");
        }
      }
      break;
    case IndexThreshold::zero:
    case IndexThreshold::first_add_mean:
      if (!o.thresholds.empty()) {
        return invalid(call, std::to_string(o.thresholds.size()) +
                                 " thresholds given, but threshold is " +
                                 std::string(to_string(o.threshold)) + " (only 'given' takes them)");
      }
      break;
    default:
      return invalid(call, "unknown threshold " + std::to_string(static_cast<int>(o.threshold)));
  }
  if (o.keep == KeptVectors::int8) {
    if (!std::isfinite(o.int8_scale) || o.int8_scale < 0.0f) {
      return invalid(call, "int8_scale " + detail::describe_number(o.int8_scale) +
                               " must be 0 (from the first add) or finite and > 0");
    }
  } else if (o.int8_scale != 0.0f) {
    return invalid(call, "int8_scale " + detail::describe_number(o.int8_scale) +
                             " is set, but keep is " + std::string(to_string(o.keep)));
  }
  return validate_memory(call, o.memory, o.dims);
}

Status index::out_of_host_memory(const char* call) {
  return Status(ErrorCode::out_of_memory, std::string(call) + ": out of host memory");
}

// The bytes `rows` rows of the index's input take, or an error naming the mismatch.
Status index::check_rows(const char* call, const char* what, const BinaryIndexOptions& o,
                         std::size_t bytes, std::uint64_t rows) {
  const std::optional<std::uint64_t> expected =
      detail::checked_mul(rows, std::uint64_t{o.dims} * element_size(o.input_type));
  if (!expected || *expected != bytes) {
    return invalid(call, std::string(what) + " hold " + std::to_string(bytes) + " bytes, but " +
                             std::to_string(rows) + " rows of dims " + std::to_string(o.dims) +
                             " " + std::string(to_string(o.input_type)) + " take " +
                             (expected ? std::to_string(*expected) : std::string("more than 2^64")));
  }
  return Status();
}

// `rows` packed codes of the index: their size, and zeros in the padding bits past dims (which
// hamming_topk counts like any other bit), or an error naming the argument and the row.
Status index::check_codes(const char* call, const char* what, const BinaryIndexOptions& o,
                          std::span<const std::byte> codes, std::uint64_t rows) {
  const std::uint64_t row_bytes = binary_code_bytes(o.dims);
  const std::optional<std::uint64_t> expected = detail::checked_mul(rows, row_bytes);
  if (!expected || *expected != codes.size()) {
    return invalid(call, std::string(what) + " hold " + std::to_string(codes.size()) +
                             " bytes, but " + std::to_string(rows) + " codes of dims " +
                             std::to_string(o.dims) + " (" + std::to_string(row_bytes) +
                             " bytes each) take " +
                             (expected ? std::to_string(*expected) : std::string("more than 2^64")));
  }
  if (o.dims % 64 == 0) return Status();
  // The padding: the bits of the last used byte past dims, then whole bytes to the row's end.
  const std::uint64_t used = (std::uint64_t{o.dims} + 7) / 8;
  const unsigned last_mask = o.dims % 8 == 0 ? 0u : (0xFFu << (o.dims % 8)) & 0xFFu;
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::byte* row = codes.data() + r * row_bytes;
    bool clean = (std::to_integer<unsigned>(row[used - 1]) & last_mask) == 0;
    for (std::uint64_t b = used; clean && b < row_bytes; ++b) clean = row[b] == std::byte{0};
    if (!clean) {
      return invalid(call, std::string(what) + ": code " + std::to_string(r) +
                               " has bits set past dims " + std::to_string(o.dims) + " (bits " +
                               std::to_string(o.dims) + ".." + std::to_string(row_bytes * 8 - 1) +
                               " of a code are padding and must be 0)");
    }
  }
  return Status();
}

// The parameters of a search, or an error; `candidates` gets the Hamming list length.
Status index::check_search(const char* call, const BinaryIndex::State& s,
                           std::uint32_t queries_count, const SearchParams& params,
                           std::uint32_t& candidates) {
  if (queries_count == 0) return invalid(call, "queries_count must be > 0");
  if (params.k == 0 || params.k > kHammingMaxK) {
    return invalid(call, "k " + std::to_string(params.k) + " outside 1.." +
                             std::to_string(kHammingMaxK));
  }
  if (params.oversample == 0) return invalid(call, "oversample must be >= 1");
  candidates = params.k;
  if (!params.rescore) return Status();
  if (s.options.keep == KeptVectors::none) {
    return Status(ErrorCode::failed_precondition,
                  std::string(call) + ": rescore asked, but the index keeps no vectors "
                                      "(BinaryIndexOptions::keep is none)");
  }
  const std::uint64_t wanted = std::uint64_t{params.k} * params.oversample;
  if (wanted > kHammingMaxK) {
    return invalid(call, "k * oversample = " + std::to_string(params.k) + " * " +
                             std::to_string(params.oversample) + " = " + std::to_string(wanted) +
                             " candidates, above hamming_topk's " + std::to_string(kHammingMaxK));
  }
  candidates = static_cast<std::uint32_t>(wanted);
  if (Status supported = s.device.supports("rescore"); !supported.ok()) {
    return supported.with_context(call);
  }
  return Status();
}

namespace {

// A validated search, under the index's lock.
Result<SearchResults> run_search(const char* call, BinaryIndex::State& s,
                                 std::span<const std::byte> queries, std::uint32_t queries_count,
                                 const SearchParams& params, std::uint32_t candidates,
                                 QueryInput input) {
  std::lock_guard lock(s.mutex);
  if (s.rows == 0) {
    return Status(ErrorCode::failed_precondition, std::string(call) + ": the index is empty");
  }
  try {
    Result<SearchResults> results = s.search(queries, queries_count, params, input);
    if (!results.ok()) {
      return results.status().with_context(std::string(call) + "(" +
                                           std::to_string(queries_count) + " queries, k " +
                                           std::to_string(params.k) + ", " +
                                           std::to_string(candidates) + " candidates)");
    }
    return results;
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(call);
  }
}

}  // namespace

BinaryIndex::BinaryIndex() = default;
BinaryIndex::BinaryIndex(std::unique_ptr<State> state) : state_(std::move(state)) {}
BinaryIndex::BinaryIndex(BinaryIndex&&) noexcept = default;
BinaryIndex& BinaryIndex::operator=(BinaryIndex&&) noexcept = default;
BinaryIndex::~BinaryIndex() = default;

Result<BinaryIndex> BinaryIndex::create(const Device& device, const BinaryIndexOptions& options) {
  static constexpr const char* kCall = "BinaryIndex::create";
  if (!device) return Status(ErrorCode::released, std::string(kCall) + ": no device");
  FERRY_RETURN_IF_ERROR(validate_options(kCall, options));
  try {
    Result<std::unique_ptr<State>> state = State::make(device, options);
    if (!state.ok()) return state.status().with_context(kCall);
    return BinaryIndex(std::move(state).value());
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(kCall);
  }
}

Result<BinaryIndex> BinaryIndex::load(const Device& device, const std::filesystem::path& path,
                                      const BinaryIndexMemory& memory) {
  const std::string call = "BinaryIndex::load(" + path.string() + ")";
  if (!device) return Status(ErrorCode::released, call + ": no device");
  try {
    index::FileReader reader(path);
    FERRY_ASSIGN_OR_RETURN(index::FileStart start, index::read_file_start(reader, call, memory));
    Result<std::unique_ptr<State>> made = State::make(device, start.options);
    if (!made.ok()) return made.status().with_context(call);
    State* const states[] = {made->get()};
    const std::uint64_t rows[] = {start.header.rows};
    FERRY_RETURN_IF_ERROR(index::load_file_rows(reader, start, states, rows).with_context(call));
    return BinaryIndex(std::move(made).value());
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(call.c_str());
  }
}

Result<std::uint64_t> BinaryIndex::add(std::span<const std::byte> vectors, std::uint64_t rows) {
  static constexpr const char* kCall = "BinaryIndex::add";
  if (!state_) return no_index(kCall);
  if (rows == 0) return invalid(kCall, "rows must be > 0");
  FERRY_RETURN_IF_ERROR(check_rows(kCall, "vectors", state_->options, vectors.size(), rows));
  std::lock_guard lock(state_->mutex);
  try {
    Result<std::uint64_t> first = state_->add(vectors, rows);
    if (!first.ok()) {
      return first.status().with_context(std::string(kCall) + "(" + std::to_string(rows) +
                                         " rows): nothing added");
    }
    return first;
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(kCall);
  }
}

Result<std::uint64_t> BinaryIndex::add(std::span<const float> vectors, std::uint64_t rows) {
  if (state_ && state_->options.input_type != ElementType::float32) {
    return invalid("BinaryIndex::add", "float rows given, but the index's input_type is " +
                                           std::string(to_string(state_->options.input_type)));
  }
  return add(std::as_bytes(vectors), rows);
}

Result<std::uint64_t> BinaryIndex::add_codes(std::span<const std::byte> codes,
                                             std::uint64_t rows) {
  static constexpr const char* kCall = "BinaryIndex::add_codes";
  if (!state_) return no_index(kCall);
  State& s = *state_;
  if (rows == 0) return invalid(kCall, "rows must be > 0");
  if (s.options.keep != KeptVectors::none) {
    return invalid(kCall, "the index keeps " + std::string(to_string(s.options.keep)) +
                              " vectors (BinaryIndexOptions::keep), which codes do not have; "
                              "add vectors with add(), or make the index with keep none");
  }
  FERRY_RETURN_IF_ERROR(check_codes(kCall, "codes", s.options, codes, rows));
  std::lock_guard lock(s.mutex);
  if (s.thresholds.empty()) {
    return Status(ErrorCode::failed_precondition,
                  std::string(kCall) + ": the index's threshold is first_add_mean and no add() "
                                       "has fixed it yet (its float searches need it): add "
                                       "vectors first, or make the index with threshold zero");
  }
  try {
    Result<std::uint64_t> first = s.add_codes(codes, rows);
    if (!first.ok()) {
      return first.status().with_context(std::string(kCall) + "(" + std::to_string(rows) +
                                         " rows): nothing added");
    }
    return first;
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(kCall);
  }
}

Result<SearchResults> BinaryIndex::search(std::span<const std::byte> queries,
                                          std::uint32_t queries_count,
                                          const SearchParams& params) const {
  static constexpr const char* kCall = "BinaryIndex::search";
  if (!state_) return no_index(kCall);
  State& s = *state_;
  std::uint32_t candidates = 0;
  FERRY_RETURN_IF_ERROR(check_search(kCall, s, queries_count, params, candidates));
  FERRY_RETURN_IF_ERROR(check_rows(kCall, "queries", s.options, queries.size(), queries_count));
  return run_search(kCall, s, queries, queries_count, params, candidates, QueryInput::vectors);
}

Result<SearchResults> BinaryIndex::search_codes(std::span<const std::byte> query_codes,
                                                std::uint32_t queries,
                                                const SearchParams& params) const {
  static constexpr const char* kCall = "BinaryIndex::search_codes";
  if (!state_) return no_index(kCall);
  State& s = *state_;
  if (params.rescore) {
    return invalid(kCall, "rescore asked, but rescoring needs the query vectors and "
                          "search_codes has only their codes (use search())");
  }
  std::uint32_t candidates = 0;
  FERRY_RETURN_IF_ERROR(check_search(kCall, s, queries, params, candidates));
  FERRY_RETURN_IF_ERROR(check_codes(kCall, "query_codes", s.options, query_codes, queries));
  return run_search(kCall, s, query_codes, queries, params, candidates, QueryInput::codes);
}

Result<SearchResults> BinaryIndex::search(std::span<const float> queries,
                                          std::uint32_t queries_count,
                                          const SearchParams& params) const {
  if (state_ && state_->options.input_type != ElementType::float32) {
    return invalid("BinaryIndex::search", "float queries given, but the index's input_type is " +
                                              std::string(to_string(state_->options.input_type)));
  }
  return search(std::as_bytes(queries), queries_count, params);
}

Status BinaryIndex::save(const std::filesystem::path& path) const {
  const std::string call = "BinaryIndex::save(" + path.string() + ")";
  if (!state_) return no_index(call.c_str());
  std::lock_guard lock(state_->mutex);
  try {
    const index::RowRun all{state_.get(), 0, state_->rows};
    Status status = index::save_file(path, *state_, std::span(&all, 1));
    if (!status.ok()) return status.with_context(call);
    return status;
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(call.c_str());
  }
}

std::uint64_t BinaryIndex::size() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->mutex);
  return state_->rows;
}

const BinaryIndexOptions& BinaryIndex::options() const {
  static const BinaryIndexOptions kNone;
  return state_ ? state_->options : kNone;
}

std::vector<float> BinaryIndex::thresholds() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mutex);
  return state_->thresholds;
}

float BinaryIndex::int8_scale() const {
  if (!state_) return 0.0f;
  std::lock_guard lock(state_->mutex);
  return state_->int8_scale;
}

BinaryIndexStats BinaryIndex::stats() const {
  BinaryIndexStats stats;
  if (!state_) return stats;
  const State& s = *state_;
  std::lock_guard lock(s.mutex);
  stats.rows = s.rows;
  stats.device_code_rows = std::min(s.rows, s.codes.device_capacity());
  stats.device_vector_rows =
      s.options.keep == KeptVectors::none ? 0 : std::min(s.rows, s.vectors.device_capacity());
  stats.device_bytes = s.codes.device_bytes() + s.vectors.device_bytes();
  stats.host_bytes = s.codes.host_bytes() + s.vectors.host_bytes();
  stats.code_segments = static_cast<std::uint32_t>(s.codes.segments().size());
  stats.vector_segments = static_cast<std::uint32_t>(s.vectors.segments().size());
  return stats;
}

// ---- the state --------------------------------------------------------------------------

Result<std::unique_ptr<BinaryIndex::State>> BinaryIndex::State::make(
    const Device& device, const BinaryIndexOptions& options) {
  for (const char* op : {"binary_quantize", "hamming_topk"}) {
    FERRY_RETURN_IF_ERROR(device.supports(op));
  }
  auto state = std::make_unique<State>();
  State& s = *state;
  s.device = device;
  s.options = options;
  if (s.options.memory.device_segment_bytes == 0) {
    // As large as an op binds (hamming_topk and rescore take a segment as one buffer), within
    // 4 GiB: the Vulkan shaders' byte positions are 32-bit.
    const std::uint64_t binding = device.info().max_op_binding_bytes;
    s.options.memory.device_segment_bytes =
        std::min<std::uint64_t>(binding == 0 ? ~0ull : binding, 0xFFFFFFFFull);
  }
  s.code_bytes = static_cast<std::uint32_t>(binary_code_bytes(options.dims));
  s.vector_bytes = options.keep == KeptVectors::none
                       ? 0
                       : options.dims * (options.keep == KeptVectors::float32 ? 4 : 1);
  s.compute = device.queue(QueueKind::compute);
  s.upload = device.queue(QueueKind::upload);
  s.download = device.queue(QueueKind::download);
  StagingPoolOptions pool;
  pool.slab_bytes = options.memory.staging_slab_bytes;
  pool.max_slabs = options.memory.staging_slabs;
  pool.reserved_slabs = 1;
  pool.kind = MemoryKind::host_upload;
  FERRY_ASSIGN_OR_RETURN(s.upload_pool, device.create_staging_pool(pool));
  pool.kind = MemoryKind::host_readback;
  FERRY_ASSIGN_OR_RETURN(s.readback_pool, device.create_staging_pool(pool));
  const BinaryIndexMemory& memory = s.options.memory;
  s.codes = index::SegmentStore(s.code_bytes, memory.code_budget_bytes,
                                memory.device_segment_bytes, memory.segment_bytes,
                                index::HostMemory::pageable);
  if (s.vector_bytes != 0) {
    s.vectors = index::SegmentStore(s.vector_bytes, memory.vector_budget_bytes,
                                    memory.device_segment_bytes, memory.segment_bytes,
                                    index::HostMemory::pinned);
  }
  s.int8_scale = options.keep == KeptVectors::int8 ? options.int8_scale : 0.0f;
  if (options.threshold != IndexThreshold::zero) {
    FERRY_ASSIGN_OR_RETURN(s.thresholds_buffer, device.create_buffer(std::uint64_t{options.dims} * 4));
  }
  if (options.threshold == IndexThreshold::given) {
    FERRY_RETURN_IF_ERROR(s.upload_thresholds(options.thresholds));
    s.thresholds = options.thresholds;
  } else if (options.threshold == IndexThreshold::zero) {
    s.thresholds.assign(options.dims, 0.0f);
  }
  return state;
}

std::uint64_t BinaryIndex::State::input_row_bytes() const {
  return std::uint64_t{options.dims} * element_size(options.input_type);
}

std::uint64_t BinaryIndex::State::device_row_bytes() const {
  return std::uint64_t{options.dims} * element_size(index::device_row_type(options));
}

std::uint64_t BinaryIndex::State::step_rows() const {
  const std::uint64_t largest = std::max<std::uint64_t>(device_row_bytes(), code_bytes);
  return std::clamp<std::uint64_t>(options.memory.staging_slab_bytes / largest, 1, 0xFFFFFFFFull);
}

Status BinaryIndex::State::upload_thresholds(std::span<const float> values) {
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done,
                         ferry::upload(upload, upload_pool, std::as_bytes(values),
                                       thresholds_buffer, 0));
  return done.wait();
}

}  // namespace ferry

namespace ferry::index {

Result<BufferRef> WorkBuffer::at_least(const Device& device, std::uint64_t bytes, const char* what) {
  if (!buffer_ || buffer_.size() < bytes) {
    buffer_.release();
    Result<Buffer> buffer = device.create_buffer(std::max<std::uint64_t>(bytes, 256));
    if (!buffer.ok()) {
      return buffer.status().with_context(std::string("a work buffer for ") + what + " (" +
                                          detail::describe_bytes(bytes) + ")");
    }
    buffer_ = std::move(buffer).value();
  }
  return BufferRef(buffer_);
}

void SubmittedWork::settle() const {
  for (const TimelinePoint& point : last_) {
    if (point.timeline) (void)point.wait();
  }
}

Status SubmittedWork::wait() const {
  Status first;
  for (const TimelinePoint& point : last_) {
    if (!point.timeline) continue;
    Status status = point.wait();
    if (!status.ok() && first.ok()) first = std::move(status);
  }
  return first;
}

}  // namespace ferry::index
