// ShardedIndex: validation, row placement, the two-step search over the shards' own search steps
// (BinaryIndex::State::hamming_block and rescore_hits), each step on every shard at once, and
// save / load through BinaryIndex's file code (index_io.cpp) over every shard.
#include "ferry/sharded_index.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "core/checked.hpp"
#include "core/state.hpp"
#include "core/threads.hpp"
#include "ferry/ops/binary_quantize.hpp"
#include "index/index_checks.hpp"
#include "index/index_state.hpp"

namespace ferry {
namespace {

constexpr std::uint32_t kMaxWeight = 1u << 20;

Status invalid(const char* call, const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(call) + ": " + what);
}

Status no_index(const char* call) {
  return Status(ErrorCode::released,
                std::string(call) + ": no index (default-constructed or moved from)");
}

std::string device_name(const Device& device) {
  return std::string(to_string(device.backend())) + ":" + std::to_string(device.info().index);
}

// The rows of an add of `count` rows per shard: each shard gets what brings it closest to its
// share of all rows (shards furthest below first), the few rows that floors leave to the first
// shards. Deterministic; placement never changes results.
std::vector<std::uint64_t> split_rows(const std::vector<std::uint64_t>& have,
                                      const std::vector<std::uint32_t>& weights,
                                      std::uint64_t count) {
  const std::size_t shards = have.size();
  std::uint64_t total = count, weight_sum = 0;
  for (std::size_t s = 0; s < shards; ++s) {
    total += have[s];  // the caller checked that this does not overflow
    weight_sum += weights[s];
  }
  std::vector<std::uint64_t> deficit(shards, 0), part(shards, 0);
  for (std::size_t s = 0; s < shards; ++s) {
    // floor(total * w / W) without 128-bit arithmetic: total = q * W + r.
    const std::uint64_t target = total / weight_sum * weights[s] +
                                 total % weight_sum * weights[s] / weight_sum;
    deficit[s] = target > have[s] ? target - have[s] : 0;
  }
  std::vector<std::size_t> order(shards);
  for (std::size_t s = 0; s < shards; ++s) order[s] = s;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return deficit[a] > deficit[b]; });
  std::uint64_t left = count;
  for (std::size_t s : order) {
    const std::uint64_t give = std::min(deficit[s], left);
    part[s] += give;
    left -= give;
  }
  for (std::size_t s = 0; left > 0; s = (s + 1) % shards, --left) ++part[s];
  return part;
}

// Runs body(s) for each shard in `which`, every one but the first on a thread of its own (on its
// device's NUMA node, cpus_of(s); the caller runs the first, and any whose thread cannot start),
// and returns the first failure in shard order. A host allocation failing in a body is that shard's out_of_memory. Threads of
// its own rather than core's parallel_for: a body blocks on its device for the whole step, which
// would hold the few host workers that every device's staging memcpy needs, and shards must all
// run at once whatever their number (starting a thread costs microseconds; a step, milliseconds).
Status on_shards(const std::vector<std::size_t>& which,
                 const std::function<const std::vector<int>&(std::size_t)>& cpus_of,
                 const std::function<Status(std::size_t)>& body) {
  std::vector<Status> results(which.size());
  auto run = [&](std::size_t i) {
    try {
      results[i] = body(which[i]);
    } catch (const std::bad_alloc&) {
      results[i] = Status(ErrorCode::out_of_memory, "out of host memory");
    }
  };
  std::vector<std::thread> threads;
  std::vector<std::size_t> inline_runs;
  threads.reserve(which.size());  // no allocation (which could throw) once threads run
  inline_runs.reserve(which.size());
  for (std::size_t i = 1; i < which.size(); ++i) {
    Result<std::thread> thread =
        detail::start_thread("a shard's step", [&run, i] { run(i); }, cpus_of(which[i]));
    if (thread.ok()) {
      threads.push_back(std::move(thread).value());
    } else {
      inline_runs.push_back(i);
    }
  }
  if (!which.empty()) run(0);
  for (std::size_t i : inline_runs) run(i);
  for (std::thread& thread : threads) thread.join();
  for (std::size_t i = 0; i < which.size(); ++i) {
    if (!results[i].ok()) return results[i];
  }
  return Status();
}

}  // namespace

