// The compute pipelines of shaders/normalize.comp: two storage buffers (the uint8 source window and
// the destination window) bound with push descriptors, and NormalizePushConstants, shared by one
// pipeline per path of the shader (specialization constants, see normalize_abi.h):
// the element path, made with the device, and a vector path pipeline per channel count, run
// length with element size, and output layout (24 of them), each made the first time a dispatch
// needs it, since each is a shader compile and a program uses one or two.
//
// The shader needs shaderInt64, storageBuffer8BitAccess and storageBuffer16BitAccess (kNeeds); on
// a device without them the pipeline is not made and recording a normalize fails with
// ErrorCode::unavailable naming what is missing (core asks VulkanDevice::op_support first).
#pragma once

#include <volk.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/ops/normalize_plan.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

class NormalizePipeline {
 public:
  static constexpr DeviceFeatures kNeeds{true, true, true};

  NormalizePipeline() = default;
  NormalizePipeline(const NormalizePipeline&) = delete;
  NormalizePipeline& operator=(const NormalizePipeline&) = delete;
  ~NormalizePipeline() { destroy(); }

  // Once the device exists (and has kNeeds): the grids from the device's limits (or
  // FERRY_VULKAN_NORMALIZE_GRID), the element path's pipeline.
  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // What the device cannot run with these arguments, known when recording: an image larger than
  // a storage-buffer window (plan_normalize's error).
  Status check(const ops::NormalizeArgs& args, std::span<const backend::Binding> bindings) const;
  // Records the dispatches of one normalize (see normalize_plan.hpp), each with its path's
  // pipeline bound (making it first if no dispatch needed it before), with a barrier between two
  // dispatches whose windows overlap. Safe to call from several threads at once (on different
  // command buffers).
  Status record(VkCommandBuffer command_buffer, const ops::NormalizeArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  // Vector path pipelines: channels 1-4 x (float32 runs of 4, 16-bit runs of 8, 16-bit runs of
  // 4) x (planar, interleaved output).
  static constexpr std::size_t kVectorPipelineCount = 4 * 3 * 2;

  // The pipeline of `dispatch`'s path, made now if it is the first to need it.
  Result<VkPipeline> pipeline_for(const ops::NormalizeArgs& args,
                                  const NormalizeDispatch& dispatch) const;
  // Makes one pipeline; vector_channels 0 is the element path (the other values then unused).
  Result<VkPipeline> make_pipeline(std::uint32_t vector_channels, std::uint32_t run_pixels,
                                   bool store16, bool planar) const;

  const DeviceContext* context_ = nullptr;
  NormalizeLimits limits_;
  ComputeProgram program_;
  VkPipeline element_pipeline_ = VK_NULL_HANDLE;
  mutable std::mutex vector_mutex_;  // guards vector_pipelines_
  mutable std::array<VkPipeline, kVectorPipelineCount> vector_pipelines_{};
};

}  // namespace ferry::vulkan
