// Host<->device copies run by a compute shader (shaders/copy.comp) instead of the copy engine,
// on queues whose family supports compute, where FERRY_VULKAN_COPIES=shader asks for it.
//
// Why: on the H100, NVIDIA's Vulkan driver moves 47-50 GB/s through the copy engine where the
// CUDA driver's copies of the same pinned memory reach 54-55 (docs/PERFORMANCE.md); the shader
// cores read and write host memory across PCIe directly (as zero-copy kernels do), with as many
// requests in flight as the grid holds. A copy the shader takes is one whose one side is host
// memory (a lease, a host buffer, registered memory) and the other device memory, with both
// offsets multiples of 16 bytes; the last size % 16 bytes go to vkCmdCopyBuffer.
#pragma once

#include <volk.h>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"
#include "vulkan/copy_plan.hpp"

namespace ferry::vulkan {

class CopyShader {
 public:
  CopyShader() = default;
  CopyShader(const CopyShader&) = delete;
  CopyShader& operator=(const CopyShader&) = delete;
  ~CopyShader() { destroy(); }

  // Once the device exists; `group_cap` as in CopySettings.
  Status create(const DeviceContext& context, std::uint32_t group_cap);
  void destroy() noexcept;

  // Whether record() runs `copy` on the shader cores (see the top of this file).
  bool takes(const backend::CopyCommand& copy) const;
  // Records a copy that takes() accepted: its dispatches, then the engine's tail.
  void record(VkCommandBuffer command_buffer, const backend::CopyCommand& copy) const;

 private:
  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  CopyLimits limits_;
};

}  // namespace ferry::vulkan