struct ShardedIndex::State {
  ShardedIndexOptions options;
  std::vector<BinaryIndex> shards;

  mutable std::mutex mutex;  // one call at a time; it also guards every shard
  // Per shard, where its rows sit among all rows: runs in order (one per add() it took part in,
  // one for a load()).
  struct Run {
    std::uint64_t local_first = 0, global_first = 0;
  };
  std::vector<std::vector<Run>> runs;

  BinaryIndex::State& shard(std::size_t s) const { return *ShardedIndex::state_of(shards[s]); }
  // The CPUs of a shard's device's NUMA node (empty: no placement), for its steps' threads.
  const std::vector<int>& shard_cpus(std::size_t s) const {
    return shard(s).device.state()->core->host_cpus;
  }
  Status on_shards(const std::vector<std::size_t>& which,
                   const std::function<Status(std::size_t)>& body) const {
    return ferry::on_shards(which, [this](std::size_t s) -> const std::vector<int>& { return shard_cpus(s); }, body);
  }

  std::uint64_t total_rows() const {
    std::uint64_t rows = 0;
    for (std::size_t s = 0; s < shards.size(); ++s) rows += shard(s).rows;
    return rows;
  }

  std::uint64_t global_id(std::size_t s, std::uint64_t local) const {
    const std::vector<Run>& r = runs[s];
    auto it = std::upper_bound(r.begin(), r.end(), local,
                               [](std::uint64_t row, const Run& run) { return row < run.local_first; });
    --it;  // local is one of the shard's rows, so some run starts at or before it
    return it->global_first + (local - it->local_first);
  }

  Status fail_on_shard(Status status, std::size_t s) const {
    return status.with_context("shard " + std::to_string(s) + " (" + device_name(shard(s).device) +
                               ")");
  }

  Result<std::uint64_t> add_rows(std::span<const std::byte> data, std::uint64_t count,
                                 QueryInput input);
  Result<SearchResults> search(std::span<const std::byte> queries, std::uint32_t count,
                               const SearchParams& params, std::uint32_t candidates,
                               QueryInput input) const;
  Status save(const std::filesystem::path& path) const;
};

BinaryIndex::State* ShardedIndex::state_of(const BinaryIndex& index) { return index.state_.get(); }

