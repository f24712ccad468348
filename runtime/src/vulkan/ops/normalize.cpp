#include "vulkan/ops/normalize.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "ferry/shaders/normalize.comp.spv.h"
#include "normalize_abi.h"
#include "vulkan/buffer.hpp"
#include "vulkan/ops/normalize_plan.hpp"
#include "vulkan/spirv_layout.hpp"
#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

// The C++ push constants against the compiled shader (shaders/normalize_abi.h checks
// them against the std430 offsets it expects; this checks the SPIR-V agrees).
using shaders::NormalizePushConstants;
constexpr spirv::PushConstantLayout kNormalizeLayout =
    spirv::push_constant_layout(shaders::normalize_spv);
static_assert(kNormalizeLayout.found, "normalize.comp must declare one push-constant block");
static_assert(kNormalizeLayout.member_count == 19);
static_assert(kNormalizeLayout.offsets[0] == offsetof(NormalizePushConstants, src_origin));
static_assert(kNormalizeLayout.offsets[1] == offsetof(NormalizePushConstants, image_stride));
static_assert(kNormalizeLayout.offsets[2] == offsetof(NormalizePushConstants, channel_stride));
static_assert(kNormalizeLayout.offsets[3] == offsetof(NormalizePushConstants, row_stride));
static_assert(kNormalizeLayout.offsets[4] == offsetof(NormalizePushConstants, pixel_step));
static_assert(kNormalizeLayout.offsets[5] == offsetof(NormalizePushConstants, width));
static_assert(kNormalizeLayout.offsets[6] == offsetof(NormalizePushConstants, height));
static_assert(kNormalizeLayout.offsets[7] == offsetof(NormalizePushConstants, image_count));
static_assert(kNormalizeLayout.offsets[8] == offsetof(NormalizePushConstants, channels));
static_assert(kNormalizeLayout.offsets[9] == offsetof(NormalizePushConstants, output_type));
static_assert(kNormalizeLayout.offsets[10] == offsetof(NormalizePushConstants, dst_origin));
static_assert(kNormalizeLayout.offsets[11] == offsetof(NormalizePushConstants, pixel_elements));
static_assert(kNormalizeLayout.offsets[12] == offsetof(NormalizePushConstants, image_gap));
static_assert(kNormalizeLayout.offsets[13] == offsetof(NormalizePushConstants, channel_elements));
static_assert(kNormalizeLayout.offsets[14] == offsetof(NormalizePushConstants, step_x));
static_assert(kNormalizeLayout.offsets[15] == offsetof(NormalizePushConstants, step_rows));
static_assert(kNormalizeLayout.offsets[16] == offsetof(NormalizePushConstants, step_images));
static_assert(kNormalizeLayout.offsets[17] == offsetof(NormalizePushConstants, scale_bits));
static_assert(kNormalizeLayout.offsets[18] == offsetof(NormalizePushConstants, bias_bits));

// The specialization constants of one pipeline, in the order of kSpecializationEntries.
struct Specialization {
  std::uint32_t workgroup_size = 0;
  std::uint32_t vector_channels = 0;  // 0: the element path
  std::uint32_t run_pixels = 0;
  VkBool32 store16 = VK_FALSE;
  VkBool32 planar = VK_TRUE;
  std::uint32_t runs_in_flight = 1;
};
constexpr std::array<VkSpecializationMapEntry, 6> kSpecializationEntries = {{
    {0, offsetof(Specialization, workgroup_size), sizeof(std::uint32_t)},
    {FERRY_NORMALIZE_CHANNELS_ID, offsetof(Specialization, vector_channels),
     sizeof(std::uint32_t)},
    {FERRY_NORMALIZE_RUN_PIXELS_ID, offsetof(Specialization, run_pixels), sizeof(std::uint32_t)},
    {FERRY_NORMALIZE_STORE16_ID, offsetof(Specialization, store16), sizeof(VkBool32)},
    {FERRY_NORMALIZE_PLANAR_ID, offsetof(Specialization, planar), sizeof(VkBool32)},
    {FERRY_NORMALIZE_RUNS_IN_FLIGHT_ID, offsetof(Specialization, runs_in_flight),
     sizeof(std::uint32_t)},
}};

