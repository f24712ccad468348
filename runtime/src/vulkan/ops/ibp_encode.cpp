#include "vulkan/ops/ibp_encode.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "ferry/shaders/ibp_encode.comp.spv.h"
#include "vulkan/buffer.hpp"
#include "vulkan/spirv_layout.hpp"

namespace ferry::vulkan {
namespace {

using shaders::IbpEncodePushConstants;
constexpr spirv::PushConstantLayout kLayout = spirv::push_constant_layout(shaders::ibp_encode_spv);
static_assert(kLayout.found, "ibp_encode.comp must declare one push-constant block");
static_assert(kLayout.member_count == 21);
static_assert(kLayout.offsets[0] == offsetof(IbpEncodePushConstants, pass));
static_assert(kLayout.offsets[15] == offsetof(IbpEncodePushConstants, data_bytes_word));
static_assert(kLayout.offsets[20] == offsetof(IbpEncodePushConstants, above_word));
// The shader's constants are the plan's.
static_assert(FERRY_IBP_WORKGROUP_SIZE == ops::kIbpWorkgroupSize);
static_assert(FERRY_IBP_SLICE_ROWS == ops::kIbpSliceRows);
static_assert(FERRY_IBP_SCAN_BLOCK == ops::kIbpScanBlock);
static_assert(kIbpEncodeSharedBytes <= 32768);  // lavapipe's

constexpr std::array<const char*, 3> kRoles = {"input", "stream", "scratch"};
constexpr std::uint32_t kLevelZero = 0xffffffffu;  // the scan's level 0: the row table

// A binding's window: bound from its offset rounded down to the device's alignment, ending on a
// whole word (inside the VkBuffer, whose size is a multiple of 16).
struct Window {
  VkDescriptorBufferInfo info{};
  std::uint32_t first_byte = 0;  // where the binding's data starts in the window
};

Window window_of(const backend::Binding& binding, std::uint64_t alignment) {
  Window window;
  const std::uint64_t start = binding.offset - binding.offset % alignment;
  window.info.buffer = static_cast<const VulkanBuffer*>(binding.buffer)->handle();
  window.info.offset = start;
  window.info.range = (binding.offset - start + binding.size + 3) / 4 * 4;
  window.first_byte = static_cast<std::uint32_t>(binding.offset - start);
  return window;
}

}  // namespace

Status IbpEncodePipeline::create(const DeviceContext& context) {
  context_ = &context;
  const VkPhysicalDeviceLimits& limits = context.limits;
  offset_alignment_ = std::max<std::uint64_t>(limits.minStorageBufferOffsetAlignment, 4);
  max_window_bytes_ = limits.maxStorageBufferRange;
  max_groups_ = std::min<std::uint32_t>(limits.maxComputeWorkGroupCount[0], 65535);
  FERRY_RETURN_IF_ERROR(
      program_.create(context, shaders::ibp_encode_spv, 3, sizeof(IbpEncodePushConstants)));
  if (!kNeeds.missing_from(context.features).empty()) return Status();
  Result<VkPipeline> pipeline = program_.make_pipeline();
  if (!pipeline.ok()) {
    return Status(pipeline.status()).with_context("ibp_encode on Vulkan: making the pipeline");
  }
  pipeline_ = *pipeline;
  return Status();
}

void IbpEncodePipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

Status IbpEncodePipeline::check(const ops::IbpEncodeArgs& args,
                                std::span<const backend::Binding> bindings) const {
  if (pipeline_ == VK_NULL_HANDLE) {
    return Status(ErrorCode::unavailable,
                  "ibp_encode on Vulkan: " + context_->device_name + " lacks " +
                      kNeeds.missing_from(context_->features) + ", which its shader needs");
  }
  const std::uint64_t limit = std::min<std::uint64_t>(max_window_bytes_, 0xFFFFFFFFull);
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Window window = window_of(bindings[i], offset_alignment_);
    if (window.info.range > limit) {
      return Status(ErrorCode::unavailable,
                    std::string("ibp_encode on Vulkan: the ") + kRoles[std::min<std::size_t>(i, 2)] +
                        " binding of " + std::to_string(bindings[i].size) +
                        " bytes exceeds the shader's window limit (" + std::to_string(limit) +
                        " bytes, maxStorageBufferRange): encode the tensor in parts");
    }
  }
  // Row bits (up to 64 per element) and the column passes' items are 32-bit in the shader.
  if (args.row_elements * 64 > 0xFFFFFFFFull || args.rows > 0xFFFFFFFFull) {
    return Status(ErrorCode::unavailable,
                  "ibp_encode on Vulkan: rows of " + std::to_string(args.row_elements) +
                      " elements are too long for the shader (at most 2^26)");
  }
  return Status();
}

