// rescore: the public call (validation, lowering) and the CPU reference.
#include "ferry/ops/rescore.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/checked.hpp"
#include "core/host_workers.hpp"
#include "core/op_record.hpp"
#include "ops/rescore.hpp"
#include "rescore_score.h"

namespace ferry {

namespace {

constexpr const char* kCall = "ferry::rescore";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

std::string range_text(std::uint64_t low, std::uint64_t high) {
  return "from " + std::to_string(low) + " to " + std::to_string(high);
}

// The bytes from a row's first element to the next row's: the pitch, or a tight row for 0.
Result<std::uint64_t> stride_of(const char* name, std::uint64_t pitch, std::uint64_t row_bytes,
                                std::uint32_t element_bytes) {
  if (pitch == 0) return row_bytes;
  if (pitch < row_bytes) {
    return invalid(std::string(name) + " " + std::to_string(pitch) + " is smaller than a row (" +
                   std::to_string(row_bytes) + " bytes)");
  }
  if (pitch % element_bytes != 0) {
    return invalid(std::string(name) + " " + std::to_string(pitch) + " is not a multiple of the " +
                   std::to_string(element_bytes) + "-byte element");
  }
  return pitch;
}

}  // namespace

Status rescore(CommandList& commands, const RescoreBuffers& buffers, const RescoreParams& params) {
  if (params.element != RescoreElement::float32 && params.element != RescoreElement::int8) {
    return invalid("unknown element " + std::to_string(static_cast<int>(params.element)));
  }
  if (params.metric != RescoreMetric::inner_product && params.metric != RescoreMetric::l2) {
    return invalid("unknown metric " + std::to_string(static_cast<int>(params.metric)));
  }
  const bool int8_l2 =
      params.element == RescoreElement::int8 && params.metric == RescoreMetric::l2;
  const std::uint32_t max_dims = int8_l2 ? kRescoreMaxInt8L2Dims : kRescoreMaxDims;
  if (params.dims == 0 || params.dims > max_dims) {
    return invalid("dims " + std::to_string(params.dims) + " is not " + range_text(1, max_dims) +
                   (int8_l2 ? " (int8 l2: int32 sums stay exact)" : ""));
  }
  if (params.queries == 0) return invalid("queries must be > 0");
  if (params.database_rows == 0 || params.database_rows >= kRescoreNoIndex) {
    return invalid("database_rows " + std::to_string(params.database_rows) + " is not " +
                   range_text(1, kRescoreNoIndex - 1));
  }
  if (params.candidates == 0 || params.candidates > kRescoreMaxCandidates) {
    return invalid("candidates " + std::to_string(params.candidates) + " is not " +
                   range_text(1, kRescoreMaxCandidates));
  }
  const std::uint32_t max_k = std::min(params.candidates, kRescoreMaxK);
  if (params.k == 0 || params.k > max_k) {
    return invalid("k " + std::to_string(params.k) + " is not " + range_text(1, max_k) +
                   " (at most the candidates and " + std::to_string(kRescoreMaxK) + ")");
  }

  ops::RescoreArgs args;
  args.element = params.element;
  args.metric = params.metric;
  args.dims = params.dims;
  args.queries = params.queries;
  args.rows = static_cast<std::uint32_t>(params.database_rows);
  args.candidates = params.candidates;
  args.k = params.k;
  const std::uint32_t element = args.element_bytes();
  const std::uint64_t row_bytes = args.row_bytes();  // <= 256 KiB
  FERRY_ASSIGN_OR_RETURN(args.query_stride,
                         stride_of("query_pitch", params.query_pitch, row_bytes, element));
  FERRY_ASSIGN_OR_RETURN(args.database_stride,
                         stride_of("database_pitch", params.database_pitch, row_bytes, element));

  const std::pair<const char*, std::uint64_t> offsets[] = {
      {"queries_offset", buffers.queries_offset},
      {"database_offset", buffers.database_offset},
      {"candidates_offset", buffers.candidates_offset},
      {"scores_offset", buffers.scores_offset},
      {"indices_offset", buffers.indices_offset}};
  for (std::size_t i = 0; i < std::size(offsets); ++i) {
    const std::uint64_t unit = i < 2 ? element : 4;
    if (offsets[i].second % unit != 0) {
      return invalid(std::string(offsets[i].first) + " " + std::to_string(offsets[i].second) +
                     " is not a multiple of " + std::to_string(unit) + " bytes");
    }
  }
  const std::optional<std::uint64_t> query_bytes =
      detail::checked_mul_add(args.query_stride, args.queries - 1, row_bytes);
  const std::optional<std::uint64_t> database_bytes =
      detail::checked_mul_add(args.database_stride, args.rows - 1, row_bytes);
  if (!query_bytes || !database_bytes) {
    return invalid("the vectors' size overflows 64 bits (query_pitch " +
                   std::to_string(params.query_pitch) + ", database_pitch " +
                   std::to_string(params.database_pitch) + ")");
  }
  // Below 2^44 and 2^42: cannot overflow.
  const std::uint64_t candidate_bytes = std::uint64_t{args.queries} * args.candidates * 4;
  const std::uint64_t output_bytes = std::uint64_t{args.queries} * args.k * 4;

  const detail::BindingRequest bindings[] = {
      {&buffers.queries, buffers.queries_offset, *query_bytes, backend::Access::read, "queries"},
      {&buffers.database, buffers.database_offset, *database_bytes, backend::Access::read,
       "database"},
      {&buffers.candidates, buffers.candidates_offset, candidate_bytes, backend::Access::read,
       "candidates"},
      {&buffers.scores, buffers.scores_offset, output_bytes, backend::Access::write, "scores"},
      {&buffers.indices, buffers.indices_offset, output_bytes, backend::Access::write,
       "indices"}};
  return detail::OpRecorder::record(commands, kCall, args, bindings);
}

namespace ops {

std::uint32_t rescore_max_rounds(std::uint32_t candidates, std::uint32_t k) {
  std::uint32_t rounds = 0, kept = 0, next = 0;
  do {
    const std::uint32_t fresh = std::min(kRescoreSlots - kept, candidates - next);
    next += fresh;
    kept = std::min(k, kept + fresh);
    ++rounds;
  } while (next < candidates);
  return rounds;
}

std::uint64_t rescore_loop_iterations(const RescoreArgs& args) {
  auto ceil_div = [](std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; };
  const std::uint64_t rounds = rescore_max_rounds(args.candidates, args.k);
  const std::uint64_t chain =
      ceil_div(args.dims, args.element == RescoreElement::float32 ? kRescoreFloatUnroll
                                                                  : kRescoreInt8Unroll);
  const std::uint64_t chains = ceil_div(args.candidates, kRescoreWorkgroupSize) + rounds +
                               ceil_div(args.k, kRescoreWorkgroupSize);
  // Per round besides the chains: the size loop (12), the fill and duplicate loops (3 x 8),
  // two bitonic sorts of at most 2048 slots (11 block + 66 stride + 66 x 4 slot iterations each),
  // the binary search (12); per query: the rounds and the output loop.
  constexpr std::uint64_t kPerRound = 12 + 3 * 8 + 2 * (11 + 66 + 66 * 4) + 12;
  return chains * chain + rounds * (kPerRound + 1) + ceil_div(args.k, kRescoreWorkgroupSize);
}

// ---- the CPU reference ----

namespace {

namespace score = ferry::shaders::rescore;

std::uint32_t load_u32(const std::byte* at) {
  std::uint32_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

void store_u32(std::byte* at, std::uint32_t value) { std::memcpy(at, &value, sizeof value); }

// float32 scores of up to kBlock rows against one query, their fma chains interleaved (each is
// sequential; independent chains keep the FMA units busy). Inlined into score_float_block's
// variants (below), each compiled for its own instruction set.
constexpr std::uint32_t kBlock = 8;

[[gnu::always_inline]] inline void score_float_block_body(const RescoreArgs& args,
                                                          const std::byte* query,
                                                          const std::byte* const* rows,
                                                          std::uint32_t count,
                                                          std::uint32_t* scores) {
  std::uint32_t s[kBlock] = {};  // +0.0f
  const bool l2 = args.metric == RescoreMetric::l2;
  for (std::uint32_t j = 0; j < args.dims; ++j) {
    const std::uint32_t q = load_u32(query + 4 * std::size_t{j});
    for (std::uint32_t r = 0; r < count; ++r) {
      const std::uint32_t x = load_u32(rows[r] + 4 * std::size_t{j});
      if (l2) {
        const std::uint32_t e = score::ferry_rescore_sub_step(q, x);
        s[r] = score::ferry_rescore_fma_step(e, e, s[r]);
      } else {
        s[r] = score::ferry_rescore_fma_step(q, x, s[r]);
      }
    }
  }
  for (std::uint32_t r = 0; r < count; ++r) scores[r] = s[r];
}

// The FMA instruction where the CPU has it (std::fma is a library call otherwise): a variant
// compiled for it, chosen by a run-time check (not an ifunc: resolvers run before the sanitizers'
// runtimes are ready).
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("fma")]] void score_float_block_fma(const RescoreArgs& args, const std::byte* query,
                                                  const std::byte* const* rows,
                                                  std::uint32_t count, std::uint32_t* scores) {
  score_float_block_body(args, query, rows, count, scores);
}
#endif

void score_float_block(const RescoreArgs& args, const std::byte* query,
                       const std::byte* const* rows, std::uint32_t count, std::uint32_t* scores) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool fma = __builtin_cpu_supports("fma");
  if (fma) return score_float_block_fma(args, query, rows, count, scores);
#endif
  score_float_block_body(args, query, rows, count, scores);
}

// int32 score of one int8 row (exact: any order of additions gives it).
std::uint32_t score_int8(const RescoreArgs& args, const std::byte* query, const std::byte* row) {
  std::int32_t s = 0;
  const auto* q = reinterpret_cast<const std::int8_t*>(query);
  const auto* x = reinterpret_cast<const std::int8_t*>(row);
  if (args.metric == RescoreMetric::l2) {
    for (std::uint32_t j = 0; j < args.dims; ++j) {
      const std::int32_t e = std::int32_t{q[j]} - std::int32_t{x[j]};
      s += e * e;
    }
  } else {
    for (std::uint32_t j = 0; j < args.dims; ++j) s += std::int32_t{q[j]} * std::int32_t{x[j]};
  }
  return static_cast<std::uint32_t>(s);
}

struct Ranked {
  std::uint64_t key = 0;  // score key << 32 | row index: ascending is rank order
  std::uint32_t score = 0;
  bool operator<(const Ranked& other) const { return key < other.key; }
};

// One range's memory, allocated before any thread runs, so that ranking allocates nothing.
struct Work {
  std::vector<std::uint32_t> rows;
  std::vector<std::uint32_t> scores;
  std::vector<Ranked> ranked;
  explicit Work(std::uint32_t candidates)
      : rows(candidates), scores(candidates), ranked(candidates) {}
};

void rank_query(const RescoreArgs& args, std::span<const std::span<std::byte>> bindings,
                Work& work, std::uint32_t q) noexcept {
  const bool is_float = args.element == RescoreElement::float32;
  const bool larger_better = args.metric == RescoreMetric::inner_product;
  const std::byte* query = bindings[0].data() + q * args.query_stride;
  const std::byte* database = bindings[1].data();
  const std::byte* candidates = bindings[2].data() + std::size_t{q} * args.candidates * 4;
  // The distinct valid rows, in index order (which also reads the database in order).
  std::size_t count = 0;
  for (std::uint32_t c = 0; c < args.candidates; ++c) {
    const std::uint32_t row = load_u32(candidates + 4 * std::size_t{c});
    if (row < args.rows) work.rows[count++] = row;
  }
  std::sort(work.rows.begin(), work.rows.begin() + count);
  count = std::unique(work.rows.begin(), work.rows.begin() + count) - work.rows.begin();
  if (is_float) {
    const std::byte* block[kBlock];
    for (std::size_t first = 0; first < count; first += kBlock) {
      const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(kBlock, count - first));
      for (std::uint32_t r = 0; r < n; ++r)
        block[r] = database + work.rows[first + r] * args.database_stride;
      score_float_block(args, query, block, n, work.scores.data() + first);
    }
  } else {
    for (std::size_t i = 0; i < count; ++i)
      work.scores[i] = score_int8(args, query, database + work.rows[i] * args.database_stride);
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t key = score::ferry_rescore_key(work.scores[i], is_float, larger_better);
    work.ranked[i] = {std::uint64_t{key} << 32 | work.rows[i], work.scores[i]};
  }
  const std::size_t kept = std::min<std::size_t>(args.k, count);
  std::partial_sort(work.ranked.begin(), work.ranked.begin() + kept, work.ranked.begin() + count);
  std::byte* scores = bindings[3].data() + std::size_t{q} * args.k * 4;
  std::byte* indices = bindings[4].data() + std::size_t{q} * args.k * 4;
  for (std::uint32_t i = 0; i < args.k; ++i) {
    const bool real = i < kept;
    store_u32(scores + 4 * std::size_t{i}, real ? work.ranked[i].score : kRescoreNoScoreBits);
    store_u32(indices + 4 * std::size_t{i},
              real ? static_cast<std::uint32_t>(work.ranked[i].key) : kRescoreNoIndex);
  }
}

}  // namespace

void run_on_cpu(const RescoreArgs& args, std::span<const std::span<std::byte>> bindings) {
  // Ranges of queries spread over the host's threads when there is enough work (the results do
  // not depend on the split).
  const std::uint64_t work = std::uint64_t{args.queries} * args.candidates * args.dims;
  const unsigned threads =
      work < (1ull << 22) ? 1u : std::max(1u, std::thread::hardware_concurrency());
  const std::uint32_t ranges = std::min<std::uint32_t>(args.queries, 4 * threads);
  const std::uint32_t per = (args.queries + ranges - 1) / ranges;
  std::vector<Work> memory(ranges, Work(args.candidates));
  detail::parallel_for(ranges, threads, [&](std::size_t i) {
    const auto first = static_cast<std::uint32_t>(i * per);
    const std::uint32_t last = std::min<std::uint32_t>(args.queries, first + per);
    for (std::uint32_t q = first; q < last; ++q) rank_query(args, bindings, memory[i], q);
  });
}

}  // namespace ops
}  // namespace ferry
