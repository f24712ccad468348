#include "vulkan/ops/rescore.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "core/describe.hpp"
#include "ferry/shaders/rescore.comp.spv.h"
#include "ops/rescore.hpp"
#include "rescore_abi.h"
#include "vulkan/buffer.hpp"
#include "vulkan/spirv_layout.hpp"

namespace ferry::vulkan {
namespace {

using shaders::RescorePushConstants;
constexpr spirv::PushConstantLayout kLayout = spirv::push_constant_layout(shaders::rescore_spv);
static_assert(kLayout.found, "rescore.comp must declare one push-constant block");
static_assert(kLayout.member_count == 13);
static_assert(kLayout.offsets[0] == offsetof(RescorePushConstants, flags));
static_assert(kLayout.offsets[12] == offsetof(RescorePushConstants, indices_word));
// The scores are exact only if the compiler keeps every fma fused and every subtraction alone:
// glslang marks the subtractions NoContraction (precise); the fmas get it here.
constexpr spirv::FloatArithmetic kCompiled = spirv::float_arithmetic(shaders::rescore_spv);
constexpr std::size_t kSpirvWords =
    shaders::rescore_spv.size() + 3 * (kCompiled.fmas - kCompiled.precise_fmas);
constexpr auto kSpirv = spirv::with_precise_fmas<kSpirvWords>(shaders::rescore_spv);
constexpr spirv::FloatArithmetic kArithmetic = spirv::float_arithmetic(kSpirv);
static_assert(kArithmetic.fmas > 0 && kArithmetic.precise_fmas == kArithmetic.fmas,
              "rescore.comp: every Fma must be decorated NoContraction");
static_assert(kArithmetic.subs > 0 && kArithmetic.precise_subs == kArithmetic.subs,
              "rescore.comp: every FSub must be decorated NoContraction (precise)");
static_assert(kArithmetic.muls_and_adds == 0,
              "rescore.comp: a float multiply or add (a split fma?)");
// The shader's constants are the algorithm's.
static_assert(FERRY_RESCORE_WORKGROUP_SIZE == ops::kRescoreWorkgroupSize);
static_assert(FERRY_RESCORE_SLOTS == ops::kRescoreSlots);
static_assert(FERRY_RESCORE_FLOAT_UNROLL == ops::kRescoreFloatUnroll);
static_assert(FERRY_RESCORE_INT8_UNROLL == ops::kRescoreInt8Unroll);

// lavapipe ends a shader's loops after this many iterations in all (ops::rescore_loop_iterations).
constexpr std::uint64_t kLavapipeLoopIterations = 65535;

constexpr std::uint32_t kSharedBytes = ops::kRescoreSlots * 8;

constexpr std::array<const char*, 5> kRoles = {"queries", "database", "candidates", "scores",
                                               "indices"};

// A binding's window: bound from its offset rounded down to the device's alignment, to the next
// whole word (int8 vectors are read as the words they lie in; a VkBuffer is a multiple of 16
// bytes, so the word is inside it).
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

// Whether the device's fma() is fused, so that the shader may use it (with the check and fallback
// that make it independent of the denormal mode). Vulkan does not promise it: only drivers known
// to fuse it get it (NVIDIA's always emits FFMA); lavapipe splits it into a multiply and an add.
// FERRY_VULKAN_RESCORE_FMA=integer or =hardware overrides that, for tests and measurements.
bool hardware_fma(const DeviceContext& context) {
  if (const char* choice = std::getenv("FERRY_VULKAN_RESCORE_FMA"); choice != nullptr) {
    if (std::string_view(choice) == "integer") return false;
    if (std::string_view(choice) == "hardware") return true;
  }
  return context.driver_id == VK_DRIVER_ID_NVIDIA_PROPRIETARY;
}

// The workgroups of a dispatch of `queries`: one per query, rows of up to max_x.
std::pair<std::uint32_t, std::uint32_t> grid_of(std::uint32_t queries, std::uint32_t max_x) {
  const std::uint32_t x = std::min(queries, max_x);
  return {x, (queries + x - 1) / x};
}

}  // namespace

Status RescorePipeline::create(const DeviceContext& context) {
  context_ = &context;
  const VkPhysicalDeviceLimits& limits = context.limits;
  offset_alignment_ = std::max<std::uint64_t>(limits.minStorageBufferOffsetAlignment, 4);
  max_window_bytes_ = limits.maxStorageBufferRange;
  max_groups_x_ = std::min<std::uint32_t>(limits.maxComputeWorkGroupCount[0], 65535);
  max_groups_y_ = limits.maxComputeWorkGroupCount[1];
  loop_limit_ = context.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE ? kLavapipeLoopIterations : 0;
  FERRY_RETURN_IF_ERROR(
      program_.create(context, kSpirv, 5, sizeof(RescorePushConstants)));
  if (limits.maxComputeSharedMemorySize < kSharedBytes ||
      limits.maxComputeWorkGroupInvocations < ops::kRescoreWorkgroupSize ||
      limits.maxComputeWorkGroupSize[0] < ops::kRescoreWorkgroupSize) {
    return Status();  // check() says why
  }
  const VkBool32 fused = hardware_fma(context) ? VK_TRUE : VK_FALSE;
  const VkSpecializationMapEntry entry{FERRY_RESCORE_HARDWARE_FMA_ID, 0, sizeof fused};
  const VkSpecializationInfo specialization{1, &entry, sizeof fused, &fused};
  FERRY_ASSIGN_OR_RETURN(pipeline_, program_.make_pipeline(&specialization));
  return Status();
}

void RescorePipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  if (pipeline_ != VK_NULL_HANDLE) {
    context_->vk.vkDestroyPipeline(context_->device, pipeline_, nullptr);
  }
  pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

Status RescorePipeline::check(const ops::RescoreArgs& args,
                              std::span<const backend::Binding> bindings) const {
  if (pipeline_ == VK_NULL_HANDLE) {
    return Status(ErrorCode::unavailable,
                  "the device's compute shared memory (" +
                      std::to_string(context_->limits.maxComputeSharedMemorySize) +
                      " bytes) or workgroup size is below what the rescore shader needs (" +
                      std::to_string(kSharedBytes) + " bytes, " +
                      std::to_string(ops::kRescoreWorkgroupSize) + " invocations)");
  }
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Window window = window_of(bindings[i], offset_alignment_);
    if (window.info.range > max_window_bytes_) {
      return Status(ErrorCode::unavailable,
                    std::string("the ") + kRoles[std::min<std::size_t>(i, kRoles.size() - 1)] +
                        " binding of " + detail::describe_bytes(bindings[i].size) +
                        " exceeds the device's maxStorageBufferRange (" +
                        detail::describe_bytes(max_window_bytes_) +
                        "): rescore the database in parts");
    }
  }
  if (grid_of(args.queries, max_groups_x_).second > max_groups_y_) {
    return Status(ErrorCode::unavailable, std::to_string(args.queries) +
                                              " queries need more workgroups than the device's "
                                              "grid has: rescore them in parts");
  }
  if (loop_limit_ > 0) {
    const std::uint64_t iterations = ops::rescore_loop_iterations(args);
    if (iterations > loop_limit_) {
      return Status(ErrorCode::unavailable,
                    "lavapipe ends a shader's loops after " + std::to_string(loop_limit_) +
                        " iterations, and " + std::to_string(args.candidates) +
                        " candidates of " + std::to_string(args.dims) +
                        " dims (k " + std::to_string(args.k) + ") may need " +
                        std::to_string(iterations) + ": fewer candidates or dims per rescore");
    }
  }
  return Status();
}

