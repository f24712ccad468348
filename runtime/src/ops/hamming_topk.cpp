// hamming_topk: the public call (validation, lowering) and the GPU backends' plan (the CPU
// reference is in hamming_topk_cpu.cpp).
#include "ferry/ops/hamming_topk.hpp"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "core/checked.hpp"
#include "core/op_record.hpp"
#include "ops/hamming_topk.hpp"

namespace ferry {

namespace {

constexpr const char* kCall = "ferry::hamming_topk";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

}  // namespace

Status hamming_topk(CommandList& commands, const HammingTopkBuffers& buffers,
                    const HammingTopkParams& params) {
  const std::uint32_t bits = params.code_bits;
  if (bits < kHammingMinCodeBits || bits > kHammingMaxCodeBits || bits % 64 != 0) {
    return invalid("code_bits " + std::to_string(bits) + " is not a multiple of 64 from " +
                   std::to_string(kHammingMinCodeBits) + " to " +
                   std::to_string(kHammingMaxCodeBits));
  }
  if (params.queries == 0) return invalid("queries must be > 0");
  if (params.database_rows == 0 || params.database_rows >= kHammingMaxDatabaseRows) {
    return invalid("database_rows " + std::to_string(params.database_rows) +
                   " is not from 1 to " + std::to_string(kHammingMaxDatabaseRows - 1));
  }
  if (params.k == 0 || params.k > kHammingMaxK) {
    return invalid("k " + std::to_string(params.k) + " is not from 1 to " +
                   std::to_string(kHammingMaxK));
  }
  const std::pair<const char*, std::uint64_t> offsets[] = {
      {"queries_offset", buffers.queries_offset},
      {"database_offset", buffers.database_offset},
      {"distances_offset", buffers.distances_offset},
      {"indices_offset", buffers.indices_offset}};
  for (const auto& [name, offset] : offsets) {
    if (offset % 4 != 0) {
      return invalid(std::string(name) + " " + std::to_string(offset) +
                     " is not a multiple of 4 bytes");
    }
  }
  const std::uint64_t code_bytes = bits / 8;
  const std::optional<std::uint64_t> query_bytes = detail::checked_mul(params.queries, code_bytes);
  const std::optional<std::uint64_t> database_bytes =
      detail::checked_mul(params.database_rows, code_bytes);
  const std::optional<std::uint64_t> output_bytes =
      detail::checked_mul(std::uint64_t{params.queries} * params.k, 4);
  if (!query_bytes || !database_bytes || !output_bytes) return invalid("the sizes overflow");

  ops::HammingTopkArgs args;
  args.words = bits / 32;
  args.queries = params.queries;
  args.rows = static_cast<std::uint32_t>(params.database_rows);
  args.k = params.k;
  FERRY_ASSIGN_OR_RETURN(args.scratch_budget, detail::scratch_slab_bytes(buffers.queries, kCall));
  FERRY_ASSIGN_OR_RETURN(const ops::HammingTopkPlan plan, ops::plan_hamming_topk(args, kCall));
  // A backend that pools (ops::HammingPoolShape) gets room for its pools where they pay, and
  // where the device's scratch has it now (else the plan's: the backend then pools in smaller
  // slices or not at all).
  FERRY_ASSIGN_OR_RETURN(const bool pools, detail::uses_optional_scratch(
                                               buffers.queries, ops::OpKind::hamming_topk, kCall));
  const std::uint64_t pool_bytes = pools ? ops::hamming_pool_scratch_bytes(args) : 0;

  const detail::BindingRequest bindings[] = {
      {&buffers.queries, buffers.queries_offset, *query_bytes, backend::Access::read, "queries"},
      {&buffers.database, buffers.database_offset, *database_bytes, backend::Access::read,
       "database"},
      {&buffers.distances, buffers.distances_offset, *output_bytes, backend::Access::write,
       "distances"},
      {&buffers.indices, buffers.indices_offset, *output_bytes, backend::Access::write,
       "indices"}};
  return detail::OpRecorder::record(commands, kCall, args, bindings, plan.scratch_bytes,
                                    pool_bytes);
}

namespace ops {

std::uint32_t hamming_level_items(std::uint32_t k, std::uint32_t items, std::uint32_t group) {
  const std::uint32_t full = items / group, rest = items % group;
  // At most `items`: each group keeps at most its own count.
  return full * hamming_kept(k, group) + hamming_kept(k, rest);
}

std::uint32_t hamming_scan_span(std::uint32_t rows, std::uint32_t queries, std::uint32_t tile,
                                std::uint32_t round_rows, std::uint64_t resident_groups) {
  // A slice has at most 65535 queries (plan_hamming_topk); the grid covers one slice.
  const std::uint64_t tiles = (std::min<std::uint64_t>(queries, 65535) + tile - 1) / tile;
  const std::uint64_t wanted = 2 * std::max<std::uint64_t>(resident_groups, 1);
  const std::uint64_t spans = std::max<std::uint64_t>(1, (wanted + tiles - 1) / tiles);
  std::uint64_t span = (std::uint64_t{rows} + spans - 1) / spans;
  span = (span + round_rows - 1) / round_rows * round_rows;
  span = std::max<std::uint64_t>(span, std::min(rows, kHammingChunkRows));
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(span, kHammingScanMaxSpan));
}

std::uint32_t hamming_bound_sample_groups(std::uint32_t rows, std::uint32_t k) {
  const std::uint32_t row_groups = static_cast<std::uint32_t>(
      (std::uint64_t{rows} + kHammingBoundGroupRows - 1) / kHammingBoundGroupRows);
  const std::uint32_t groups = std::min(row_groups, std::max(256u, 4 * k));
  return groups >= k ? groups : 0;
}

std::uint32_t hamming_bound_sample_rows(std::uint32_t rows, std::uint32_t groups) {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(std::uint64_t{groups} * kHammingBoundGroupRows, rows));
}

