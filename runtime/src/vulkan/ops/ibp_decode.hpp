// ibp_decode on Vulkan: the compute pipeline of shaders/ibp_decode_subgroup.comp where the device
// can pin its subgroup size (choose_ibp_decode_shader), else of the portable
// shaders/ibp_decode.comp (four storage buffers bound with push descriptors: the stream, output,
// status and indices windows; the push constants of shaders/ibp_decode_abi.h) and its window
// planning (ibp_decode_plan.hpp). FERRY_VULKAN_IBP_DECODE=portable takes the portable shader
// everywhere (tests, measurements); =subgroup is the default.
//
// 64-bit values are pairs of words and narrow elements are packed in words, so neither shader
// needs an optional feature (kNeeds); subgroup size control only picks the faster one.
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"
#include "vulkan/ops/ibp_decode_plan.hpp"

namespace ferry::vulkan {

class IbpDecodePipeline {
 public:
  static constexpr DeviceFeatures kNeeds{};  // nothing optional

  IbpDecodePipeline() = default;
  IbpDecodePipeline(const IbpDecodePipeline&) = delete;
  IbpDecodePipeline& operator=(const IbpDecodePipeline&) = delete;
  ~IbpDecodePipeline() { destroy(); }

  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // unavailable when the stream or a row does not fit a storage-buffer window (plan_ibp_decode),
  // or (lavapipe) the shader's loops could run more iterations than the driver allows.
  Status check(const ops::IbpDecodeArgs& args, std::span<const backend::Binding> bindings) const;
  // Records the status clear, then the decode dispatches, each after a barrier.
  Status record(VkCommandBuffer command_buffer, const ops::IbpDecodeArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  Result<std::vector<IbpDecodeDispatch>> plan(const ops::IbpDecodeArgs& args,
                                              std::span<const backend::Binding> bindings) const;

  const DeviceContext* context_ = nullptr;
  IbpDecodeShader shader_;  // which shader program_ holds
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  IbpDecodeLimits limits_;
  std::uint64_t loop_limit_ = 0;  // loop iterations per invocation the driver allows; 0: any
};

}  // namespace ferry::vulkan
