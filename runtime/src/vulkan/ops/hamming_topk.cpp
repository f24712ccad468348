#include "vulkan/ops/hamming_topk.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "ferry/shaders/hamming_topk.comp.spv.h"
#include "hamming_topk_abi.h"
#include "ops/hamming_topk.hpp"
#include "vulkan/buffer.hpp"
#include "vulkan/spirv_layout.hpp"

namespace ferry::vulkan {
namespace {

using shaders::HammingTopkPushConstants;
constexpr spirv::PushConstantLayout kLayout = spirv::push_constant_layout(shaders::hamming_topk_spv);
static_assert(kLayout.found, "hamming_topk.comp must declare one push-constant block");
static_assert(kLayout.member_count == 16);
static_assert(kLayout.offsets[0] == offsetof(HammingTopkPushConstants, flags));
static_assert(kLayout.offsets[15] == offsetof(HammingTopkPushConstants, scratch_word));
// The shader's constants are the plan's.
static_assert(FERRY_HAMMING_WORKGROUP_SIZE == ops::kHammingWorkgroupSize);
static_assert(FERRY_HAMMING_CHUNK_ROWS == ops::kHammingChunkRows);
static_assert(FERRY_HAMMING_QUERY_TILE == ops::kHammingQueryTile);
static_assert(FERRY_HAMMING_MERGE_GROUP == ops::kHammingMergeGroup);
static_assert(FERRY_HAMMING_MAX_BITS == kHammingMaxCodeBits);
static_assert(FERRY_HAMMING_MAX_K == kHammingMaxK);

// The shader's shared memory: histogram, tie mask, keys, query tile, partial sums, 4 words.
constexpr std::uint32_t kSharedBytes =
    4 * ((kHammingMaxCodeBits + 1) + ops::kHammingMergeGroup / 32 + kHammingMaxK +
         ops::kHammingQueryTile * kHammingMaxCodeBits / 32 + ops::kHammingWorkgroupSize + 4);

constexpr std::array<const char*, 5> kRoles = {"queries", "database", "distances", "indices",
                                               "scratch"};

// A binding's window: bound from its offset rounded down to the device's alignment.
struct Window {
  VkDescriptorBufferInfo info{};
  std::uint32_t first_word = 0;  // where the binding's data starts in the window
};

Window window_of(const backend::Binding& binding, std::uint64_t alignment) {
  Window window;
  const std::uint64_t start = binding.offset - binding.offset % alignment;
  window.info.buffer = static_cast<const VulkanBuffer*>(binding.buffer)->handle();
  window.info.offset = start;
  window.info.range = binding.offset - start + binding.size;
  window.first_word = static_cast<std::uint32_t>((binding.offset - start) / 4);
  return window;
}

}  // namespace

Status HammingTopkPipeline::create(const DeviceContext& context) {
  context_ = &context;
  const VkPhysicalDeviceLimits& limits = context.limits;
  offset_alignment_ = std::max<std::uint64_t>(limits.minStorageBufferOffsetAlignment, 4);
  max_window_bytes_ = limits.maxStorageBufferRange;
  max_groups_x_ = std::min<std::uint32_t>(limits.maxComputeWorkGroupCount[0], 65535);
  max_groups_y_ = limits.maxComputeWorkGroupCount[1];
  FERRY_RETURN_IF_ERROR(program_.create(context, shaders::hamming_topk_spv, 5,
                                        sizeof(HammingTopkPushConstants)));
  if (limits.maxComputeSharedMemorySize < kSharedBytes ||
      limits.maxComputeWorkGroupInvocations < ops::kHammingWorkgroupSize) {
    return Status();  // check() says why
  }
  FERRY_ASSIGN_OR_RETURN(pipeline_, program_.make_pipeline());
  return Status();
}

void HammingTopkPipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

Status HammingTopkPipeline::check(const ops::HammingTopkArgs&,
                                  std::span<const backend::Binding> bindings) const {
  if (pipeline_ == VK_NULL_HANDLE) {
    return Status(ErrorCode::unavailable,
                  "the device's compute shared memory (" +
                      std::to_string(context_->limits.maxComputeSharedMemorySize) +
                      " bytes) or workgroup size is below what the search shader needs (" +
                      std::to_string(kSharedBytes) + " bytes, 256 invocations)");
  }
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Window window = window_of(bindings[i], offset_alignment_);
    if (window.info.range > max_window_bytes_ || window.info.range / 4 > 0xFFFFFFFFull) {
      return Status(ErrorCode::unavailable,
                    std::string("the ") + kRoles[std::min<std::size_t>(i, 4)] + " binding of " +
                        std::to_string(bindings[i].size) + " bytes exceeds the device's " +
                        "maxStorageBufferRange (" + std::to_string(max_window_bytes_) +
                        " bytes): search the database in parts");
    }
  }
  return Status();
}