// normalize.comp's grids. Each workgroup builds a lookup table before it streams (about a
// microsecond of integer arithmetic on a GPU), so a grid is at most what the device keeps
// resident, and grid-stride loops cover the rest.
// - Element path: 256 invocations, as many workgroups as the device keeps resident.
// - Vector path: 1024 invocations, as many workgroups as fill half of what the device keeps
//   resident. Half is plenty for invocations that keep 48 source bytes loading while they store
//   earlier ones; it builds the table about once per compute unit, and stays one wave as long as
//   the shader needs at most 64 registers an invocation (it likely needs more than 32, which
//   would make a full grid two waves).
// Without the device's shape: 2^18 invocations.
constexpr std::uint32_t kNormalizeElementWorkgroupSize = 256;
constexpr std::uint32_t kNormalizeVectorWorkgroupSize = 1024;
constexpr std::uint32_t kNormalizeVectorResidentShare = 2;  // its grid fills 1/2 of the resident
constexpr std::uint32_t kNormalizeDefaultInvocations = 1u << 18;

// For measurements (see override_normalize_limits).
constexpr const char* kNormalizeGridVariable = "FERRY_VULKAN_NORMALIZE_GRID";

// A grid of `workgroup_size` (capped by the device) filling 1/share of the resident invocations.
NormalizeGrid normalize_grid(const DeviceContext& device, std::uint32_t workgroup_size,
                             std::uint32_t share, std::uint32_t max_workgroup_size,
                             std::uint32_t max_groups) {
  NormalizeGrid grid;
  grid.workgroup_size = std::min(workgroup_size, max_workgroup_size);
  std::uint32_t groups =
      std::max<std::uint32_t>(kNormalizeDefaultInvocations / grid.workgroup_size, 1);
  if (device.compute_units != 0 && device.threads_per_compute_unit != 0) {
    const std::uint32_t groups_per_unit = std::max<std::uint32_t>(
        device.threads_per_compute_unit / share / grid.workgroup_size, 1);
    groups = device.compute_units * groups_per_unit;
  }
  grid.max_group_count = std::min(groups, max_groups);
  return grid;
}

Result<NormalizeLimits> normalize_limits(const DeviceContext& device) {
  const VkPhysicalDeviceLimits& limits = device.limits;
  NormalizeLimits normalize;
  normalize.offset_alignment = limits.minStorageBufferOffsetAlignment;
  normalize.max_window_bytes = limits.maxStorageBufferRange;
  const std::uint32_t max_workgroup_size =
      std::min(limits.maxComputeWorkGroupSize[0], limits.maxComputeWorkGroupInvocations);
  const std::uint32_t max_groups =
      std::min<std::uint32_t>(limits.maxComputeWorkGroupCount[0], 65535);
  normalize.element_grid = normalize_grid(device, kNormalizeElementWorkgroupSize, 1,
                                          max_workgroup_size, max_groups);
  normalize.vector_grid = normalize_grid(device, kNormalizeVectorWorkgroupSize,
                                         kNormalizeVectorResidentShare, max_workgroup_size,
                                         max_groups);
  // A CPU implementation has no load latency to hide; one run at a time also keeps each vector
  // path pipeline's compile short (several times 0.1 s on lavapipe otherwise).
  if (device.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU) normalize.source_bytes_in_flight = 1;
  if (const char* spec = std::getenv(kNormalizeGridVariable); spec != nullptr && spec[0] != 0) {
    Status overridden = override_normalize_limits(spec, max_workgroup_size, max_groups, normalize);
    if (!overridden.ok()) return overridden.with_context(kNormalizeGridVariable);
  }
  return normalize;
}

}  // namespace