Result<std::uint64_t> ShardedIndex::State::add_rows(std::span<const std::byte> data,
                                                    std::uint64_t count, QueryInput input) {
  const std::uint64_t first = total_rows();
  if (!detail::checked_add(first, count)) {
    return Status(ErrorCode::invalid_argument, "the row count would pass 2^64");
  }
  const std::size_t shards_count = shards.size();
  const BinaryIndexOptions& o = options.index;
  const std::uint64_t row_bytes =
      input == QueryInput::codes ? binary_code_bytes(o.dims)
                                 : std::uint64_t{o.dims} * element_size(o.input_type);

  // What the first add fixes, from all of its rows, as one index would compute it.
  BinaryIndex::State& lead = shard(0);
  const bool need_mean = input == QueryInput::vectors &&
                         o.threshold == IndexThreshold::first_add_mean && lead.thresholds.empty();
  const bool need_scale =
      input == QueryInput::vectors && o.keep == KeptVectors::int8 && lead.int8_scale == 0.0f;
  index::FirstAddValues fixed;
  if (need_mean || need_scale) {
    fixed = index::first_add_values(o, data, count, need_mean, need_scale);
  }

  std::vector<std::uint64_t> have(shards_count);
  for (std::size_t s = 0; s < shards_count; ++s) have[s] = shard(s).rows;
  const std::vector<std::uint64_t> parts = split_rows(have, options.weights, count);
  std::vector<std::uint64_t> offset(shards_count, 0);
  for (std::size_t s = 1; s < shards_count; ++s) offset[s] = offset[s - 1] + parts[s - 1];
  std::vector<index::StateMark> marks;
  std::vector<std::size_t> which;
  for (std::size_t s = 0; s < shards_count; ++s) {
    marks.push_back(shard(s).mark());
    if (parts[s] > 0 || need_mean || need_scale) which.push_back(s);
  }

  Status status = on_shards(which, [&](std::size_t s) -> Status {
    BinaryIndex::State& st = shard(s);
    if (need_mean) {
      Status uploaded = st.upload_thresholds(fixed.thresholds);
      if (!uploaded.ok()) return fail_on_shard(std::move(uploaded), s);
      st.thresholds = fixed.thresholds;
    }
    if (need_scale) st.int8_scale = fixed.int8_scale;
    if (parts[s] == 0) return Status();
    const std::span<const std::byte> rows_in = data.subspan(offset[s] * row_bytes, parts[s] * row_bytes);
    Result<std::uint64_t> added = input == QueryInput::codes ? st.add_codes(rows_in, parts[s])
                                                             : st.add(rows_in, parts[s]);
    return fail_on_shard(added.status(), s);
  });
  if (!status.ok()) {
    for (std::size_t s = 0; s < shards_count; ++s) shard(s).restore(marks[s]);
    return status;
  }
  for (std::size_t s = 0; s < shards_count; ++s) {
    if (parts[s] > 0) runs[s].push_back({marks[s].rows, first + offset[s]});
  }
  return first;
}