std::uint32_t hamming_pool_sample_groups(std::uint32_t rows, std::uint32_t k) {
  const std::uint32_t groups = hamming_bound_sample_groups(rows, k);
  if (groups == 0) return 0;
  const std::uint32_t row_groups = static_cast<std::uint32_t>(
      (std::uint64_t{rows} + kHammingBoundGroupRows - 1) / kHammingBoundGroupRows);
  const std::uint32_t scaled = std::min(kHammingPoolMaxSampleGroups,
                                        (row_groups + kHammingPoolSampleParts - 1) /
                                            kHammingPoolSampleParts);
  return std::min(row_groups, std::max(groups, scaled));
}

HammingPoolShape hamming_pool_shape(const HammingTopkArgs& args) {
  HammingPoolShape shape;
  const std::uint32_t groups = hamming_pool_sample_groups(args.rows, args.k);
  if (groups == 0) return shape;
  const std::uint64_t sample_rows = hamming_bound_sample_rows(args.rows, groups);
  const std::uint64_t parts = (args.rows + sample_rows - 1) / sample_rows;
  if (parts > kHammingPoolSampleParts) return shape;
  const std::uint64_t cap =
      std::bit_ceil(std::max<std::uint64_t>(kHammingMinPool, 3 * args.k * parts + args.k));
  if (cap > kHammingMaxPool) return shape;
  shape.sample_groups = groups;
  shape.sample_rows = static_cast<std::uint32_t>(sample_rows);
  shape.pool_cap = static_cast<std::uint32_t>(cap);
  shape.words_per_query = cap + 1 + groups + 1;
  shape.offered_words_per_query =
      std::max<std::uint64_t>(shape.words_per_query, cap + 1 + 2ull * groups + 2ull * args.k + 1);
  return shape;
}

std::uint64_t hamming_pool_scratch_bytes(const HammingTopkArgs& args) {
  const HammingPoolShape shape = hamming_pool_shape(args);
  if (shape.pool_cap == 0) return 0;
  const std::uint64_t per_query = 4 * shape.offered_words_per_query;
  const std::uint64_t all = std::min<std::uint64_t>(args.queries, 65535) * per_query;
  const std::uint64_t most = std::min(kHammingPoolScratchTarget, args.scratch_budget);
  if (per_query > most) return 0;
  return std::min(all, most / per_query * per_query);
}

std::uint32_t hamming_scan_min_cap(std::uint32_t k, std::uint32_t round_rows) {
  return std::max(k + round_rows, std::bit_ceil(k));
}

std::uint32_t hamming_scan_cap(std::uint32_t k, std::uint32_t round_rows) {
  return std::max((2 * k + 2 * round_rows + 31) / 32 * 32, std::bit_ceil(k));
}