Status NormalizePipeline::create(const DeviceContext& context) {
  context_ = &context;
  FERRY_ASSIGN_OR_RETURN(limits_, normalize_limits(context));
  // Binding 0: the source window, 1: the destination window.
  FERRY_RETURN_IF_ERROR(program_.create(context, shaders::normalize_spv, 2,
                                        sizeof(NormalizePushConstants)));
  FERRY_ASSIGN_OR_RETURN(element_pipeline_, make_pipeline(0, 0, false, true));
  return Status();
}

Result<VkPipeline> NormalizePipeline::make_pipeline(std::uint32_t vector_channels,
                                                    std::uint32_t run_pixels, bool store16,
                                                    bool planar) const {
  const NormalizeLimits& limits = limits_;
  Specialization values;
  // The path's workgroup size, which the plan counts with.
  values.workgroup_size = vector_channels != 0 ? limits.vector_grid.workgroup_size
                                               : limits.element_grid.workgroup_size;
  values.vector_channels = vector_channels;
  values.run_pixels = run_pixels;
  values.store16 = store16 ? VK_TRUE : VK_FALSE;
  values.planar = planar ? VK_TRUE : VK_FALSE;
  if (vector_channels != 0) {
    // As many whole runs as fit the device's bytes in flight, 1 to the shader's maximum.
    const std::uint32_t run_bytes = run_pixels * vector_channels;
    values.runs_in_flight = std::clamp<std::uint32_t>(limits.source_bytes_in_flight / run_bytes,
                                                      1, FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT);
  }
  VkSpecializationInfo specialization{};
  specialization.mapEntryCount = static_cast<std::uint32_t>(kSpecializationEntries.size());
  specialization.pMapEntries = kSpecializationEntries.data();
  specialization.dataSize = sizeof(values);
  specialization.pData = &values;

  Result<VkPipeline> pipeline = program_.make_pipeline(&specialization);
  if (!pipeline.ok()) {
    const std::string path =
        vector_channels == 0
            ? std::string("element path")
            : "vector path (" + std::to_string(vector_channels) + " channels, runs of " +
                  std::to_string(run_pixels) + " pixels, " + (store16 ? "16" : "32") +
                  "-bit elements, " + (planar ? "nchw" : "nhwc") + ")";
    Status status = pipeline.status();
    status.with_context("normalize on Vulkan: making the " + path + " pipeline");
    return status;
  }
  return pipeline;
}

void NormalizePipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  const VolkDeviceTable& vk = context_->vk;
  for (VkPipeline& pipeline : vector_pipelines_) {
    if (pipeline != VK_NULL_HANDLE) vk.vkDestroyPipeline(context_->device, pipeline, nullptr);
    pipeline = VK_NULL_HANDLE;
  }
  if (element_pipeline_ != VK_NULL_HANDLE) {
    vk.vkDestroyPipeline(context_->device, element_pipeline_, nullptr);
  }
  element_pipeline_ = VK_NULL_HANDLE;
  program_.destroy();
  context_ = nullptr;
}

Result<VkPipeline> NormalizePipeline::pipeline_for(const ops::NormalizeArgs& command,
                                                   const NormalizeDispatch& dispatch) const {
  if (dispatch.vector_pixels == 0) return element_pipeline_;
  const std::uint32_t channels = command.channels;
  const bool store16 = command.output_type != ElementType::float32;
  const std::uint32_t run_pixels = store16 ? dispatch.vector_pixels : 4;
  // One channel is the same either way; the planar variant serves it.
  const bool planar = channels == 1 || command.output_layout == ImageLayout::nchw;
  if (channels == 0 || channels > shaders::kNormalizeMaxChannels ||
      (run_pixels != 4 && run_pixels != 8) || (!store16 && dispatch.vector_pixels != 4)) {
    return Status(ErrorCode::internal,
                  "normalize on Vulkan: no vector path for " + std::to_string(channels) +
                      " channels in runs of " + std::to_string(dispatch.vector_pixels) +
                      " pixels");
  }
  const std::uint32_t kind = !store16 ? 0 : run_pixels == 8 ? 1 : 2;
  const std::size_t index = ((channels - 1) * 3 + kind) * 2 + (planar ? 0 : 1);
  std::lock_guard lock(vector_mutex_);
  VkPipeline& pipeline = vector_pipelines_[index];
  if (pipeline == VK_NULL_HANDLE) {
    FERRY_ASSIGN_OR_RETURN(pipeline, make_pipeline(channels, run_pixels, store16, planar));
  }
  return pipeline;
}

