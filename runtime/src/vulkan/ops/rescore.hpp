// rescore on Vulkan: the compute pipeline of shaders/rescore.comp, one dispatch (a workgroup per
// query, in a 2D grid), with five storage buffers bound with push descriptors.
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

class RescorePipeline {
 public:
  // shaderInt64: the integer fma that keeps float32 scores exact on any denormal mode.
  static constexpr DeviceFeatures kNeeds{.shader_int64 = true};

  RescorePipeline() = default;
  RescorePipeline(const RescorePipeline&) = delete;
  RescorePipeline& operator=(const RescorePipeline&) = delete;
  ~RescorePipeline() { destroy(); }

  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // unavailable when the device's workgroups are too small for the shader, a binding is larger
  // than maxStorageBufferRange (the message gives both sizes), or (lavapipe) the shader's loops
  // could run more iterations than the driver allows (ops::rescore_loop_iterations).
  Status check(const ops::RescoreArgs& args, std::span<const backend::Binding> bindings) const;
  Status record(VkCommandBuffer command_buffer, const ops::RescoreArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;  // null when the device's workgroups are too small
  std::uint64_t offset_alignment_ = 4;
  std::uint64_t max_window_bytes_ = 0;
  std::uint32_t max_groups_x_ = 65535;
  std::uint32_t max_groups_y_ = 65535;
  std::uint64_t loop_limit_ = 0;  // loop iterations per invocation the driver allows; 0: any
};

}  // namespace ferry::vulkan
