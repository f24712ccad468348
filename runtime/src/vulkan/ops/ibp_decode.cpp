#include "vulkan/ops/ibp_decode.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/shaders/ibp_decode.comp.spv.h"
#include "ferry/shaders/ibp_decode_subgroup.comp.spv.h"
#include "ibp_decode_abi.h"
#include "vulkan/buffer.hpp"
#include "vulkan/spirv_layout.hpp"

namespace ferry::vulkan {
namespace {

using shaders::IbpDecodePushConstants;
constexpr spirv::PushConstantLayout kLayout =
    spirv::push_constant_layout(shaders::ibp_decode_spv);
static_assert(kLayout.found, "ibp_decode.comp must declare one push-constant block");
static_assert(kLayout.member_count == 19);
static_assert(kLayout.offsets[0] == offsetof(IbpDecodePushConstants, flags));
static_assert(kLayout.offsets[11] == offsetof(IbpDecodePushConstants, data_bytes));
static_assert(kLayout.offsets[18] == offsetof(IbpDecodePushConstants, teams_per_row));
constexpr spirv::PushConstantLayout kSubgroupLayout =
    spirv::push_constant_layout(shaders::ibp_decode_subgroup_spv);
static_assert(kSubgroupLayout.found && kSubgroupLayout.member_count == 19);
static_assert(kSubgroupLayout.offsets[18] == offsetof(IbpDecodePushConstants, teams_per_row));
static_assert(FERRY_IBP_DECODE_WORKGROUP_SIZE == ops::kIbpDecodeSliceLanes);

// lavapipe ends a shader's loops after this many iterations in all (see rescore).
constexpr std::uint64_t kLavapipeLoopIterations = 65535;

constexpr const char* kShaderVariable = "FERRY_VULKAN_IBP_DECODE";

// FERRY_VULKAN_IBP_DECODE: true for "portable", false for "subgroup" or unset.
Result<bool> portable_asked() {
  const char* value = std::getenv(kShaderVariable);
  if (value == nullptr || value[0] == '\0' || std::string_view(value) == "subgroup") return false;
  if (std::string_view(value) == "portable") return true;
  return Status(ErrorCode::invalid_argument, std::string(kShaderVariable) + ": '" + value +
                                                 "' is not portable or subgroup");
}

}  // namespace

Status IbpDecodePipeline::create(const DeviceContext& context) {
  context_ = &context;
  limits_.offset_alignment = context.limits.minStorageBufferOffsetAlignment;
  limits_.max_window_bytes = context.limits.maxStorageBufferRange;
  limits_.max_group_count =
      std::min<std::uint32_t>(context.limits.maxComputeWorkGroupCount[0], 65535);
  loop_limit_ = context.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE ? kLavapipeLoopIterations : 0;
  FERRY_ASSIGN_OR_RETURN(const bool portable, portable_asked());
  shader_ = choose_ibp_decode_shader(context.subgroups,
                                     context.limits.maxComputeWorkGroupInvocations, portable);
  // Binding 0: the stream window, 1: the output, 2: the status, 3: the indices, 4: the tables.
  if (shader_.subgroup_size == 0) {
    FERRY_RETURN_IF_ERROR(
        program_.create(context, shaders::ibp_decode_spv, 5, sizeof(IbpDecodePushConstants)));
    FERRY_ASSIGN_OR_RETURN(pipeline_, program_.make_pipeline());
    return Status();
  }
  FERRY_RETURN_IF_ERROR(program_.create(context, shaders::ibp_decode_subgroup_spv, 5,
                                        sizeof(IbpDecodePushConstants)));
  const std::array<std::uint32_t, 3> constants = {shader_.subgroup_size, shader_.teams,
                                                  shader_.subgroup_size * shader_.teams};
  const std::array<VkSpecializationMapEntry, 3> entries = {{
      {FERRY_IBP_DECODE_SUBGROUP_ID, 0, sizeof(std::uint32_t)},
      {FERRY_IBP_DECODE_TEAMS_ID, 4, sizeof(std::uint32_t)},
      {FERRY_IBP_DECODE_WORKGROUP_ID, 8, sizeof(std::uint32_t)},
  }};
  VkSpecializationInfo specialization{};
  specialization.mapEntryCount = static_cast<std::uint32_t>(entries.size());
  specialization.pMapEntries = entries.data();
  specialization.dataSize = sizeof(constants);
  specialization.pData = constants.data();
  Result<VkPipeline> pipeline = program_.make_pipeline(&specialization, shader_.subgroup_size);
  if (!pipeline.ok()) {
    Status status = pipeline.status();
    status.with_context("ibp_decode on Vulkan: making the pipeline for subgroups of " +
                        std::to_string(shader_.subgroup_size));
    return status;
  }
  pipeline_ = *pipeline;
  return Status();
}

void IbpDecodePipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) {
    context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  }
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