Status NormalizePipeline::check(const ops::NormalizeArgs& args,
                                std::span<const backend::Binding> bindings) const {
  return plan_normalize(args, bindings[0].offset + args.first_read, bindings[1].offset, limits_)
      .status();
}

Status NormalizePipeline::record(VkCommandBuffer command_buffer, const ops::NormalizeArgs& command,
                                 std::span<const backend::Binding> bindings) const {
  const VkBuffer src = static_cast<const VulkanBuffer*>(bindings[0].buffer)->handle();
  const VkBuffer dst = static_cast<const VulkanBuffer*>(bindings[1].buffer)->handle();
  FERRY_ASSIGN_OR_RETURN(
      const std::vector<NormalizeDispatch> dispatches,
      plan_normalize(command, bindings[0].offset + command.first_read, bindings[1].offset, limits_));
  // Every dispatch's pipeline first, so that a failure to make one records nothing.
  std::vector<VkPipeline> pipelines;
  pipelines.reserve(dispatches.size());
  for (const NormalizeDispatch& dispatch : dispatches) {
    FERRY_ASSIGN_OR_RETURN(VkPipeline pipeline, pipeline_for(command, dispatch));
    pipelines.push_back(pipeline);
  }
  const VolkDeviceTable& vk = context_->vk;
  // What was bound before is unknown (an earlier normalize may have left a vector path's).
  VkPipeline bound = VK_NULL_HANDLE;
  std::vector<WindowAccess> since_barrier;  // this command's windows since its last barrier
  for (std::size_t d = 0; d < dispatches.size(); ++d) {
    const NormalizeDispatch& dispatch = dispatches[d];
    if (pipelines[d] != bound) {
      vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines[d]);
      bound = pipelines[d];
    }
    const WindowAccess read{src, dispatch.src_window_offset,
                            dispatch.src_window_offset + dispatch.src_window_size, false};
    const WindowAccess written{dst, dispatch.dst_window_offset,
                               dispatch.dst_window_offset + dispatch.dst_window_size, true};
    bool conflict = false;
    for (const WindowAccess& earlier : since_barrier) {
      conflict = conflict || earlier.conflicts(read) || earlier.conflicts(written);
    }
    if (conflict) {
      // Dispatches of one command never touch the same bytes; only their windows overlap (by
      // less than the offset alignment).
      record_compute_barrier(vk, command_buffer);
      since_barrier.clear();
    }
    since_barrier.push_back(read);
    since_barrier.push_back(written);

    std::array<VkDescriptorBufferInfo, 2> windows{};
    windows[0].buffer = src;
    windows[0].offset = dispatch.src_window_offset;
    windows[0].range = dispatch.src_window_size;
    windows[1].buffer = dst;
    windows[1].offset = dispatch.dst_window_offset;
    windows[1].range = dispatch.dst_window_size;
    program_.push_storage_buffers(command_buffer, windows);
    vk.vkCmdPushConstants(command_buffer, program_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(dispatch.push), &dispatch.push);
    vk.vkCmdDispatch(command_buffer, dispatch.group_count, 1, 1);
  }
  return Status();
}

}  // namespace ferry::vulkan