Result<SearchResults> ShardedIndex::State::search(std::span<const std::byte> queries,
                                                  std::uint32_t count, const SearchParams& params,
                                                  std::uint32_t candidates,
                                                  QueryInput input) const {
  SearchResults out;
  out.queries = count;
  out.k = params.k;
  out.ids.assign(std::uint64_t{count} * params.k, kBinaryIndexNoId);
  out.scores.assign(out.ids.size(), std::numeric_limits<float>::quiet_NaN());

  std::vector<std::size_t> active;  // shards with rows
  std::uint64_t block = count;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    if (shard(s).rows == 0) continue;
    active.push_back(s);
    block = std::min(block, shard(s).queries_per_block(count, candidates, params.k));
  }
  const BinaryIndex::State& lead = shard(active.front());
  const std::uint64_t row_bytes =
      input == QueryInput::codes ? lead.code_bytes : lead.input_row_bytes();
  const RescoreElement element = lead.rescore_element();
  const RescoreMetric metric = lead.rescore_metric();

  const std::size_t n_shards = shards.size();
  std::vector<index::SubmittedWork> submitted(n_shards);
  std::vector<std::vector<std::vector<index::HammingHit>>> hits(n_shards);
  std::vector<std::vector<std::vector<index::HammingHit>>> shard_candidates(n_shards);
  std::vector<std::vector<std::vector<index::ScoredHit>>> best(n_shards);
  std::vector<BufferRef> rescore_queries(n_shards, BufferRef(Buffer()));

  struct Candidate {
    index::HammingHit hit;  // global id
    std::size_t shard = 0;
    std::uint64_t local = 0;
  };
  for (std::uint64_t first = 0; first < count; first += block) {
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(block, count - first));
    const std::span<const std::byte> rows_in = queries.subspan(first * row_bytes, n * row_bytes);
    auto fail = [&](Status status) {
      for (const index::SubmittedWork& work : submitted) work.settle();
      if (count > block) {
        status.with_context("queries " + std::to_string(first) + ".." +
                            std::to_string(first + n - 1));
      }
      return status;
    };

    // 1. Every shard's Hamming lists, at once.
    Status status = on_shards(active, [&](std::size_t s) {
      return fail_on_shard(shard(s).hamming_block(rows_in, input, n, params, candidates, hits[s],
                                                  rescore_queries[s], submitted[s]),
                           s);
    });
    if (!status.ok()) return fail(std::move(status));

    // 2. Merged into the global candidates: ascending distance, then ascending global id (a
    //    shard's list is the best of its rows by local id, which orders like the global id).
    for (std::size_t s : active) shard_candidates[s].assign(n, {});
    std::vector<Candidate> merged;
    for (std::uint32_t q = 0; q < n; ++q) {
      merged.clear();
      for (std::size_t s : active) {
        for (const index::HammingHit& hit : hits[s][q]) {
          merged.push_back({{hit.distance, global_id(s, hit.id)}, s, hit.id});
        }
      }
      const std::size_t keep = std::min<std::size_t>(candidates, merged.size());
      std::partial_sort(merged.begin(), merged.begin() + static_cast<std::ptrdiff_t>(keep),
                        merged.end(), [](const Candidate& a, const Candidate& b) {
                          return a.hit.distance != b.hit.distance ? a.hit.distance < b.hit.distance
                                                                  : a.hit.id < b.hit.id;
                        });
      merged.resize(keep);
      const std::uint64_t at = (first + q) * params.k;
      for (std::size_t i = 0; i < merged.size(); ++i) {
        if (params.rescore) {
          shard_candidates[merged[i].shard][q].push_back({merged[i].hit.distance, merged[i].local});
        } else {
          out.ids[at + i] = merged[i].hit.id;
          out.scores[at + i] = static_cast<float>(merged[i].hit.distance);
        }
      }
    }
    if (!params.rescore) continue;

    // 3. Each shard rescores its share of the candidates, at once; the lists merged by the
    //    rescore's order.
    std::vector<std::size_t> scoring;
    for (std::size_t s : active) {
      const auto& lists = shard_candidates[s];
      if (std::any_of(lists.begin(), lists.end(), [](const auto& l) { return !l.empty(); })) {
        scoring.push_back(s);
      }
    }
    status = on_shards(scoring, [&](std::size_t s) {
      return fail_on_shard(shard(s).rescore_hits(n, params, shard_candidates[s],
                                                 rescore_queries[s], best[s], submitted[s]),
                           s);
    });
    if (!status.ok()) return fail(std::move(status));
    std::vector<index::ScoredHit> scored;
    for (std::uint32_t q = 0; q < n; ++q) {
      scored.clear();
      for (std::size_t s : scoring) {
        for (const index::ScoredHit& hit : best[s][q]) {
          scored.push_back({hit.score_bits, global_id(s, hit.id)});
        }
      }
      const std::size_t keep = std::min<std::size_t>(params.k, scored.size());
      std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                        scored.end(), [&](const index::ScoredHit& a, const index::ScoredHit& b) {
                          return index::ranks_before(a, b, element, metric);
                        });
      const std::uint64_t at = (first + q) * params.k;
      for (std::size_t i = 0; i < keep; ++i) {
        out.ids[at + i] = scored[i].id;
        out.scores[at + i] = lead.reported_score(scored[i]);
      }
    }
  }
  return out;
}

// The file of one index holding every row: the shards' runs in global row order.
Status ShardedIndex::State::save(const std::filesystem::path& path) const {
  struct Piece {
    index::RowRun rows;
    std::uint64_t global_first = 0;
  };
  std::vector<Piece> pieces;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::vector<Run>& r = runs[s];
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::uint64_t end = i + 1 < r.size() ? r[i + 1].local_first : shard(s).rows;
      pieces.push_back({{&shard(s), r[i].local_first, end - r[i].local_first}, r[i].global_first});
    }
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.global_first < b.global_first; });
  std::vector<index::RowRun> ordered;
  ordered.reserve(pieces.size());
  std::uint64_t next = 0;
  for (const Piece& piece : pieces) {
    if (piece.global_first != next) {  // adds give every row one place, so this is a bug
      return Status(ErrorCode::internal, "the shards' runs leave a gap or overlap at row " +
                                             std::to_string(next));
    }
    ordered.push_back(piece.rows);
    next += piece.rows.count;
  }
  return index::save_file(path, shard(0), ordered);
}