namespace {
// The bindings core gives ibp_decode: stream, output, status, the indices of a gather, then the
// tables scratch (VulkanDevice::uses_optional_scratch) for a stream in host memory.
std::size_t fixed_bindings(const ops::IbpDecodeArgs& args) { return args.gather() ? 4u : 3u; }
}  // namespace

Result<std::vector<IbpDecodeDispatch>> IbpDecodePipeline::plan(
    const ops::IbpDecodeArgs& args, std::span<const backend::Binding> bindings) const {
  const std::size_t fixed = fixed_bindings(args);
  const bool tables_scratch = bindings.size() == fixed + 1;
  if ((bindings.size() != fixed && !tables_scratch) ||
      (tables_scratch && bindings[fixed].size < ops::ibp_tables_copy_bytes(args))) {
    return Status(ErrorCode::internal,
                  "ibp_decode on Vulkan: " + std::to_string(bindings.size()) + " bindings");
  }
  return plan_ibp_decode(args, bindings[0].offset, bindings[1].offset, bindings[2].offset,
                         args.gather() ? bindings[3].offset : 0, limits_, shader_,
                         tables_scratch ? std::optional(bindings[fixed].offset) : std::nullopt);
}

Status IbpDecodePipeline::check(const ops::IbpDecodeArgs& args,
                                std::span<const backend::Binding> bindings) const {
  FERRY_ASSIGN_OR_RETURN(const std::vector<IbpDecodeDispatch> dispatches, plan(args, bindings));
  if (loop_limit_ > 0) {
    for (const IbpDecodeDispatch& dispatch : dispatches) {
      const std::uint64_t iterations = ibp_decode_loop_iterations(dispatch, shader_);
      if (iterations > loop_limit_) {
        return Status(ErrorCode::unavailable,
                      "lavapipe ends a shader's loops after " + std::to_string(loop_limit_) +
                          " iterations, and decoding " + std::to_string(dispatch.push.items) +
                          " rows of " + std::to_string(args.layout.row_elements) +
                          " elements may need " + std::to_string(iterations) +
                          ": fewer or shorter rows per ibp_decode");
      }
    }
  }
  return Status();
}

Status IbpDecodePipeline::record(VkCommandBuffer command_buffer, const ops::IbpDecodeArgs& args,
                                 std::span<const backend::Binding> bindings) const {
  FERRY_ASSIGN_OR_RETURN(const std::vector<IbpDecodeDispatch> dispatches, plan(args, bindings));
  auto handle = [&](std::size_t i) {
    return static_cast<const VulkanBuffer*>(bindings[i].buffer)->handle();
  };
  const VolkDeviceTable& vk = context_->vk;
  const std::size_t fixed = fixed_bindings(args);
  if (bindings.size() > fixed) {
    // The stream is in host memory: its tables cross the bus once, here, not with every row
    // (the row table too, unless a gather of few rows reads its entries in place).
    VkBufferCopy region{};
    region.srcOffset = bindings[0].offset;
    region.dstOffset = bindings[fixed].offset;
    region.size = ops::ibp_tables_copy_bytes(args);
    vk.vkCmdCopyBuffer(command_buffer, handle(0), handle(fixed), 1, &region);
    VkMemoryBarrier2 copied{};
    copied.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
    copied.srcStageMask = VK_PIPELINE_STAGE_2_COPY_BIT;
    copied.srcAccessMask = VK_ACCESS_2_TRANSFER_WRITE_BIT;
    copied.dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
    copied.dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT;
    record_memory_barrier(vk, command_buffer, copied);
  }
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  for (std::size_t d = 0; d < dispatches.size(); ++d) {
    const IbpDecodeDispatch& dispatch = dispatches[d];
    // The status clear binds the first decode dispatch's output and indices windows (a binding
    // must be valid; it touches neither).
    const IbpDecodeDispatch& windows_of = d == 0 && dispatches.size() > 1 ? dispatches[1] : dispatch;
    std::array<VkDescriptorBufferInfo, 5> windows{};
    windows[0] = {handle(0), dispatch.stream.offset, dispatch.stream.size};
    windows[1] = {handle(1), windows_of.output.offset, windows_of.output.size};
    windows[2] = {handle(2), dispatch.status.offset, dispatch.status.size};
    // Without a gather binding 3 is the (read-only) stream window, never read through it.
    windows[3] = args.gather()
                     ? VkDescriptorBufferInfo{handle(3), windows_of.indices.offset,
                                              windows_of.indices.size}
                     : windows[0];
    windows[4] = {handle(bindings.size() > fixed ? fixed : 0), dispatch.tables.offset,
                  dispatch.tables.size};
    // Every dispatch ORs into the status (the first writes it), and consecutive output windows
    // may share a word.
    if (d > 0) record_compute_barrier(vk, command_buffer);
    program_.push_storage_buffers(command_buffer, windows);
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(dispatch.push), &dispatch.push);
    vk.vkCmdDispatch(command_buffer, dispatch.group_count, 1, 1);
  }
  return Status();
}

}  // namespace ferry::vulkan
