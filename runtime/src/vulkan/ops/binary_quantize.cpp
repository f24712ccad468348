#include "vulkan/ops/binary_quantize.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "binary_quantize_abi.h"
#include "ferry/shaders/binary_quantize.comp.spv.h"
#include "vulkan/buffer.hpp"
#include "vulkan/spirv_layout.hpp"
#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

// The C++ push constants against the compiled shader (shaders/binary_quantize_abi.h checks them
// against the std430 offsets it expects; this checks the SPIR-V agrees).
using shaders::BinaryQuantizePushConstants;
constexpr spirv::PushConstantLayout kLayout =
    spirv::push_constant_layout(shaders::binary_quantize_spv);
static_assert(kLayout.found, "binary_quantize.comp must declare one push-constant block");
static_assert(kLayout.member_count == 10);
static_assert(kLayout.offsets[0] == offsetof(BinaryQuantizePushConstants, src_origin));
static_assert(kLayout.offsets[1] == offsetof(BinaryQuantizePushConstants, row_stride));
static_assert(kLayout.offsets[2] == offsetof(BinaryQuantizePushConstants, dims));
static_assert(kLayout.offsets[3] == offsetof(BinaryQuantizePushConstants, words_per_row));
static_assert(kLayout.offsets[4] == offsetof(BinaryQuantizePushConstants, rows));
static_assert(kLayout.offsets[5] == offsetof(BinaryQuantizePushConstants, dst_origin));
static_assert(kLayout.offsets[6] == offsetof(BinaryQuantizePushConstants, threshold_origin));
static_assert(kLayout.offsets[7] == offsetof(BinaryQuantizePushConstants, input_type));
static_assert(kLayout.offsets[8] == offsetof(BinaryQuantizePushConstants, has_thresholds));
static_assert(kLayout.offsets[9] == offsetof(BinaryQuantizePushConstants, vector_loads));

}  // namespace

Status BinaryQuantizePipeline::create(const DeviceContext& context) {
  context_ = &context;
  limits_.offset_alignment = context.limits.minStorageBufferOffsetAlignment;
  limits_.max_window_bytes = context.limits.maxStorageBufferRange;
  limits_.max_group_count =
      std::min<std::uint32_t>(context.limits.maxComputeWorkGroupCount[0], 65535);
  limits_.workgroup_size = shaders::kBinaryQuantizeWorkgroupSize;
  // Binding 0: the input window, 1: the codes window, 2: the thresholds window.
  FERRY_RETURN_IF_ERROR(program_.create(context, shaders::binary_quantize_spv, 3,
                                        sizeof(BinaryQuantizePushConstants)));
  FERRY_ASSIGN_OR_RETURN(pipeline_, program_.make_pipeline());
  return Status();
}

void BinaryQuantizePipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) {
    context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  }
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

Result<std::vector<BinaryQuantizeDispatch>> BinaryQuantizePipeline::plan(
    const ops::BinaryQuantizeArgs& args, std::span<const backend::Binding> bindings) const {
  if (bindings.size() != (args.has_thresholds ? 3u : 2u)) {
    return Status(ErrorCode::internal, "binary_quantize on Vulkan: " +
                                           std::to_string(bindings.size()) + " bindings");
  }
  return plan_binary_quantize(args, bindings[0].offset, bindings[1].offset,
                              args.has_thresholds ? bindings[2].offset : 0, limits_);
}

Status BinaryQuantizePipeline::check(const ops::BinaryQuantizeArgs& args,
                                     std::span<const backend::Binding> bindings) const {
  return plan(args, bindings).status();
}

Status BinaryQuantizePipeline::record(VkCommandBuffer command_buffer,
                                      const ops::BinaryQuantizeArgs& args,
                                      std::span<const backend::Binding> bindings) const {
  FERRY_ASSIGN_OR_RETURN(const std::vector<BinaryQuantizeDispatch> dispatches,
                         plan(args, bindings));
  const VkBuffer input = static_cast<const VulkanBuffer*>(bindings[0].buffer)->handle();
  const VkBuffer codes = static_cast<const VulkanBuffer*>(bindings[1].buffer)->handle();
  const VkBuffer thresholds =
      args.has_thresholds ? static_cast<const VulkanBuffer*>(bindings[2].buffer)->handle()
                          : VK_NULL_HANDLE;
  const VolkDeviceTable& vk = context_->vk;
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  std::vector<WindowAccess> since_barrier;  // this command's windows since its last barrier
  for (const BinaryQuantizeDispatch& dispatch : dispatches) {
    std::array<VkDescriptorBufferInfo, 3> windows{};
    windows[0] = {input, dispatch.src_window_offset, dispatch.src_window_size};
    windows[1] = {codes, dispatch.dst_window_offset, dispatch.dst_window_size};
    // Without thresholds binding 2 still needs a valid descriptor; the input window is one the
    // shader never reads through it then (and a read-only one, so no hazard either).
    windows[2] = args.has_thresholds ? VkDescriptorBufferInfo{thresholds,
                                                              dispatch.threshold_window_offset,
                                                              dispatch.threshold_window_size}
                                     : windows[0];
    std::array<WindowAccess, 3> accesses{};
    for (std::size_t i = 0; i < windows.size(); ++i) {
      accesses[i] = {windows[i].buffer, windows[i].offset, windows[i].offset + windows[i].range,
                     i == 1};
    }
    bool conflict = false;
    for (const WindowAccess& earlier : since_barrier) {
      for (const WindowAccess& access : accesses) conflict = conflict || earlier.conflicts(access);
    }
    if (conflict) {
      // Dispatches of one command never touch the same bytes; only their windows overlap (by
      // less than the offset alignment).
      record_compute_barrier(vk, command_buffer);
      since_barrier.clear();
    }
    since_barrier.insert(since_barrier.end(), accesses.begin(), accesses.end());

    program_.push_storage_buffers(command_buffer, windows);
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(dispatch.push), &dispatch.push);
    vk.vkCmdDispatch(command_buffer, dispatch.group_count, 1, 1);
  }
  return Status();
}

}  // namespace ferry::vulkan