Status RescorePipeline::record(VkCommandBuffer command_buffer, const ops::RescoreArgs& args,
                               std::span<const backend::Binding> bindings) const {
  if (bindings.size() != kRoles.size()) {
    return Status(ErrorCode::internal,
                  "rescore on Vulkan: " + std::to_string(bindings.size()) + " bindings");
  }
  std::array<Window, 5> windows{};
  std::array<VkDescriptorBufferInfo, 5> infos{};
  for (std::size_t i = 0; i < windows.size(); ++i) {
    windows[i] = window_of(bindings[i], offset_alignment_);
    infos[i] = windows[i].info;
  }
  // check() has put every window below maxStorageBufferRange (< 4 GiB), so every position and
  // every stride that steps inside one fits 32 bits; a stride that never steps is 0.
  RescorePushConstants push{};
  push.flags = (args.element == RescoreElement::int8 ? FERRY_RESCORE_INT8 : 0u) |
               (args.metric == RescoreMetric::l2 ? FERRY_RESCORE_L2 : 0u);
  push.dims = args.dims;
  push.queries = args.queries;
  push.rows = args.rows;
  push.candidates = args.candidates;
  push.k = args.k;
  push.query_pitch = args.queries > 1 ? static_cast<std::uint32_t>(args.query_stride) : 0u;
  push.database_pitch = args.rows > 1 ? static_cast<std::uint32_t>(args.database_stride) : 0u;
  push.queries_byte = windows[0].first_byte;
  push.database_byte = windows[1].first_byte;
  push.candidates_word = windows[2].first_byte / 4;
  push.scores_word = windows[3].first_byte / 4;
  push.indices_word = windows[4].first_byte / 4;

  const VolkDeviceTable& vk = context_->vk;
  vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  program_.push_storage_buffers(command_buffer, infos);
  vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                        sizeof(push), &push);
  const auto [groups_x, groups_y] = grid_of(args.queries, max_groups_x_);
  vk.vkCmdDispatch(command_buffer, groups_x, groups_y, 1);
  return Status();
}

}  // namespace ferry::vulkan
