#include "vulkan/compute_program.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "vulkan/status.hpp"

namespace ferry::vulkan {

Status ComputeProgram::create(const DeviceContext& context, std::span<const std::uint32_t> spirv,
                              std::uint32_t storage_buffers, std::uint32_t push_constant_bytes) {
  context_ = &context;
  const VolkDeviceTable& vk = context.vk;

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = spirv.size_bytes();
  module_info.pCode = spirv.data();
  FERRY_VK_RETURN_IF_ERROR(vk.vkCreateShaderModule(context.device, &module_info, nullptr, &module_));

  std::vector<VkDescriptorSetLayoutBinding> bindings(storage_buffers);
  for (std::uint32_t i = 0; i < storage_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_layout_info{};
  set_layout_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_layout_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set_layout_info.bindingCount = storage_buffers;
  set_layout_info.pBindings = bindings.data();
  FERRY_VK_RETURN_IF_ERROR(
      vk.vkCreateDescriptorSetLayout(context.device, &set_layout_info, nullptr, &set_layout_));

  VkPushConstantRange push_range{};
  push_range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push_range.offset = 0;
  push_range.size = push_constant_bytes;
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push_range;
  FERRY_VK_RETURN_IF_ERROR(vk.vkCreatePipelineLayout(context.device, &layout_info, nullptr, &layout_));
  return Status();
}

void ComputeProgram::destroy() noexcept {
  if (context_ == nullptr) return;
  const VolkDeviceTable& vk = context_->vk;
  if (layout_ != VK_NULL_HANDLE) vk.vkDestroyPipelineLayout(context_->device, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) {
    vk.vkDestroyDescriptorSetLayout(context_->device, set_layout_, nullptr);
  }
  if (module_ != VK_NULL_HANDLE) vk.vkDestroyShaderModule(context_->device, module_, nullptr);
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
  module_ = VK_NULL_HANDLE;
  context_ = nullptr;
}

Result<VkPipeline> ComputeProgram::make_pipeline(const VkSpecializationInfo* specialization,
                                                 std::uint32_t required_subgroup_size) const {
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup_size{};
  subgroup_size.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
  subgroup_size.requiredSubgroupSize = required_subgroup_size;
  VkComputePipelineCreateInfo pipeline_info{};
  pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = module_;
  pipeline_info.stage.pName = "main";
  pipeline_info.stage.pSpecializationInfo = specialization;
  if (required_subgroup_size != 0) {
    pipeline_info.stage.pNext = &subgroup_size;
    pipeline_info.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  pipeline_info.layout = layout_;
  VkPipeline pipeline = VK_NULL_HANDLE;
  FERRY_VK_RETURN_IF_ERROR(context_->vk.vkCreateComputePipelines(
      context_->device, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &pipeline));
  return pipeline;
}

void ComputeProgram::push_storage_buffers(VkCommandBuffer command_buffer,
                                          std::span<const VkDescriptorBufferInfo> windows) const {
  std::array<VkWriteDescriptorSet, kMaxStorageBuffers> writes{};
  const auto count = static_cast<std::uint32_t>(std::min<std::size_t>(windows.size(), writes.size()));
  for (std::uint32_t i = 0; i < count; ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &windows[i];
  }
  context_->vk.vkCmdPushDescriptorSetKHR(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, layout_,
                                         0, count, writes.data());
}

void record_memory_barrier(const VolkDeviceTable& vk, VkCommandBuffer command_buffer,
                           const VkMemoryBarrier2& barrier) {
  VkDependencyInfo dependency{};
  dependency.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO;
  dependency.memoryBarrierCount = 1;
  dependency.pMemoryBarriers = &barrier;
  vk.vkCmdPipelineBarrier2(command_buffer, &dependency);
}

void record_compute_barrier(const VolkDeviceTable& vk, VkCommandBuffer command_buffer) {
  VkMemoryBarrier2 barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
  barrier.srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
  barrier.srcAccessMask = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
  barrier.dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
  barrier.dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
  record_memory_barrier(vk, command_buffer, barrier);
}

}  // namespace ferry::vulkan
