#include "hamming_topk_kernel.hpp"

#include <string>

#include "../buffer.hpp"
#include "../status.hpp"
#include "hamming_topk_launch.hpp"
#include "ops/hamming_topk.hpp"

namespace ferry::cuda {

static_assert(kHammingBlock == ops::kHammingWorkgroupSize);
static_assert(kHammingChunk == ops::kHammingChunkRows);
static_assert(kHammingTile == ops::kHammingQueryTile);
static_assert(kHammingMerge == ops::kHammingMergeGroup);
static_assert(kHammingBits == kHammingMaxCodeBits);
static_assert(kHammingK == kHammingMaxK);

Status HammingTopkKernel::create(unsigned) { return Status(); }

Status HammingTopkKernel::record(const ops::HammingTopkArgs& args,
                                 std::span<const backend::Binding> bindings,
                                 cudaStream_t stream) const {
  FERRY_ASSIGN_OR_RETURN(const ops::HammingTopkPlan plan,
                         ops::plan_hamming_topk(args, "hamming_topk"));
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
    if (bindings.size() < 5) {
      return Status(ErrorCode::internal, "hamming_topk: the plan needs scratch memory, none bound");
    }
    FERRY_ASSIGN_OR_RETURN(std::byte* scratch, binding_address(bindings[4], "hamming_topk scratch"));
    launch.scratch = reinterpret_cast<std::uint32_t*>(scratch);
  }
  launch.words = args.words;
  launch.k = args.k;
  for (const ops::HammingPass& pass : plan.passes) {
    launch.from_codes = pass.from_codes;
    launch.final = pass.final;
    launch.items = pass.items;
    launch.groups = pass.groups;
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
