#include "vulkan/copy_shader.hpp"

#include <algorithm>

#include "copy_abi.h"
#include "ferry/shaders/copy.comp.spv.h"
#include "vulkan/buffer.hpp"
#include "vulkan/spirv_layout.hpp"

namespace ferry::vulkan {
namespace {

// The C++ push constants against the compiled shader (shaders/copy_abi.h checks them against
// the std430 offsets it expects; this checks the SPIR-V agrees).
using shaders::CopyPushConstants;
constexpr spirv::PushConstantLayout kCopyLayout = spirv::push_constant_layout(shaders::copy_spv);
static_assert(kCopyLayout.found, "copy.comp must declare one push-constant block");
static_assert(kCopyLayout.member_count == 4);
static_assert(kCopyLayout.offsets[0] == offsetof(CopyPushConstants, src_first));
static_assert(kCopyLayout.offsets[1] == offsetof(CopyPushConstants, dst_first));
static_assert(kCopyLayout.offsets[2] == offsetof(CopyPushConstants, count));
static_assert(kCopyLayout.offsets[3] == offsetof(CopyPushConstants, reserved));

const VulkanBuffer& vulkan_buffer(const backend::BackendBuffer* buffer) {
  return *static_cast<const VulkanBuffer*>(buffer);
}

}  // namespace

Status CopyShader::create(const DeviceContext& context, std::uint32_t group_cap) {
  context_ = &context;
  limits_.offset_alignment = context.limits.minStorageBufferOffsetAlignment;
  limits_.max_window_bytes = context.limits.maxStorageBufferRange;
  const std::uint32_t max_groups =
      std::min<std::uint32_t>(context.limits.maxComputeWorkGroupCount[0], 65535);
  const std::uint32_t cap =
      group_cap != 0 ? group_cap : (context.compute_units != 0 ? context.compute_units : 64);
  limits_.max_group_count = std::min(cap, max_groups);
  limits_.workgroup_size = shaders::kCopyWorkgroupSize;
  limits_.unroll = shaders::kCopyUnroll;
  FERRY_RETURN_IF_ERROR(
      program_.create(context, shaders::copy_spv, 2, sizeof(shaders::CopyPushConstants)));
  FERRY_ASSIGN_OR_RETURN(pipeline_, program_.make_pipeline());
  return Status();
}

void CopyShader::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

bool CopyShader::takes(const backend::CopyCommand& copy) const {
  if (pipeline_ == VK_NULL_HANDLE) return false;
  // Across the bus only: device-to-device and host-to-host copies stay with the engine.
  if (vulkan_buffer(copy.src).host_visible() == vulkan_buffer(copy.dst).host_visible()) {
    return false;
  }
  return shader_can_copy(copy.src_offset, copy.dst_offset, copy.size, limits_);
}

void CopyShader::record(VkCommandBuffer command_buffer, const backend::CopyCommand& copy) const {
  const VolkDeviceTable& vk = context_->vk;
  const VkBuffer src = vulkan_buffer(copy.src).handle();
  const VkBuffer dst = vulkan_buffer(copy.dst).handle();
  const CopyPlan plan = plan_shader_copy(copy.src_offset, copy.dst_offset, copy.size, limits_);
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  for (const CopyDispatch& dispatch : plan.dispatches) {
    const VkDescriptorBufferInfo windows[2] = {
        {src, dispatch.src_window_offset, dispatch.src_window_size},
        {dst, dispatch.dst_window_offset, dispatch.dst_window_size}};
    program_.push_storage_buffers(command_buffer, windows);
    shaders::CopyPushConstants push{};
    push.src_first = dispatch.src_first;
    push.dst_first = dispatch.dst_first;
    push.count = dispatch.count;
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(push), &push);
    vk.vkCmdDispatch(command_buffer, dispatch.group_count, 1, 1);
  }
  if (plan.tail_offset < copy.size) {
    // Disjoint from the shader's bytes: no barrier between them.
    VkBufferCopy tail{};
    tail.srcOffset = copy.src_offset + plan.tail_offset;
    tail.dstOffset = copy.dst_offset + plan.tail_offset;
    tail.size = copy.size - plan.tail_offset;
    vk.vkCmdCopyBuffer(command_buffer, src, dst, 1, &tail);
  }
}

}  // namespace ferry::vulkan