// ---- public calls ------------------------------------------------------------------------

ShardedIndex::ShardedIndex() = default;
ShardedIndex::ShardedIndex(std::unique_ptr<State> state) : state_(std::move(state)) {}
ShardedIndex::ShardedIndex(ShardedIndex&&) noexcept = default;
ShardedIndex& ShardedIndex::operator=(ShardedIndex&&) noexcept = default;
ShardedIndex::~ShardedIndex() = default;

namespace {

// The devices and weights of create() and load(), or an error naming the problem.
Status check_devices(const char* call, std::span<const Device> devices,
                     const std::vector<std::uint32_t>& weights) {
  if (devices.empty() || devices.size() > kShardedIndexMaxShards) {
    return invalid(call, std::to_string(devices.size()) + " devices, outside 1.." +
                             std::to_string(kShardedIndexMaxShards));
  }
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (!devices[d]) {
      return Status(ErrorCode::released,
                    std::string(call) + ": devices[" + std::to_string(d) + "] is no device");
    }
  }
  if (!weights.empty() && weights.size() != devices.size()) {
    return invalid(call, std::to_string(weights.size()) + " weights for " +
                             std::to_string(devices.size()) + " devices");
  }
  for (std::size_t d = 0; d < weights.size(); ++d) {
    if (weights[d] == 0 || weights[d] > kMaxWeight) {
      return invalid(call, "weights[" + std::to_string(d) + "] " + std::to_string(weights[d]) +
                               " outside 1.." + std::to_string(kMaxWeight));
    }
  }
  return Status();
}

// An empty shard on each of the checked devices, for validated options.
Result<std::unique_ptr<ShardedIndex::State>> make_state(const std::string& call,
                                                        std::span<const Device> devices,
                                                        const ShardedIndexOptions& options) {
  auto state = std::make_unique<ShardedIndex::State>();
  state->options = options;
  if (state->options.weights.empty()) state->options.weights.assign(devices.size(), 1);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    Result<BinaryIndex> shard = BinaryIndex::create(devices[d], options.index);
    if (!shard.ok()) {
      return shard.status().with_context(call + ": shard " + std::to_string(d) + " (" +
                                         device_name(devices[d]) + ")");
    }
    state->shards.push_back(std::move(shard).value());
  }
  state->runs.assign(devices.size(), {});
  return state;
}

}  // namespace

Result<ShardedIndex> ShardedIndex::create(std::span<const Device> devices,
                                          const ShardedIndexOptions& options) {
  static constexpr const char* kCall = "ShardedIndex::create";
  FERRY_RETURN_IF_ERROR(check_devices(kCall, devices, options.weights));
  FERRY_RETURN_IF_ERROR(index::validate_options(kCall, options.index));
  try {
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<State> state, make_state(kCall, devices, options));
    return ShardedIndex(std::move(state));
  } catch (const std::bad_alloc&) {
    return index::out_of_host_memory(kCall);
  }
}

