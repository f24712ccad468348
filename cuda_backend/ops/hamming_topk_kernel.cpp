#include "hamming_topk_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../buffer.hpp"
#include "../status.hpp"
#include "hamming_topk_launch.hpp"
#include "ops/hamming_topk.hpp"

namespace ferry::cuda {

static_assert(kHammingBlock == ops::kHammingWorkgroupSize);
static_assert(kHammingMerge == ops::kHammingMergeGroup);
static_assert(kHammingBits == kHammingMaxCodeBits);
static_assert(kHammingK == kHammingMaxK);
static_assert(kHammingScanLocalBits == ops::kHammingScanPositionBits);
static_assert(kHammingScanMaxSpan == ops::kHammingScanMaxSpan);

namespace {

bool feature_hidden(std::string_view feature) {
  const char* hidden = std::getenv("FERRY_CUDA_HIDE_FEATURES");
  if (hidden == nullptr) return false;
  const std::string_view list(hidden);
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    if (list.substr(at, end - at) == feature) return true;
    at = end + 1;
  }
  return false;
}

// The queries, database and outputs (the first four bindings) into `launch`.
Status bind_operands(std::span<const backend::Binding> bindings, HammingLaunch& launch) {
  const char* roles[] = {"hamming_topk queries", "hamming_topk database",
                         "hamming_topk distances", "hamming_topk indices"};
  std::byte* addresses[4] = {};
  for (int i = 0; i < 4; ++i) {
    FERRY_ASSIGN_OR_RETURN(addresses[i], binding_address(bindings[i], roles[i]));
  }
  launch.queries = reinterpret_cast<const std::uint32_t*>(addresses[0]);
  launch.database = reinterpret_cast<const std::uint32_t*>(addresses[1]);
  launch.distances = reinterpret_cast<std::uint32_t*>(addresses[2]);
  launch.indices = reinterpret_cast<std::uint32_t*>(addresses[3]);
  return Status();
}

Status launch_pass(const HammingLaunch& launch, cudaStream_t stream) {
  const cudaError_t error = launch_hamming_topk(launch, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_hamming_topk (hamming_topk kernel)");
  return Status();
}

// Query tiles per block for a slice of `queries`: as many of the block's warps as there are
// tiles (the block's other warps take neighbouring spans of those tiles).
unsigned tiles_per_block(unsigned queries, unsigned tile, unsigned warps) {
  const unsigned tiles = (queries + tile - 1) / tile;
  unsigned per_block = warps;
  while (per_block > 1 && per_block / 2 >= tiles) per_block /= 2;
  return per_block;
}

// The bound passes of `launch`'s slice (its minima and sample groups set): the sample pass, the
// scan kernel over the first `sample_rows` rows, a span per group (many short warps, as each step
// waits for its rows), then the pass picking each query's bound (and zeroing its pool's count).
// Returns where the bounds are.
Result<std::uint32_t*> launch_bound_passes(const HammingLaunch& launch, std::uint32_t sample_rows,
                                           cudaStream_t stream) {
  constexpr std::uint32_t kSampleGroupRows = ops::kHammingBoundGroupRows;
  static_assert(kSampleGroupRows % kHammingScanStepRows == 0);
  HammingLaunch sample = launch;
  sample.from_codes = true;
  sample.sample = true;
  sample.final = false;
  sample.pooled = false;
  sample.bounds = nullptr;
  sample.items = sample_rows;
  sample.group_items = kSampleGroupRows;
  sample.groups = (sample_rows + kSampleGroupRows - 1) / kSampleGroupRows;
  FERRY_RETURN_IF_ERROR(launch_pass(sample, stream));
  HammingLaunch bound = launch;
  bound.bound = true;
  bound.from_codes = false;
  bound.bounds = launch.minima + launch.sample_groups;  // query q's at q * sample_stride
  FERRY_RETURN_IF_ERROR(launch_pass(bound, stream));
  return bound.bounds;
}

}  // namespace

Status HammingTopkKernel::create(unsigned sm_count) {
  sm_count_ = sm_count;
  if (const cudaError_t error = prepare_hamming_scan(support_); error != cudaSuccess) {
    return cuda_status(error, "prepare_hamming_scan (hamming_topk kernel)");
  }
  search_path_ = support_.mma ? "binary tensor cores (mma.sync b1), pooled"
                              : "popcounts (binary tensor-core products need sm_80 or later and "
                                "code built for it)";
  if (support_.mma && feature_hidden("b1mma")) {
    support_.mma = false;
    search_path_ = "popcounts (FERRY_CUDA_HIDE_FEATURES=b1mma)";
  }
  // FERRY_CUDA_HAMMING_SCAN (for tests and measurements; unset or pooled: the default).
  if (const char* forced = std::getenv("FERRY_CUDA_HAMMING_SCAN"); forced != nullptr) {
    const std::string_view value(forced);
    if (value == "buffered") scan_ = Scan::buffered;
    if (value == "pooled-exact") scan_ = Scan::pooled_exact;
    if (value == "pooled-plain") scan_ = Scan::pooled_plain;
  }
  return Status();
}

Result<bool> HammingTopkKernel::record_pooled(const ops::HammingTopkArgs& args,
                                              std::span<const backend::Binding> bindings,
                                              cudaStream_t stream) const {
  // The pools (ops::HammingPoolShape) wherever their shape exists (the public call then offered
  // scratch for them), unless a test forces another scan (scan_).
  constexpr std::uint32_t kMinSlice = 32;
  const ops::HammingPoolShape shape = ops::hamming_pool_shape(args);
  if (!support_.mma || shape.pool_cap == 0 || bindings.size() <= 4 || scan_ == Scan::buffered) {
    return false;
  }
  const std::uint32_t groups = shape.sample_groups;
  const std::uint64_t pool_cap = shape.pool_cap;
  const std::uint64_t per_query = shape.words_per_query;
  FERRY_ASSIGN_OR_RETURN(std::byte* scratch, binding_address(bindings[4], "hamming_topk scratch"));
  const std::uint64_t fits = bindings[4].size / (4 * per_query);
  if (fits < kMinSlice && fits < args.queries) return false;
  // Slices of equal size (each re-reads the database: the same total scan work).
  const std::uint64_t most = std::min<std::uint64_t>(fits, 65535);
  const std::uint64_t slices = (args.queries + most - 1) / most;
  const auto slice = static_cast<std::uint32_t>((args.queries + slices - 1) / slices);

  // Warps keep no buffers: tiles of 32 queries where a slice holds at least 512 (half the row
  // loads and votes per distance of 16: on the H200, 1000 x 1M x 256-bit in one slice, k = 10
  // 0.375 ms against 0.539, 109M warp instructions against 158M), else 16 (k = 100 in slices of
  // 334 queries: 1.17 ms against 1.67 with 32), fewer for a small search; 4 warps a block.
  unsigned fragments = slice >= 512 ? 4 : 2;
  while (fragments > 1 && 8 * (fragments / 2) >= slice) fragments /= 2;
  const unsigned warps = kHammingScanWarps;
  // The staged scan where the database fits in 3/4 of the L2 cache (1M x 256-bit on the H200,
  // k = 10 / 100 / 1000: 0.333 / 0.632 / 1.02 ms against 0.379 / 1.20 / 1.57 plain); past it the
  // plain scan, whose block of warps reads its rows once through the L1 cache that the staged
  // scan's shared memory takes (10M x 256-bit, k = 10: 2.54 ms plain against 3.08 staged;
  // 1M x 1024-bit 1.62 against 3.01).
  const bool staged =
      scan_ != Scan::pooled_plain &&
      std::uint64_t{args.rows} * args.words * 4 <= std::uint64_t{support_.l2_bytes} / 4 * 3;
  const unsigned shared = hamming_scan_shared_bytes(fragments, 0, args.words, staged, warps);
  int blocks_per_sm = 0;
  if (const cudaError_t error =
          hamming_scan_blocks_per_sm(fragments, true, staged, warps, shared, blocks_per_sm);
      error != cudaSuccess) {
    return cuda_status(error, "hamming_scan_blocks_per_sm (hamming_topk kernel)");
  }
  if (blocks_per_sm < 1 || shared > support_.max_shared_bytes) return false;
  const unsigned tile = 8 * fragments;
  const std::uint32_t span = ops::hamming_scan_span(
      args.rows, slice, tile, kHammingScanStepRows,
      std::uint64_t{sm_count_} * static_cast<unsigned>(blocks_per_sm) * warps / 2);

  HammingLaunch launch;
  FERRY_RETURN_IF_ERROR(bind_operands(bindings, launch));
  launch.scratch = reinterpret_cast<std::uint32_t*>(scratch);
  launch.words = args.words;
  launch.k = args.k;
  launch.mma = true;
  launch.staged = staged;
  launch.fragments = fragments;
  launch.cap = 0;
  launch.warps = warps;
  launch.pool_cap = scan_ == Scan::pooled_exact ? 0 : static_cast<std::uint32_t>(pool_cap);
  launch.pool = launch.scratch;
  launch.pool_counts = launch.scratch + std::uint64_t{slice} * pool_cap;
  launch.minima = launch.pool_counts + slice;
  launch.sample_stride = groups + 1;
  launch.sample_groups = groups;
  for (std::uint32_t begin = 0; begin < args.queries; begin += slice) {
    launch.query_begin = begin;
    launch.query_count = std::min(slice, args.queries - begin);
    launch.tiles_per_block = tiles_per_block(launch.query_count, tile, warps);
    // The bound passes (zeroing the pools' counts), the scan filling the pools, the selection.
    HammingLaunch scan = launch;
    FERRY_ASSIGN_OR_RETURN(scan.bounds, launch_bound_passes(launch, shape.sample_rows, stream));
    scan.from_codes = true;
    scan.pooled = true;
    scan.items = args.rows;
    scan.group_items = span;
    scan.groups = (args.rows + span - 1) / span;
    FERRY_RETURN_IF_ERROR(launch_pass(scan, stream));
    HammingLaunch select = launch;
    select.select = true;
    select.items = args.rows;
    FERRY_RETURN_IF_ERROR(launch_pass(select, stream));
  }
  return true;
}

Status HammingTopkKernel::record(const ops::HammingTopkArgs& args,
                                 std::span<const backend::Binding> bindings,
                                 cudaStream_t stream) const {
  FERRY_ASSIGN_OR_RETURN(const bool pooled, record_pooled(args, bindings, stream));
  if (pooled) return Status();
  // A warp's tile: 16 queries up to k = 128 (on the H200, 1000 x 1M x 256-bit, k = 10: 0.60 ms
  // against 0.70 with 32, whose buffers take more shared memory and so fewer warps per SM, and
  // 0.87 with 8), 8 beyond (a larger k needs larger key buffers), and no more than the search
  // has. A block: 4 warps, fewer while its shared memory does not fit the device; then smaller
  // tiles.
  unsigned fragments = args.k <= 128 ? 2 : 1;
  while (fragments > 1 && 8 * (fragments / 2) >= args.queries) fragments /= 2;
  unsigned warps = kHammingScanWarps;
  const unsigned cap = ops::hamming_scan_cap(args.k, kHammingScanStepRows);
  while (hamming_scan_shared_bytes(fragments, cap, args.words, false, warps) >
             support_.max_shared_bytes &&
         (warps > 1 || fragments > 1)) {
    if (warps > 1) {
      warps /= 2;
    } else {
      fragments /= 2;
    }
  }
  const unsigned shared =
      hamming_scan_shared_bytes(fragments, cap, args.words, false, warps);
  int blocks_per_sm = 0;
  if (const cudaError_t error =
          hamming_scan_blocks_per_sm(fragments, support_.mma, false, warps, shared, blocks_per_sm);
      error != cudaSuccess) {
    return cuda_status(error, "hamming_scan_blocks_per_sm (hamming_topk kernel)");
  }
  if (blocks_per_sm < 1) {
    return Status(ErrorCode::unavailable,
                  "hamming_topk: the scan kernel needs " + std::to_string(shared) +
                      " bytes of shared memory per block; this device offers " +
                      std::to_string(support_.max_shared_bytes));
  }
  // Spans: one wave of warps over the device (ops::hamming_scan_span makes two waves of the
  // number it is given). With the bounds every warp does about the same work, and fewer spans
  // mean fewer candidates to merge (and to hold in scratch).
  const unsigned tile = 8 * fragments;
  const std::uint32_t span = ops::hamming_scan_span(
      args.rows, args.queries, tile, kHammingScanStepRows,
      std::uint64_t{sm_count_} * static_cast<unsigned>(blocks_per_sm) * warps / 2);

  // The public call reserved the default plan's scratch (bound last, when it is not 0). The
  // bound passes (tensor-core path) keep per query the minima of the sample's groups, then its
  // bound, in the scratch after the candidates.
  const bool has_scratch = bindings.size() > 4;
  ops::HammingTopkArgs planned = args;
  planned.scratch_budget = has_scratch ? bindings[4].size : 0;
  FERRY_ASSIGN_OR_RETURN(const ops::HammingTopkPlan plan,
                         support_.mma ? ops::plan_bounded_hamming_topk(planned, "hamming_topk", span, 1, 1)
                                      : ops::plan_hamming_topk(planned, "hamming_topk", span));
  const std::uint32_t sample_groups = plan.bound_groups;
  HammingLaunch launch;
  FERRY_RETURN_IF_ERROR(bind_operands(bindings, launch));
  if (plan.scratch_bytes > 0) {
    if (!has_scratch) {
      return Status(ErrorCode::internal, "hamming_topk: the plan needs scratch memory, none bound");
    }
    FERRY_ASSIGN_OR_RETURN(std::byte* scratch, binding_address(bindings[4], "hamming_topk scratch"));
    launch.scratch = reinterpret_cast<std::uint32_t*>(scratch);
  }
  launch.words = args.words;
  launch.k = args.k;
  launch.mma = support_.mma;
  launch.fragments = fragments;
  launch.cap = cap;
  launch.warps = warps;
  if (sample_groups != 0) {
    // Per query: sample_groups minima, then its bound.
    launch.sample_stride = sample_groups + 1;
    launch.sample_groups = sample_groups;
    launch.minima = launch.scratch + plan.extra_word_base;
  }
  for (const ops::HammingPass& pass : plan.passes) {
    launch.from_codes = pass.from_codes;
    launch.final = pass.final;
    launch.items = pass.items;
    launch.groups = pass.groups;
    launch.group_items = pass.group_items;
    launch.query_begin = pass.query_begin;
    launch.query_count = pass.query_count;
    launch.in_base = pass.in_base;
    launch.in_stride = pass.in_stride;
    launch.out_base = pass.out_base;
    launch.out_stride = pass.out_stride;
    launch.tiles_per_block = tiles_per_block(pass.query_count, tile, warps);
    launch.bounds = nullptr;
    if (pass.from_codes && sample_groups != 0) {  // the slice's bounds first
      FERRY_ASSIGN_OR_RETURN(
          launch.bounds,
          launch_bound_passes(launch, ops::hamming_bound_sample_rows(args.rows, sample_groups),
                              stream));
    }
    FERRY_RETURN_IF_ERROR(launch_pass(launch, stream));
  }
  return Status();
}

}  // namespace ferry::cuda