Result<HammingTopkPlan> plan_hamming_topk(const HammingTopkArgs& args, const char* call,
                                          std::uint32_t level0_rows, std::uint32_t extra_words) {
  HammingTopkPlan plan;
  auto group_of = [&](std::size_t level) { return level == 0 ? level0_rows : kHammingMergeGroup; };
  auto groups_of = [](std::uint32_t items, std::uint32_t group) {
    return static_cast<std::uint32_t>((std::uint64_t{items} + group - 1) / group);
  };
  // The items per query each level reads (rows, then candidates), down to one group.
  std::vector<std::uint32_t> items = {args.rows};
  while (groups_of(items.back(), group_of(items.size() - 1)) > 1)
    items.push_back(hamming_level_items(args.k, items.back(), group_of(items.size() - 1)));
  // Two candidate arrays, used in turn: A holds level 0's output (the largest), B level 1's.
  const std::uint64_t stride_a = items.size() > 1 ? items[1] : 0;
  const std::uint64_t stride_b = items.size() > 2 ? items[2] : 0;
  const std::uint64_t per_query =
      (stride_a + stride_b) * kHammingCandidateBytes + std::uint64_t{extra_words} * 4;
  // A slice's queries are a grid dimension (at most 65535 on every API).
  std::uint32_t slice = std::min<std::uint32_t>(args.queries, 65535);
  if (per_query > 0) {
    // A few MiB per command, so that many searches recorded in one list share the scratch
    // slabs (each command holds its scratch until it completes); more for one query when it
    // needs it. Slices cost no extra database reads: level 0 reads each chunk once per query
    // tile, sliced or not. Entries are addressed with 32 bits.
    const std::uint64_t budget = std::min<std::uint64_t>(
        {args.scratch_budget, std::max(kHammingScratchTarget, per_query),
         (1ull << 31) * kHammingCandidateBytes});
    const std::uint64_t fits = budget / per_query;
    if (fits == 0) {
      return Status(ErrorCode::resource_exhausted,
                    std::string(call) + ": k = " + std::to_string(args.k) + " over " +
                        std::to_string(args.rows) + " rows needs " + std::to_string(per_query) +
                        " bytes of scratch memory per query; the device's scratch slabs hold " +
                        std::to_string(args.scratch_budget) +
                        " (DeviceOptions::scratch_slab_bytes): search the database in parts");
    }
    slice = static_cast<std::uint32_t>(std::min<std::uint64_t>(slice, fits));
    plan.scratch_bytes = slice * per_query;
  }
  const std::uint32_t b_base = static_cast<std::uint32_t>(slice * stride_a);
  plan.extra_word_base = std::uint64_t{slice} * (stride_a + stride_b) * 2;
  for (std::uint32_t begin = 0; begin < args.queries; begin += slice) {
    const std::uint32_t count = std::min(slice, args.queries - begin);
    for (std::size_t level = 0; level < items.size(); ++level) {
      HammingPass pass;
      pass.from_codes = level == 0;
      pass.final = level + 1 == items.size();
      pass.query_begin = begin;
      pass.query_count = count;
      pass.items = items[level];
      pass.group_items = group_of(level);
      pass.groups = groups_of(pass.items, pass.group_items);
      // Level 0 writes A, level 1 reads A and writes B, level 2 reads B and writes A, and so on.
      const bool reads_a = level % 2 == 1;
      pass.in_base = reads_a ? 0 : b_base;
      pass.in_stride = static_cast<std::uint32_t>(reads_a ? stride_a : stride_b);
      pass.out_base = level % 2 == 0 ? 0 : b_base;
      pass.out_stride = static_cast<std::uint32_t>(level % 2 == 0 ? stride_a : stride_b);
      plan.passes.push_back(pass);
    }
  }
  return plan;
}

Result<HammingTopkPlan> plan_bounded_hamming_topk(const HammingTopkArgs& args, const char* call,
                                                  std::uint32_t level0_rows,
                                                  std::uint32_t words_per_group,
                                                  std::uint32_t words_per_query) {
  const std::uint32_t groups = hamming_bound_sample_groups(args.rows, args.k);
  if (groups != 0) {
    Result<HammingTopkPlan> plan =
        plan_hamming_topk(args, call, level0_rows, groups * words_per_group + words_per_query);
    if (plan.ok()) {
      plan->bound_groups = groups;
      return plan;
    }
  }
  return plan_hamming_topk(args, call, level0_rows);
}

}  // namespace ops
}  // namespace ferry
