// fill on Vulkan: the compute pipeline of shaders/fill.comp (one storage buffer bound with push
// descriptors, the push constants of shaders/fill_abi.h) and its window planning (fill_plan.hpp).
// The interface every op's Vulkan pipeline has (vulkan/op_pipelines.hpp).
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"
#include "vulkan/ops/fill_plan.hpp"

namespace ferry::vulkan {

class FillPipeline {
 public:
  static constexpr DeviceFeatures kNeeds{};  // nothing optional

  FillPipeline() = default;
  FillPipeline(const FillPipeline&) = delete;
  FillPipeline& operator=(const FillPipeline&) = delete;
  ~FillPipeline() { destroy(); }

  // Once the device exists (and has kNeeds).
  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // What the device cannot run with these arguments, known when recording: nothing for fill.
  Status check(const ops::FillArgs& args, std::span<const backend::Binding> bindings) const;
  // Records the fill's dispatches (see fill_plan.hpp), binding its pipeline first.
  Status record(VkCommandBuffer command_buffer, const ops::FillArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  FillLimits limits_;
};

}  // namespace ferry::vulkan