Result<ShardedIndex> ShardedIndex::load(std::span<const Device> devices,
                                        const std::filesystem::path& path,
                                        const BinaryIndexMemory& memory,
                                        std::vector<std::uint32_t> weights) {
  const std::string call = "ShardedIndex::load(" + path.string() + ")";
  FERRY_RETURN_IF_ERROR(check_devices(call.c_str(), devices, weights));
  try {
    index::FileReader reader(path);
    FERRY_ASSIGN_OR_RETURN(index::FileStart start, index::read_file_start(reader, call, memory));
    ShardedIndexOptions options;
    options.index = start.options;
    options.weights = std::move(weights);
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<State> state, make_state(call, devices, options));
    // Where one add() of every row on the empty index would put them: shard s gets rows
    // [offset[s], offset[s] + parts[s]), the file's rows being in global order.
    const std::size_t shards_count = devices.size();
    const std::vector<std::uint64_t> parts = split_rows(std::vector<std::uint64_t>(shards_count, 0),
                                                        state->options.weights, start.header.rows);
    std::vector<BinaryIndex::State*> shard_states(shards_count);
    for (std::size_t s = 0; s < shards_count; ++s) shard_states[s] = &state->shard(s);
    FERRY_RETURN_IF_ERROR(
        index::load_file_rows(reader, start, shard_states, parts).with_context(call));
    std::uint64_t offset = 0;
    for (std::size_t s = 0; s < shards_count; ++s) {
      if (parts[s] > 0) state->runs[s].push_back({0, offset});
      offset += parts[s];
    }
    return ShardedIndex(std::move(state));
  } catch (const std::bad_alloc&) {
    return index::out_of_host_memory(call.c_str());
  }
}

namespace {

// A validated add under the index's lock; codes only once the thresholds are known.
Result<std::uint64_t> locked_add(const char* call, ShardedIndex::State& s,
                                 std::span<const std::byte> data, std::uint64_t rows,
                                 QueryInput input) {
  std::lock_guard lock(s.mutex);
  if (input == QueryInput::codes && s.shard(0).thresholds.empty()) {
    return Status(ErrorCode::failed_precondition,
                  std::string(call) + ": the index's threshold is first_add_mean and no add() "
                                      "has fixed it yet (its float searches need it): add "
                                      "vectors first, or make the index with threshold zero");
  }
  try {
    Result<std::uint64_t> first = s.add_rows(data, rows, input);
    if (!first.ok()) {
      return first.status().with_context(std::string(call) + "(" + std::to_string(rows) +
                                         " rows): nothing added");
    }
    return first;
  } catch (const std::bad_alloc&) {
    return index::out_of_host_memory(call);
  }
}

}  // namespace

Result<std::uint64_t> ShardedIndex::add(std::span<const std::byte> vectors, std::uint64_t rows) {
  static constexpr const char* kCall = "ShardedIndex::add";
  if (!state_) return no_index(kCall);
  if (rows == 0) return invalid(kCall, "rows must be > 0");
  FERRY_RETURN_IF_ERROR(
      index::check_rows(kCall, "vectors", state_->options.index, vectors.size(), rows));
  return locked_add(kCall, *state_, vectors, rows, QueryInput::vectors);
}

Result<std::uint64_t> ShardedIndex::add(std::span<const float> vectors, std::uint64_t rows) {
  if (state_ && state_->options.index.input_type != ElementType::float32) {
    return invalid("ShardedIndex::add",
                   "float rows given, but the index's input_type is " +
                       std::string(to_string(state_->options.index.input_type)));
  }
  return add(std::as_bytes(vectors), rows);
}

Result<std::uint64_t> ShardedIndex::add_codes(std::span<const std::byte> codes,
                                              std::uint64_t rows) {
  static constexpr const char* kCall = "ShardedIndex::add_codes";
  if (!state_) return no_index(kCall);
  const BinaryIndexOptions& o = state_->options.index;
  if (rows == 0) return invalid(kCall, "rows must be > 0");
  if (o.keep != KeptVectors::none) {
    return invalid(kCall, "the index keeps " + std::string(to_string(o.keep)) +
                              " vectors (BinaryIndexOptions::keep), which codes do not have; "
                              "add vectors with add(), or make the index with keep none");
  }
  FERRY_RETURN_IF_ERROR(index::check_codes(kCall, "codes", o, codes, rows));
  return locked_add(kCall, *state_, codes, rows, QueryInput::codes);
}

