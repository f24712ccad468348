// A compute shader with the layouts every pipeline made from it shares: its shader module, a
// push-descriptor set layout of N storage buffers (VK_KHR_push_descriptor: nothing to allocate
// per dispatch) and a pipeline layout with one push-constant block.
#pragma once

#include <volk.h>

#include <cstdint>
#include <span>

#include "ferry/status.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

class ComputeProgram {
 public:
  ComputeProgram() = default;
  ComputeProgram(const ComputeProgram&) = delete;
  ComputeProgram& operator=(const ComputeProgram&) = delete;
  ~ComputeProgram() { destroy(); }

  // Bindings 0 .. storage_buffers - 1 are storage buffers.
  Status create(const DeviceContext& context, std::span<const std::uint32_t> spirv,
                std::uint32_t storage_buffers, std::uint32_t push_constant_bytes);
  void destroy() noexcept;

  // A pipeline of entry point "main", with the given specialization (or none) and, when
  // required_subgroup_size is not 0, subgroups of exactly that size, all full (the device has
  // subgroup size control: SubgroupSupport::size_control). The caller owns and destroys it.
  Result<VkPipeline> make_pipeline(const VkSpecializationInfo* specialization = nullptr,
                                   std::uint32_t required_subgroup_size = 0) const;

  VkPipelineLayout layout() const { return layout_; }

  // Binds `windows` to storage-buffer bindings 0, 1, ... (push descriptors, nothing allocated);
  // at most kMaxStorageBuffers.
  static constexpr std::uint32_t kMaxStorageBuffers = 8;
  void push_storage_buffers(VkCommandBuffer command_buffer,
                            std::span<const VkDescriptorBufferInfo> windows) const;

 private:
  const DeviceContext* context_ = nullptr;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
};

// A byte range of one buffer that a dispatch reads or writes (its whole descriptor window: that
// is what the validation layers track). Dispatches of one command whose windows conflict need a
// barrier between them (record_compute_barrier).
struct WindowAccess {
  VkBuffer buffer = VK_NULL_HANDLE;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool write = false;

  bool conflicts(const WindowAccess& other) const {
    return (write || other.write) && buffer == other.buffer && begin < other.end &&
           other.begin < end;
  }
};

// One global memory barrier (vkCmdPipelineBarrier2 with `barrier` alone).
void record_memory_barrier(const VolkDeviceTable& vk, VkCommandBuffer command_buffer,
                           const VkMemoryBarrier2& barrier);

// Orders a command's dispatches: storage writes of the compute shaders recorded before become
// visible to the storage reads and writes of those recorded after.
void record_compute_barrier(const VolkDeviceTable& vk, VkCommandBuffer command_buffer);

}  // namespace ferry::vulkan