Status HammingTopkPipeline::record(VkCommandBuffer command_buffer, const ops::HammingTopkArgs& args,
                                   std::span<const backend::Binding> bindings) const {
  FERRY_ASSIGN_OR_RETURN(const ops::HammingTopkPlan plan,
                         ops::plan_hamming_topk(args, "hamming_topk"));
  if (plan.scratch_bytes > 0 && bindings.size() < 5) {
    return Status(ErrorCode::internal, "hamming_topk: the plan needs scratch memory, none bound");
  }
  const VolkDeviceTable& vk = context_->vk;
  std::array<Window, 5> windows{};
  for (std::size_t i = 0; i < 4; ++i) windows[i] = window_of(bindings[i], offset_alignment_);
  // Without scratch the shader's scratch binding is never touched; any valid window will do.
  windows[4] = plan.scratch_bytes > 0 ? window_of(bindings[4], offset_alignment_) : windows[3];
  std::array<VkDescriptorBufferInfo, 5> infos{};
  for (std::size_t i = 0; i < infos.size(); ++i) infos[i] = windows[i].info;
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  program_.push_storage_buffers(command_buffer, infos);
  for (std::size_t p = 0; p < plan.passes.size(); ++p) {
    const ops::HammingPass& pass = plan.passes[p];
    if (p > 0) {
      // Each pass reads the candidates the one before wrote, and overwrites what an earlier one
      // read.
      record_compute_barrier(vk, command_buffer);
    }
    HammingTopkPushConstants push{};
    push.flags = (pass.from_codes ? FERRY_HAMMING_FROM_CODES : 0u) |
                 (pass.final ? FERRY_HAMMING_FINAL : 0u);
    push.words = args.words;
    push.k = args.k;
    push.items = pass.items;
    push.groups = pass.groups;
    push.query_begin = pass.query_begin;
    push.query_count = pass.query_count;
    push.in_base = pass.in_base;
    push.in_stride = pass.in_stride;
    push.out_base = pass.out_base;
    push.out_stride = pass.out_stride;
    push.queries_word = windows[0].first_word;
    push.database_word = windows[1].first_word;
    push.distances_word = windows[2].first_word;
    push.indices_word = windows[3].first_word;
    push.scratch_word = windows[4].first_word;
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(push), &push);
    const std::uint32_t rows_of_groups =
        pass.from_codes ? (pass.query_count + ops::kHammingQueryTile - 1) / ops::kHammingQueryTile
                        : pass.query_count;
    if (rows_of_groups > max_groups_y_) {
      return Status(ErrorCode::internal, "hamming_topk: a slice of " +
                                             std::to_string(pass.query_count) +
                                             " queries exceeds the device's grid");
    }
    vk.vkCmdDispatch(command_buffer, std::min(pass.groups, max_groups_x_), rows_of_groups, 1);
  }
  return Status();
}

}  // namespace ferry::vulkan