Status IbpEncodePipeline::record(VkCommandBuffer command_buffer, const ops::IbpEncodeArgs& args,
                                 std::span<const backend::Binding> bindings) const {
  if (bindings.size() != 3) {
    return Status(ErrorCode::internal, "ibp_encode on Vulkan: " + std::to_string(bindings.size()) +
                                           " bindings (input, stream, scratch expected)");
  }
  FERRY_ASSIGN_OR_RETURN(const ops::IbpEncodePlan plan,
                         ops::plan_ibp_encode(args, bindings[2].size, "ibp_encode"));
  if (plan.batch_groups != args.batch_groups || plan.scratch_bytes > bindings[2].size) {
    return Status(ErrorCode::internal, "ibp_encode on Vulkan: the plan does not fit the scratch");
  }
  std::array<Window, 3> windows{};
  std::array<VkDescriptorBufferInfo, 3> infos{};
  for (std::size_t i = 0; i < 3; ++i) {
    windows[i] = window_of(bindings[i], offset_alignment_);
    infos[i] = windows[i].info;
  }
  const VolkDeviceTable& vk = context_->vk;
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  program_.push_storage_buffers(command_buffer, infos);

  IbpEncodePushConstants base{};
  base.element_size = args.element_size;
  base.header = std::uint32_t{args.dtype} << 8 | args.ndim;
  base.group_rows = args.group_rows;
  base.rows = static_cast<std::uint32_t>(args.rows);
  base.row_elements = static_cast<std::uint32_t>(args.row_elements);
  base.elements = static_cast<std::uint32_t>(args.elements);
  base.group_count = static_cast<std::uint32_t>(args.group_count);
  base.input_byte = windows[0].first_byte;
  base.stream_word = windows[1].first_byte / 4;
  base.scratch_word = windows[2].first_byte / 4;
  base.masks_offset = static_cast<std::uint32_t>(args.masks_offset);
  base.mask_block_bytes = static_cast<std::uint32_t>(args.mask_block_bytes);
  base.row_table_offset = static_cast<std::uint32_t>(args.row_table_offset);
  base.data_offset = static_cast<std::uint32_t>(args.data_offset);
  base.data_bytes_word = base.scratch_word + static_cast<std::uint32_t>(plan.data_bytes_offset / 4);
  auto scan_word = [&](std::size_t level) {  // level >= 1
    return base.scratch_word + static_cast<std::uint32_t>(plan.scan_offsets[level - 1] / 4);
  };
  bool first = true;
  auto dispatch = [&](IbpEncodePushConstants push, std::uint64_t groups) {
    if (!first) record_compute_barrier(vk, command_buffer);
    first = false;
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(push), &push);
    vk.vkCmdDispatch(command_buffer,
                     static_cast<std::uint32_t>(std::clamp<std::uint64_t>(groups, 1, max_groups_)),
                     1, 1);
  };
  auto pass = [&](std::uint32_t id) {
    IbpEncodePushConstants push = base;
    push.pass = id;
    return push;
  };
  auto invocations = [](std::uint64_t items) {
    return (items + ops::kIbpWorkgroupSize - 1) / ops::kIbpWorkgroupSize;
  };

  // Column statistics, batch by batch.
  const std::uint64_t slices = (args.group_rows + ops::kIbpSliceRows - 1) / ops::kIbpSliceRows;
  const std::uint64_t record_words = ops::ibp_record_words(args.bits());
  for (std::uint64_t batch = 0; batch < args.group_count; batch += plan.batch_groups) {
    const std::uint64_t groups = std::min(plan.batch_groups, args.group_count - batch);
    IbpEncodePushConstants push = base;
    push.batch_first = static_cast<std::uint32_t>(batch);
    push.batch_groups = static_cast<std::uint32_t>(groups);
    const std::uint64_t columns = groups * args.row_elements;
    push.pass = FERRY_IBP_PASS_CLEAR;
    dispatch(push, invocations(columns * record_words));
    push.pass = FERRY_IBP_PASS_COUNT;
    dispatch(push, invocations(columns * slices));
    push.pass = FERRY_IBP_PASS_ORDER;
    dispatch(push, invocations(columns));
    push.pass = FERRY_IBP_PASS_HIST;
    dispatch(push, invocations(columns * slices));
    push.pass = FERRY_IBP_PASS_CHOOSE;
    dispatch(push, invocations(columns));
    push.pass = FERRY_IBP_PASS_MASKS;
    dispatch(push, invocations(groups * args.mask_block_bytes / 4));
  }
  dispatch(pass(FERRY_IBP_PASS_LENGTHS), args.rows);
  // The scan: reduce level by level, the top in one workgroup, then down to the rows.
  const std::size_t levels = plan.scan_items.size();
  for (std::size_t level = 0; level < levels; ++level) {
    IbpEncodePushConstants push = pass(FERRY_IBP_PASS_REDUCE);
    push.items = static_cast<std::uint32_t>(level == 0 ? args.rows : plan.scan_items[level - 1]);
    push.level_word = level == 0 ? kLevelZero : scan_word(level);
    push.above_word = scan_word(level + 1);
    dispatch(push, plan.scan_items[level]);
  }
  {
    IbpEncodePushConstants push = pass(FERRY_IBP_PASS_TOP);
    push.items = static_cast<std::uint32_t>(plan.scan_items.back());
    push.level_word = scan_word(levels);
    dispatch(push, 1);
  }
  for (std::size_t level = levels; level-- > 1;) {
    IbpEncodePushConstants push = pass(FERRY_IBP_PASS_DOWN);
    push.items = static_cast<std::uint32_t>(plan.scan_items[level - 1]);
    push.level_word = scan_word(level);
    push.above_word = scan_word(level + 1);
    dispatch(push, plan.scan_items[level]);
  }
  for (const std::uint32_t id : {FERRY_IBP_PASS_GROUPS, FERRY_IBP_PASS_OFFSETS}) {
    IbpEncodePushConstants push = pass(id);
    push.items = base.rows;
    push.level_word = kLevelZero;
    push.above_word = scan_word(1);
    dispatch(push, plan.scan_items[0]);
  }
  dispatch(pass(FERRY_IBP_PASS_ROWS), args.rows);
  // Every chunk the largest stream could have; those past the real stream's end return.
  const std::uint64_t payload_bytes = args.max_stream_bytes - ibp::kHeaderBytes;
  dispatch(pass(FERRY_IBP_PASS_CRC), (payload_bytes + ibp::kChecksumChunkBytes - 1) /
                                         ibp::kChecksumChunkBytes);
  dispatch(pass(FERRY_IBP_PASS_HEADER), 1);
  return Status();
}

}  // namespace ferry::vulkan
