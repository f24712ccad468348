// ibp_encode on Vulkan: the compute pipeline of shaders/ibp_encode.comp, one dispatch per pass of
// the plan (ops/ibp_encode.hpp), three storage buffers (input, stream, scratch) bound with push
// descriptors, a barrier between two passes. Integer code on 32-bit words only: nothing
// optional is needed.
#pragma once

#include <volk.h>

#include <cstdint>
#include <span>

#include "core/backend.hpp"
#include "ibp_encode_abi.h"
#include "ops/ibp_encode.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

// The shader's shared memory: one array of 256 x 17 words.
inline constexpr std::uint32_t kIbpEncodeSharedBytes = 4 * FERRY_IBP_WORKGROUP_SIZE * 17;

class IbpEncodePipeline {
 public:
  static constexpr DeviceFeatures kNeeds{.compute_shared_bytes = kIbpEncodeSharedBytes,
                                         .workgroup_invocations = FERRY_IBP_WORKGROUP_SIZE};

  IbpEncodePipeline() = default;
  IbpEncodePipeline(const IbpEncodePipeline&) = delete;
  IbpEncodePipeline& operator=(const IbpEncodePipeline&) = delete;
  ~IbpEncodePipeline() { destroy(); }

  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // unavailable when the device lacks the shader's shared memory, a binding's window exceeds
  // maxStorageBufferRange or 2^32 bytes (the shader's positions are 32-bit), or a row's bits do
  // not fit 32 bits.
  Status check(const ops::IbpEncodeArgs& args, std::span<const backend::Binding> bindings) const;
  Status record(VkCommandBuffer command_buffer, const ops::IbpEncodeArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;  // null when the device cannot run the shader
  std::uint64_t offset_alignment_ = 4;
  std::uint64_t max_window_bytes_ = 0;
  std::uint32_t max_groups_ = 65535;
};

}  // namespace ferry::vulkan
