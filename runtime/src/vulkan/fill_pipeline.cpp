#include "vulkan/fill_pipeline.hpp"

#include "fill_push_constants.h"
#include "ferry/shaders/fill.comp.spv.h"
#include "vulkan/fill_plan.hpp"
#include "vulkan/spirv_layout.hpp"
#include "vulkan/vk_status.hpp"

namespace ferry::vulkan {
namespace {

// The C++ push constants against the compiled shader (shaders/fill_push_constants.h checks
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
  const VolkDeviceTable& vk = context.vk;

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = shaders::fill_spv.size_bytes();
  module_info.pCode = shaders::fill_spv.data();
  FERRY_VK_RETURN_IF_ERROR(vk.vkCreateShaderModule(context.device, &module_info, nullptr, &module_));

  VkDescriptorSetLayoutBinding binding{};
  binding.binding = 0;
  binding.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  binding.descriptorCount = 1;
  binding.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  VkDescriptorSetLayoutCreateInfo set_layout_info{};
  set_layout_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_layout_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set_layout_info.bindingCount = 1;
  set_layout_info.pBindings = &binding;
  FERRY_VK_RETURN_IF_ERROR(
      vk.vkCreateDescriptorSetLayout(context.device, &set_layout_info, nullptr, &set_layout_));

  VkPushConstantRange push_range{};
  push_range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push_range.offset = 0;
  push_range.size = sizeof(shaders::FillPushConstants);
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push_range;
  FERRY_VK_RETURN_IF_ERROR(vk.vkCreatePipelineLayout(context.device, &layout_info, nullptr, &layout_));

  VkComputePipelineCreateInfo pipeline_info{};
  pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = module_;
  pipeline_info.stage.pName = "main";
  pipeline_info.layout = layout_;
  FERRY_VK_RETURN_IF_ERROR(vk.vkCreateComputePipelines(context.device, VK_NULL_HANDLE, 1,
                                                       &pipeline_info, nullptr, &pipeline_));
  return Status();
}

void FillPipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  const VolkDeviceTable& vk = context_->vk;
  if (pipeline_ != VK_NULL_HANDLE) vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  if (layout_ != VK_NULL_HANDLE) vk.vkDestroyPipelineLayout(context_->device, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) {
    vk.vkDestroyDescriptorSetLayout(context_->device, set_layout_, nullptr);
  }
  if (module_ != VK_NULL_HANDLE) vk.vkDestroyShaderModule(context_->device, module_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
  module_ = VK_NULL_HANDLE;
  context_ = nullptr;
}

void FillPipeline::bind(VkCommandBuffer command_buffer) const {
  context_->vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
}

Status FillPipeline::record(VkCommandBuffer command_buffer, VkBuffer buffer, std::uint64_t offset,
                            std::uint64_t size, std::uint32_t pattern) const {
  const VolkDeviceTable& vk = context_->vk;
  const std::vector<FillDispatch> dispatches =
      plan_fill(offset, size, pattern, context_->fill_limits);
  if (dispatches.empty()) {
    return Status(ErrorCode::internal, "fill of " + std::to_string(size) + " bytes planned no dispatch");
  }
  for (const FillDispatch& dispatch : dispatches) {
    VkDescriptorBufferInfo window{};
    window.buffer = buffer;
    window.offset = dispatch.window_offset;
    window.range = dispatch.window_size;
    VkWriteDescriptorSet write{};
    write.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    write.dstBinding = 0;
    write.descriptorCount = 1;
    write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    write.pBufferInfo = &window;
    vk.vkCmdPushDescriptorSetKHR(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1,
                                 &write);

    shaders::FillPushConstants push{};
    push.begin_byte = dispatch.begin_byte;
    push.end_byte = dispatch.end_byte;
    push.word_pattern = dispatch.word_pattern;
    vk.vkCmdPushConstants(command_buffer, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push),
                          &push);
    vk.vkCmdDispatch(command_buffer, dispatch.group_count, 1, 1);
  }
  return Status();
}

}  // namespace ferry::vulkan