namespace {

// A search's checks, then the search under the index's lock.
Result<SearchResults> run_search(const char* call, const ShardedIndex::State* state,
                                 std::span<const std::byte> queries, std::uint32_t count,
                                 const SearchParams& params, QueryInput input) {
  if (state == nullptr) return no_index(call);
  const ShardedIndex::State& s = *state;
  std::uint32_t candidates = 0;
  for (std::size_t d = 0; d < s.shards.size(); ++d) {
    // Every shard's device must be able to run the search (rescore support differs).
    Status checked = index::check_search(call, s.shard(d), count, params, candidates);
    if (!checked.ok()) return d == 0 ? checked : s.fail_on_shard(std::move(checked), d);
  }
  FERRY_RETURN_IF_ERROR(
      input == QueryInput::codes
          ? index::check_codes(call, "query_codes", s.options.index, queries, count)
          : index::check_rows(call, "queries", s.options.index, queries.size(), count));
  std::lock_guard lock(s.mutex);
  if (s.total_rows() == 0) {
    return Status(ErrorCode::failed_precondition, std::string(call) + ": the index is empty");
  }
  try {
    Result<SearchResults> results = s.search(queries, count, params, candidates, input);
    if (!results.ok()) {
      return results.status().with_context(std::string(call) + "(" + std::to_string(count) +
                                           " queries, k " + std::to_string(params.k) + ", " +
                                           std::to_string(candidates) + " candidates)");
    }
    return results;
  } catch (const std::bad_alloc&) {
    return index::out_of_host_memory(call);
  }
}

}  // namespace

Result<SearchResults> ShardedIndex::search(std::span<const std::byte> queries,
                                           std::uint32_t queries_count,
                                           const SearchParams& params) const {
  return run_search("ShardedIndex::search", state_.get(), queries, queries_count, params, QueryInput::vectors);
}

Result<SearchResults> ShardedIndex::search(std::span<const float> queries,
                                           std::uint32_t queries_count,
                                           const SearchParams& params) const {
  if (state_ && state_->options.index.input_type != ElementType::float32) {
    return invalid("ShardedIndex::search",
                   "float queries given, but the index's input_type is " +
                       std::string(to_string(state_->options.index.input_type)));
  }
  return search(std::as_bytes(queries), queries_count, params);
}

Result<SearchResults> ShardedIndex::search_codes(std::span<const std::byte> query_codes,
                                                 std::uint32_t queries,
                                                 const SearchParams& params) const {
  static constexpr const char* kCall = "ShardedIndex::search_codes";
  if (state_ && params.rescore) {
    return invalid(kCall, "rescore asked, but rescoring needs the query vectors and "
                          "search_codes has only their codes (use search())");
  }
  return run_search(kCall, state_.get(), query_codes, queries, params, QueryInput::codes);
}

Status ShardedIndex::save(const std::filesystem::path& path) const {
  const std::string call = "ShardedIndex::save(" + path.string() + ")";
  if (!state_) return no_index(call.c_str());
  std::lock_guard lock(state_->mutex);
  try {
    Status status = state_->save(path);
    if (!status.ok()) return status.with_context(call);
    return status;
  } catch (const std::bad_alloc&) {
    return index::out_of_host_memory(call.c_str());
  }
}

std::uint64_t ShardedIndex::size() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->mutex);
  return state_->total_rows();
}

std::size_t ShardedIndex::shard_count() const { return state_ ? state_->shards.size() : 0; }

const ShardedIndexOptions& ShardedIndex::options() const {
  static const ShardedIndexOptions kNone;
  return state_ ? state_->options : kNone;
}

std::vector<float> ShardedIndex::thresholds() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mutex);
  return state_->shard(0).thresholds;
}

float ShardedIndex::int8_scale() const {
  if (!state_) return 0.0f;
  std::lock_guard lock(state_->mutex);
  return state_->shard(0).int8_scale;
}

std::vector<BinaryIndexStats> ShardedIndex::shard_stats() const {
  std::vector<BinaryIndexStats> stats;
  if (!state_) return stats;
  std::lock_guard lock(state_->mutex);
  for (const BinaryIndex& shard : state_->shards) stats.push_back(shard.stats());
  return stats;
}

}  // namespace ferry
