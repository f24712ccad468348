#include "vulkan/ops/fill.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "fill_abi.h"
#include "ferry/shaders/fill.comp.spv.h"
#include "vulkan/buffer.hpp"
#include "vulkan/ops/fill_plan.hpp"
#include "vulkan/spirv_layout.hpp"
#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

// The C++ push constants against the compiled shader (shaders/fill_abi.h checks
// them against the std430 offsets it expects; this checks the SPIR-V agrees).
using shaders::FillPushConstants;
constexpr spirv::PushConstantLayout kFillLayout = spirv::push_constant_layout(shaders::fill_spv);
static_assert(kFillLayout.found, "fill.comp must declare one push-constant block");
static_assert(kFillLayout.member_count == 4);
static_assert(kFillLayout.offsets[0] == offsetof(FillPushConstants, begin_byte));
static_assert(kFillLayout.offsets[1] == offsetof(FillPushConstants, end_byte));
static_assert(kFillLayout.offsets[2] == offsetof(FillPushConstants, word_pattern));
static_assert(kFillLayout.offsets[3] == offsetof(FillPushConstants, reserved));

}  // namespace

Status FillPipeline::create(const DeviceContext& context) {
  context_ = &context;
  limits_.offset_alignment = context.limits.minStorageBufferOffsetAlignment;
  limits_.max_window_bytes = context.limits.maxStorageBufferRange;
  limits_.max_group_count = std::min<std::uint32_t>(context.limits.maxComputeWorkGroupCount[0], 65535);
  limits_.workgroup_size = shaders::kFillWorkgroupSize;
  FERRY_RETURN_IF_ERROR(program_.create(context, shaders::fill_spv, 1,
                                        sizeof(shaders::FillPushConstants)));
  FERRY_ASSIGN_OR_RETURN(pipeline_, program_.make_pipeline());
  return Status();
}

void FillPipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

Status FillPipeline::check(const ops::FillArgs&, std::span<const backend::Binding>) const {
  return Status();
}

Status FillPipeline::record(VkCommandBuffer command_buffer, const ops::FillArgs& args,
                            std::span<const backend::Binding> bindings) const {
  const VolkDeviceTable& vk = context_->vk;
  const backend::Binding& destination = bindings[0];
  const VkBuffer buffer = static_cast<const VulkanBuffer*>(destination.buffer)->handle();
  const std::vector<FillDispatch> dispatches =
      plan_fill(destination.offset, destination.size, args.pattern, limits_);
  if (dispatches.empty()) {
    return Status(ErrorCode::internal,
                  "fill of " + std::to_string(destination.size) + " bytes planned no dispatch");
  }
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  for (const FillDispatch& dispatch : dispatches) {
    VkDescriptorBufferInfo window{};
    window.buffer = buffer;
    window.offset = dispatch.window_offset;
    window.range = dispatch.window_size;
    program_.push_storage_buffers(command_buffer, {&window, 1});

    shaders::FillPushConstants push{};
    push.begin_byte = dispatch.begin_byte;
    push.end_byte = dispatch.end_byte;
    push.word_pattern = dispatch.word_pattern;
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push),
                          &push);
    vk.vkCmdDispatch(command_buffer, dispatch.group_count, 1, 1);
  }
  return Status();
}

}  // namespace ferry::vulkan
