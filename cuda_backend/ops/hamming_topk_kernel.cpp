#include "hamming_topk_kernel.hpp"

#include <algorithm>
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

}  // namespace

Status HammingTopkKernel::create(unsigned sm_count) {
  sm_count_ = sm_count;
  if (const cudaError_t error = prepare_hamming_scan(support_); error != cudaSuccess) {
    return cuda_status(error, "prepare_hamming_scan (hamming_topk kernel)");
  }
  if (feature_hidden("b1mma")) support_.mma = false;
  return Status();
}

Status HammingTopkKernel::record(const ops::HammingTopkArgs& args,
                                 std::span<const backend::Binding> bindings,
                                 cudaStream_t stream) const {
  // The scan's tile: 32 queries for a small k, 8 beyond (measured on an H100, 1000 x 1M x
  // 256-bit: k = 10 fastest with 32, k = 100 and 1000 with 8, whose buffers are smaller and
  // whose spans are longer, so their thresholds settle sooner); fewer while the device's shared
  // memory cannot take the block.
  const unsigned cap = ops::hamming_scan_cap(args.k, kHammingScanRoundRows);
  unsigned fragments = args.k <= 32 ? 4 : 1;
  while (fragments > 1 && hamming_scan_shared_bytes(fragments, cap, args.words) > support_.max_shared_bytes)
    fragments /= 2;
  const unsigned shared = hamming_scan_shared_bytes(fragments, cap, args.words);
  int blocks_per_sm = 0;
  if (const cudaError_t error = hamming_scan_blocks_per_sm(fragments, support_.mma, shared, blocks_per_sm);
      error != cudaSuccess) {
    return cuda_status(error, "hamming_scan_blocks_per_sm (hamming_topk kernel)");
  }
  if (blocks_per_sm < 1) {
    return Status(ErrorCode::unavailable,
                  "hamming_topk: the scan kernel needs " + std::to_string(shared) +
                      " bytes of shared memory per block; this device offers " +
                      std::to_string(support_.max_shared_bytes));
  }
  // Spans: two waves of blocks over the device (ops::hamming_scan_span).
  const unsigned tile = 8 * fragments;
  const std::uint32_t span = ops::hamming_scan_span(
      args.rows, args.queries, tile, kHammingScanRoundRows,
      std::uint64_t{sm_count_} * static_cast<unsigned>(blocks_per_sm));

  // The public call reserved the default plan's scratch (bound last, when it is not 0).
  const bool has_scratch = bindings.size() > 4;
  ops::HammingTopkArgs planned = args;
  planned.scratch_budget = has_scratch ? bindings[4].size : 0;
  FERRY_ASSIGN_OR_RETURN(const ops::HammingTopkPlan plan,
                         ops::plan_hamming_topk(planned, "hamming_topk", span));
  HammingLaunch launch;
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
    const cudaError_t error = launch_hamming_topk(launch, stream);
    if (error != cudaSuccess) return cuda_status(error, "launch_hamming_topk (hamming_topk kernel)");
  }
  return Status();
}

}  // namespace ferry::cuda
