// binary_quantize on Vulkan: the compute pipeline of shaders/binary_quantize.comp (three storage
// buffers bound with push descriptors: the input window, the codes window and the thresholds
// window; the push constants of shaders/binary_quantize_abi.h) and its window planning
// (binary_quantize_plan.hpp). The interface every op's Vulkan pipeline has
// (vulkan/op_pipelines.hpp).
//
// The shader reads its input as 32-bit words and does integer arithmetic only, so it needs no
// optional feature (kNeeds): every device runs it.
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"
#include "vulkan/ops/binary_quantize_plan.hpp"

namespace ferry::vulkan {

class BinaryQuantizePipeline {
 public:
  static constexpr DeviceFeatures kNeeds{};  // nothing optional

  BinaryQuantizePipeline() = default;
  BinaryQuantizePipeline(const BinaryQuantizePipeline&) = delete;
  BinaryQuantizePipeline& operator=(const BinaryQuantizePipeline&) = delete;
  ~BinaryQuantizePipeline() { destroy(); }

  // Once the device exists (and has kNeeds).
  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // What the device cannot run with these arguments, known when recording: a row or the
  // thresholds larger than a storage-buffer window (plan_binary_quantize's error; never with a
  // real device's limits).
  Status check(const ops::BinaryQuantizeArgs& args,
               std::span<const backend::Binding> bindings) const;
  // Records the dispatches of one binary_quantize (see binary_quantize_plan.hpp), binding its
  // pipeline first, with a barrier between two dispatches whose windows overlap.
  Status record(VkCommandBuffer command_buffer, const ops::BinaryQuantizeArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  Result<std::vector<BinaryQuantizeDispatch>> plan(
      const ops::BinaryQuantizeArgs& args, std::span<const backend::Binding> bindings) const;

  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  BinaryQuantizeLimits limits_;
};

}  // namespace ferry::vulkan
