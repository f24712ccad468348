// hamming_topk on Vulkan: the compute pipeline of shaders/hamming_topk.comp, one dispatch per pass
// of the plan (ops/hamming_topk.hpp), with five storage buffers bound with push descriptors.
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

class HammingTopkPipeline {
 public:
  static constexpr DeviceFeatures kNeeds{};  // nothing optional (shared memory: see check)

  HammingTopkPipeline() = default;
  HammingTopkPipeline(const HammingTopkPipeline&) = delete;
  HammingTopkPipeline& operator=(const HammingTopkPipeline&) = delete;
  ~HammingTopkPipeline() { destroy(); }

  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // unavailable when the device has too little shared memory for the shader or a binding is
  // larger than maxStorageBufferRange.
  Status check(const ops::HammingTopkArgs& args, std::span<const backend::Binding> bindings) const;
  Status record(VkCommandBuffer command_buffer, const ops::HammingTopkArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;  // null when the device's shared memory is too small
  std::uint64_t offset_alignment_ = 1;
  std::uint64_t max_window_bytes_ = 0;
  std::uint32_t max_groups_x_ = 65535;
  std::uint32_t max_groups_y_ = 65535;
};

}  // namespace ferry::vulkan
