#include "vulkan/ops/hamming_topk.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "ferry/shaders/hamming_topk.comp.spv.h"
#include "ferry/shaders/hamming_topk_coopmat.comp.spv.h"
#include "ferry/shaders/hamming_topk_coopmat_fill.comp.spv.h"
#include "ops/hamming_topk.hpp"
#include "vulkan/buffer.hpp"
#include "vulkan/ops/hamming_topk_plan.hpp"
#include "vulkan/spirv_layout.hpp"

namespace ferry::vulkan {
namespace {

using shaders::HammingTopkPushConstants;
constexpr spirv::PushConstantLayout kLayout = spirv::push_constant_layout(shaders::hamming_topk_spv);
static_assert(kLayout.found, "hamming_topk.comp must declare one push-constant block");
static_assert(kLayout.member_count == 21);
static_assert(kLayout.offsets[0] == offsetof(HammingTopkPushConstants, flags));
static_assert(kLayout.offsets[5] == offsetof(HammingTopkPushConstants, group_items));
static_assert(kLayout.offsets[6] == offsetof(HammingTopkPushConstants, cap));
static_assert(kLayout.offsets[17] == offsetof(HammingTopkPushConstants, scratch_word));
static_assert(kLayout.offsets[18] == offsetof(HammingTopkPushConstants, bound_base));
static_assert(kLayout.offsets[20] == offsetof(HammingTopkPushConstants, pool_counts));
// The cooperative-matrix scan takes the same push constants (and bindings).
constexpr spirv::PushConstantLayout kCoopmatLayout =
    spirv::push_constant_layout(shaders::hamming_topk_coopmat_spv);
static_assert(kCoopmatLayout.found && kCoopmatLayout.member_count == kLayout.member_count);
static_assert(kCoopmatLayout.offsets[20] == offsetof(HammingTopkPushConstants, pool_counts));
constexpr spirv::PushConstantLayout kFillLayout =
    spirv::push_constant_layout(shaders::hamming_topk_coopmat_fill_spv);
static_assert(kFillLayout.found && kFillLayout.member_count == kLayout.member_count);
static_assert(kFillLayout.offsets[20] == offsetof(HammingTopkPushConstants, pool_counts));
// The shader's constants are the plan's.
static_assert(FERRY_HAMMING_WORKGROUP_SIZE == ops::kHammingWorkgroupSize);
static_assert(FERRY_HAMMING_MERGE_GROUP == ops::kHammingMergeGroup);
static_assert(FERRY_HAMMING_MAX_BITS == kHammingMaxCodeBits);
static_assert(FERRY_HAMMING_MAX_K == kHammingMaxK);
static_assert(FERRY_HAMMING_POSITION_BITS == ops::kHammingScanPositionBits);
// 32 KiB: what lavapipe offers (NVIDIA: 48 KiB).
static_assert(kHammingSharedBytes <= 32768);

// lavapipe (llvmpipe) ends an invocation's loops once they have run 65535 iterations in all
// (LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of the shader): on a CPU implementation a
// workgroup scans at most this many rows (64 rounds), so that even a compaction every round (a
// few hundred iterations each) stays far below. Bindings there are at most 128 MiB, so spans this
// short still fit the grid (a workgroup takes one span).
constexpr std::uint32_t kCpuMaxSpan = 4096;
static_assert(kCpuMaxSpan >= ops::kHammingChunkRows && kCpuMaxSpan % FERRY_HAMMING_ROUND_ROWS == 0);

// The same limit for the pooled search: a query whose pool overflows takes an exact pass of
// about 2 x rows / 256 x (words + 2) iterations, so pools only for databases that keep it at half
// the limit.
constexpr std::uint64_t kCpuMaxExactIterations = 32768;

// For measurements: the scan's preferred tile (hamming_scan_shape).
constexpr const char* kTileVariable = "FERRY_VULKAN_HAMMING_TILE";

// The workgroups the device runs at once, for the spans' length: from its compute units where the
// driver says (NVIDIA), one per thread on a CPU implementation, else 1024 (2^18 invocations).
std::uint64_t resident_groups(const DeviceContext& context) {
  constexpr std::uint32_t kGroup = FERRY_HAMMING_WORKGROUP_SIZE;
  if (context.compute_units != 0 && context.threads_per_compute_unit != 0) {
    return std::uint64_t{context.compute_units} *
           std::max<std::uint32_t>(context.threads_per_compute_unit / kGroup, 1);
  }
  if (context.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  return (1u << 18) / kGroup;
}

constexpr std::array<const char*, 5> kRoles = {"queries", "database", "distances", "indices",
                                               "scratch"};

// A binding's window: bound from its offset rounded down to the device's alignment.
struct Window {
  VkDescriptorBufferInfo info{};
  std::uint32_t first_word = 0;  // where the binding's data starts in the window
};

Window window_of(const backend::Binding& binding, std::uint64_t alignment) {
  Window window;
  const std::uint64_t start = binding.offset - binding.offset % alignment;
  window.info.buffer = static_cast<const VulkanBuffer*>(binding.buffer)->handle();
  window.info.offset = start;
  window.info.range = binding.offset - start + binding.size;
  window.first_word = static_cast<std::uint32_t>((binding.offset - start) / 4);
  return window;
}

// The five bindings' windows and their descriptors. Without scratch the shader's scratch binding
// is never touched, and the indices' window stands in for it.
struct Windows {
  std::array<Window, 5> windows{};
  std::array<VkDescriptorBufferInfo, 5> infos{};
};
Windows windows_of(std::span<const backend::Binding> bindings, bool scratch,
                   std::uint64_t alignment) {
  Windows all;
  for (std::size_t i = 0; i < 4; ++i) all.windows[i] = window_of(bindings[i], alignment);
  all.windows[4] = scratch ? window_of(bindings[4], alignment) : all.windows[3];
  for (std::size_t i = 0; i < all.infos.size(); ++i) all.infos[i] = all.windows[i].info;
  return all;
}

// Where each binding's data starts in its window, as the shader reads them.
void set_first_words(HammingTopkPushConstants& push, const std::array<Window, 5>& windows) {
  push.queries_word = windows[0].first_word;
  push.database_word = windows[1].first_word;
  push.distances_word = windows[2].first_word;
  push.indices_word = windows[3].first_word;
  push.scratch_word = windows[4].first_word;
}

}  // namespace

Status HammingTopkPipeline::create(const DeviceContext& context) {
  context_ = &context;
  const VkPhysicalDeviceLimits& limits = context.limits;
  offset_alignment_ = std::max<std::uint64_t>(limits.minStorageBufferOffsetAlignment, 4);
  max_window_bytes_ = limits.maxStorageBufferRange;
  max_groups_x_ = std::min<std::uint32_t>(limits.maxComputeWorkGroupCount[0], 65535);
  max_groups_y_ = limits.maxComputeWorkGroupCount[1];
  resident_groups_ = resident_groups(context);
  if (context.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU) max_span_ = kCpuMaxSpan;
  if (const char* tile = std::getenv(kTileVariable); tile != nullptr && tile[0] != '\0') {
    const std::string_view value(tile);
    for (const std::uint32_t allowed : {4u, 8u, 16u, 32u}) {
      if (value == std::to_string(allowed)) preferred_tile_ = allowed;
    }
    if (preferred_tile_ == 0) {
      return Status(ErrorCode::invalid_argument, std::string(kTileVariable) + ": '" +
                                                     std::string(value) +
                                                     "' is not 4, 8, 16 or 32");
    }
  }
  if (const char* scan = std::getenv("FERRY_VULKAN_HAMMING_SCAN"); scan != nullptr) {
    // The device checked the value when it opened (physical_devices.cpp).
    const std::string_view value(scan);
    if (value == "buffered") pools_ = Pools::never;
    if (value == "pooled-exact") pools_ = Pools::exact_only;
    coopmat_scan_ = value == "coopmat";
  }
  if (context.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    max_exact_iterations_ = kCpuMaxExactIterations;
  }
  FERRY_RETURN_IF_ERROR(program_.create(context, shaders::hamming_topk_spv, 5,
                                        sizeof(HammingTopkPushConstants)));
  // The device offers the shader's shared memory and workgroup size (kNeeds), or it would not
  // be here; check() says so again if it ever is.
  if (!kNeeds.missing_from(context.features).empty()) return Status();
  FERRY_ASSIGN_OR_RETURN(merge_pipeline_, make_pipeline(program_, 0));
  // Only on a device set up for them: offered, and not refused with
  // FERRY_VULKAN_HAMMING_SCAN=portable (device.cpp).
  if (context.cooperative_matrix) {
    FERRY_RETURN_IF_ERROR(coopmat_program_.create(context, shaders::hamming_topk_coopmat_spv, 5,
                                                  sizeof(HammingTopkPushConstants)));
    FERRY_RETURN_IF_ERROR(fill_program_.create(context, shaders::hamming_topk_coopmat_fill_spv, 5,
                                               sizeof(HammingTopkPushConstants)));
    coopmat_ = true;
  }
  return Status();
}

Result<VkPipeline> HammingTopkPipeline::make_pipeline(const ComputeProgram& program,
                                                      std::uint32_t tile,
                                                      std::uint32_t words) const {
  const std::array<VkSpecializationMapEntry, 2> entries = {
      VkSpecializationMapEntry{FERRY_HAMMING_TILE_ID, 0, sizeof(std::uint32_t)},
      VkSpecializationMapEntry{FERRY_HAMMING_WORDS_ID, sizeof(std::uint32_t),
                               sizeof(std::uint32_t)}};
  const std::array<std::uint32_t, 2> values = {tile, words};
  VkSpecializationInfo specialization{};
  specialization.mapEntryCount = words == 0 ? 1 : 2;
  specialization.pMapEntries = entries.data();
  specialization.dataSize = specialization.mapEntryCount * sizeof(std::uint32_t);
  specialization.pData = values.data();
  Result<VkPipeline> pipeline = program.make_pipeline(&specialization);
  if (!pipeline.ok()) {
    Status status = pipeline.status();
    const char* scan = &program == &coopmat_program_ ? "cooperative-matrix scan"
                       : &program == &fill_program_  ? "cooperative-matrix fill"
                                                     : "scan";
    status.with_context(
        tile == 0 ? std::string("hamming_topk on Vulkan: making the merge pipeline")
                  : "hamming_topk on Vulkan: making the " + std::string(scan) +
                        " pipeline for tiles of " + std::to_string(tile) + " queries" +
                        (words == 0 ? "" : " and codes of " + std::to_string(words) + " words"));
    return status;
  }
  return pipeline;
}

Result<VkPipeline> HammingTopkPipeline::scan_pipeline(std::uint32_t tile) const {
  if (tile < FERRY_HAMMING_MIN_TILE || tile > FERRY_HAMMING_MAX_TILE || !std::has_single_bit(tile)) {
    return Status(ErrorCode::internal, "hamming_topk on Vulkan: no scan pipeline for tiles of " +
                                           std::to_string(tile) + " queries");
  }
  const int index = std::countr_zero(FERRY_HAMMING_MAX_TILE / tile);  // 32 -> 0 ... 4 -> 3
  std::lock_guard lock(scan_mutex_);
  VkPipeline& pipeline = scan_pipelines_[static_cast<std::size_t>(index)];
  if (pipeline == VK_NULL_HANDLE) {
    FERRY_ASSIGN_OR_RETURN(pipeline, make_pipeline(program_, tile));
  }
  return pipeline;
}

Result<VkPipeline> HammingTopkPipeline::coopmat_pipeline(std::uint32_t tile) const {
  if (!coopmat_ || (tile != FERRY_HAMMING_MAX_TILE && tile != FERRY_HAMMING_COOPMAT_MIN_TILE)) {
    return Status(ErrorCode::internal,
                  "hamming_topk on Vulkan: no cooperative-matrix scan pipeline for tiles of " +
                      std::to_string(tile) + " queries");
  }
  std::lock_guard lock(scan_mutex_);
  VkPipeline& pipeline = coopmat_pipelines_[tile == FERRY_HAMMING_MAX_TILE ? 0 : 1];
  if (pipeline == VK_NULL_HANDLE) {
    FERRY_ASSIGN_OR_RETURN(pipeline, make_pipeline(coopmat_program_, tile));
  }
  return pipeline;
}

Result<VkPipeline> HammingTopkPipeline::fill_pipeline(std::uint32_t tile,
                                                      std::uint32_t words) const {
  if (!coopmat_ || hamming_coopmat_fill_tile(words, tile) != tile) {
    return Status(ErrorCode::internal,
                  "hamming_topk on Vulkan: no cooperative-matrix fill pipeline for tiles of " +
                      std::to_string(tile) + " queries and codes of " + std::to_string(words) +
                      " words");
  }
  // Tiles 256 -> 0, 128 -> 1, 64 -> 2, then the words.
  const auto tile_index =
      static_cast<std::size_t>(std::countr_zero(FERRY_HAMMING_FILL_MAX_TILE / tile));
  const std::size_t index = tile_index * (kHammingMaxCodeBits / 32) + (words - 1);
  std::lock_guard lock(scan_mutex_);
  VkPipeline& pipeline = fill_pipelines_[index];
  if (pipeline == VK_NULL_HANDLE) {
    FERRY_ASSIGN_OR_RETURN(pipeline, make_pipeline(fill_program_, tile, words));
  }
  return pipeline;
}

void HammingTopkPipeline::destroy() noexcept {
  if (context_ == nullptr) return;
  const auto destroy_all = [this](std::span<VkPipeline> pipelines) {
    for (VkPipeline& pipeline : pipelines) {
      if (pipeline != VK_NULL_HANDLE) {
        context_->vk.vkDestroyPipeline(context_->device, pipeline, nullptr);
      }
      pipeline = VK_NULL_HANDLE;
    }
  };
  destroy_all(scan_pipelines_);
  destroy_all(coopmat_pipelines_);
  destroy_all(fill_pipelines_);
  destroy_all(std::span(&merge_pipeline_, 1));
  fill_program_.destroy();
  coopmat_program_.destroy();
  coopmat_ = false;
  program_.destroy();
  context_ = nullptr;
}

Status HammingTopkPipeline::check(const ops::HammingTopkArgs&,
                                  std::span<const backend::Binding> bindings) const {
  if (merge_pipeline_ == VK_NULL_HANDLE) {
    return Status(ErrorCode::unavailable,
                  "hamming_topk on Vulkan: " + context_->device_name + " lacks " +
                      kNeeds.missing_from(context_->features) + ", which its shader needs");
  }
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Window window = window_of(bindings[i], offset_alignment_);
    if (window.info.range > max_window_bytes_ || window.info.range / 4 > 0xFFFFFFFFull) {
      return Status(ErrorCode::unavailable,
                    std::string("the ") + kRoles[std::min<std::size_t>(i, 4)] + " binding of " +
                        std::to_string(bindings[i].size) + " bytes exceeds the device's " +
                        "maxStorageBufferRange (" + std::to_string(max_window_bytes_) +
                        " bytes): search the database in parts");
    }
  }
  return Status();
}

Result<bool> HammingTopkPipeline::record_pooled(VkCommandBuffer command_buffer,
                                                const ops::HammingTopkArgs& args,
                                                std::span<const backend::Binding> bindings) const {
  if (pools_ == Pools::never || bindings.size() <= 4) return false;
  const HammingPoolPlan plan = hamming_pool_plan(args, bindings[4].size);
  if (plan.pool_cap == 0) return false;
  constexpr std::uint32_t kGroup = FERRY_HAMMING_WORKGROUP_SIZE;
  const std::uint64_t exact_iterations =
      2 * ((std::uint64_t{args.rows} + kGroup - 1) / kGroup) * (args.words + 2);
  if (max_exact_iterations_ != 0 && exact_iterations > max_exact_iterations_) return false;
  // The sample's pass and the fill: with cooperative matrices where the device has them and the
  // search fits (hamming_coopmat_fill_tile), else the portable scan's pipeline, whose tile is the
  // scan's for k = 1 (the pooled scan keeps no key buffers: 32 queries unless fewer hold the
  // slice or the codes need less). The spans of either as the workgroups they run at once: for
  // the cooperative-matrix fill, whose query matrices and accumulators take about 100 registers
  // an invocation, 2 a compute unit (an estimate: ncu does not profile Vulkan kernels).
  const std::uint32_t fill_tile = coopmat_ ? hamming_coopmat_fill_tile(args.words, plan.slice) : 0;
  const std::uint32_t tile =
      fill_tile != 0 ? fill_tile
                     : hamming_scan_shape(1, args.words, plan.slice, preferred_tile_).tile;
  std::uint64_t resident = resident_groups_;
  if (fill_tile != 0 && context_->compute_units != 0) resident = context_->compute_units * 2ull;
  const std::uint32_t span = std::min(
      ops::hamming_scan_span(args.rows, plan.slice, tile, FERRY_HAMMING_ROUND_ROWS, resident),
      max_span_);
  FERRY_ASSIGN_OR_RETURN(const VkPipeline scan, fill_tile != 0
                                                    ? fill_pipeline(fill_tile, args.words)
                                                    : scan_pipeline(tile));
  const ComputeProgram& scan_program = fill_tile != 0 ? fill_program_ : program_;
  const VolkDeviceTable& vk = context_->vk;
  const Windows all = windows_of(bindings, true, offset_alignment_);
  const auto& windows = all.windows;
  const auto& infos = all.infos;
  HammingTopkPushConstants common{};
  common.words = args.words;
  common.k = args.k;
  common.pool_cap = pools_ == Pools::exact_only ? 0 : plan.pool_cap;
  common.pool_counts = plan.counts_word;
  common.bound_base = plan.bound_base;
  set_first_words(common, windows);
  VkPipeline bound = VK_NULL_HANDLE;
  const ComputeProgram* bound_program = nullptr;  // null before the first dispatch
  const auto dispatch = [&](const ComputeProgram& program, VkPipeline pipeline,
                            const HammingTopkPushConstants& push, std::uint32_t groups_x,
                            std::uint32_t groups_y) {
    if (pipeline != bound) {
      vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
      bound = pipeline;
    }
    // Each reads what the one before wrote.
    if (bound_program != nullptr) record_compute_barrier(vk, command_buffer);
    // Descriptors pushed for a program survive the changes between its pipelines.
    if (&program != bound_program) program.push_storage_buffers(command_buffer, infos);
    bound_program = &program;
    vk.vkCmdPushConstants(command_buffer, program.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(push), &push);
    vk.vkCmdDispatch(command_buffer, std::min(groups_x, max_groups_x_), groups_y, 1);
  };
  for (std::uint32_t begin = 0; begin < args.queries; begin += plan.slice) {
    HammingTopkPushConstants push = common;
    push.query_begin = begin;
    push.query_count = std::min(plan.slice, args.queries - begin);
    const std::uint32_t tiles = (push.query_count + tile - 1) / tile;
    // The sample's minima: a span per group of the sample.
    HammingTopkPushConstants minima = push;
    minima.flags = FERRY_HAMMING_FROM_CODES | FERRY_HAMMING_POOLED | FERRY_HAMMING_MINIMA;
    minima.items = plan.sample_rows;
    minima.group_items = ops::kHammingBoundGroupRows;
    minima.groups = plan.sample_groups;
    minima.out_base = plan.minima_base;
    minima.out_stride = plan.sample_groups;
    dispatch(scan_program, scan, minima, minima.groups, tiles);
    // The bounds: the k smallest minima per query (a merge of one group), the pools emptied.
    HammingTopkPushConstants bounds = push;
    bounds.flags = FERRY_HAMMING_POOLED;
    bounds.items = plan.sample_groups;
    bounds.groups = 1;
    bounds.group_items = ops::kHammingMergeGroup;
    bounds.in_base = plan.minima_base;
    bounds.in_stride = plan.sample_groups;
    bounds.out_base = plan.bound_base;
    bounds.out_stride = args.k;
    dispatch(program_, merge_pipeline_, bounds, 1, push.query_count);
    // The scan filling the pools, then the selection.
    HammingTopkPushConstants fill = push;
    fill.flags = FERRY_HAMMING_FROM_CODES | FERRY_HAMMING_POOLED | FERRY_HAMMING_BOUNDED;
    fill.items = args.rows;
    fill.group_items = span;
    fill.groups = (args.rows + span - 1) / span;
    dispatch(scan_program, scan, fill, fill.groups, tiles);
    HammingTopkPushConstants select = push;
    select.flags = FERRY_HAMMING_SELECT | FERRY_HAMMING_FINAL;
    select.items = args.rows;
    dispatch(program_, merge_pipeline_, select, 1, push.query_count);
  }
  return true;
}

Status HammingTopkPipeline::record(VkCommandBuffer command_buffer, const ops::HammingTopkArgs& args,
                                   std::span<const backend::Binding> bindings) const {
  // Level 0 scans spans of rows for tiles of queries (hamming_topk_plan.hpp); the plan is made
  // for those spans within the scratch the public call reserved (bound last, when not 0).
  // The cooperative-matrix scan where asked for, the device has it and the search fits its tiles.
  const HammingScanShape coopmat_shape = coopmat_ && coopmat_scan_
                                            ? hamming_coopmat_scan_shape(args.k, args.queries)
                                            : HammingScanShape{};
  const bool coopmat = coopmat_shape.tile != 0;
  if (!coopmat) {
    FERRY_ASSIGN_OR_RETURN(const bool pooled, record_pooled(command_buffer, args, bindings));
    if (pooled) return Status();
  }
  const HammingScanShape shape =
      coopmat ? coopmat_shape : hamming_scan_shape(args.k, args.words, args.queries, preferred_tile_);
  const std::uint32_t span =
      std::min(ops::hamming_scan_span(args.rows, args.queries, shape.tile,
                                      FERRY_HAMMING_ROUND_ROWS, resident_groups_),
               max_span_);
  const bool has_scratch = bindings.size() > 4;
  ops::HammingTopkArgs planned = args;
  planned.scratch_budget = has_scratch ? bindings[4].size : 0;
  // The bound passes (ops::hamming_bound_sample_groups): per query, the sample's group minima and
  // their sorted k smallest (2 words a candidate), in the scratch after the candidates. Only for
  // k in [kBoundMinK, kBoundMaxK]: measured on the H200 (docs/PERFORMANCE.md), the passes cost
  // more than they save at k = 1 (the scan keeps one row anyway) and for large k (the sample
  // grows with k, to the whole database at k = 1000: 8.2 and 250 ms instead of 7.4 and 34).
  constexpr std::uint32_t kBoundMinK = 2, kBoundMaxK = 64;
  const bool bounded = args.k >= kBoundMinK && args.k <= kBoundMaxK;
  FERRY_ASSIGN_OR_RETURN(const ops::HammingTopkPlan plan,
                         bounded ? ops::plan_bounded_hamming_topk(planned, "hamming_topk", span, 2,
                                                                  2 * args.k)
                                 : ops::plan_hamming_topk(planned, "hamming_topk", span));
  const std::uint32_t sample_groups = plan.bound_groups;
  if (plan.scratch_bytes > 0 && !has_scratch) {
    return Status(ErrorCode::internal, "hamming_topk: the plan needs scratch memory, none bound");
  }
  // Each dispatch: a pass of the plan, or a bound pass before a slice's level 0 (the scan over
  // the sample's groups with k = 1: each group's nearest; then a merge of those minima keeping
  // k, whose k-th is the bound).
  struct Dispatch {
    ops::HammingPass pass;
    std::uint32_t k = 0;
    std::uint32_t flags = 0;
  };
  std::vector<Dispatch> dispatches;
  std::uint32_t minima_base = 0, bound_base = 0;  // candidates
  if (sample_groups != 0) {
    std::uint32_t slice = 0;
    for (const ops::HammingPass& pass : plan.passes) slice = std::max(slice, pass.query_count);
    minima_base = static_cast<std::uint32_t>(plan.extra_word_base / 2);
    bound_base = minima_base + slice * sample_groups;
  }
  for (const ops::HammingPass& pass : plan.passes) {
    if (pass.from_codes && sample_groups != 0) {
      ops::HammingPass sample_pass = pass;
      sample_pass.final = false;
      sample_pass.group_items = ops::kHammingBoundGroupRows;
      sample_pass.items = ops::hamming_bound_sample_rows(args.rows, sample_groups);
      sample_pass.groups = sample_groups;
      sample_pass.out_base = minima_base;
      sample_pass.out_stride = sample_groups;
      dispatches.push_back({sample_pass, 1, 0});
      ops::HammingPass bound_pass = pass;
      bound_pass.from_codes = false;
      bound_pass.final = false;
      bound_pass.items = sample_groups;
      bound_pass.group_items = ops::kHammingMergeGroup;
      bound_pass.groups = 1;
      bound_pass.in_base = minima_base;
      bound_pass.in_stride = sample_groups;
      bound_pass.out_base = bound_base;
      bound_pass.out_stride = args.k;
      dispatches.push_back({bound_pass, args.k, 0});
      dispatches.push_back({pass, args.k, FERRY_HAMMING_BOUNDED});
    } else {
      dispatches.push_back({pass, args.k, 0});
    }
  }
  FERRY_ASSIGN_OR_RETURN(const VkPipeline scan,
                         coopmat ? coopmat_pipeline(shape.tile) : scan_pipeline(shape.tile));
  const ComputeProgram& scan_program = coopmat ? coopmat_program_ : program_;
  const VolkDeviceTable& vk = context_->vk;
  const Windows all = windows_of(bindings, plan.scratch_bytes > 0, offset_alignment_);
  const auto& windows = all.windows;
  const auto& infos = all.infos;
  VkPipeline bound = VK_NULL_HANDLE;
  const ComputeProgram* bound_program = nullptr;
  for (std::size_t p = 0; p < dispatches.size(); ++p) {
    const ops::HammingPass& pass = dispatches[p].pass;
    const VkPipeline pipeline = pass.from_codes ? scan : merge_pipeline_;
    const ComputeProgram& program = pass.from_codes ? scan_program : program_;
    if (pipeline != bound) {
      // Push descriptors and constants survive a pipeline change within a program (the layout
      // is the same); the cooperative-matrix scan's program has a layout of its own.
      vk.vkCmdBindPipeline(command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
      if (&program != bound_program) program.push_storage_buffers(command_buffer, infos);
      bound = pipeline;
      bound_program = &program;
    }
    if (p > 0) {
      // Each pass reads the candidates the one before wrote, and overwrites what an earlier one
      // read.
      record_compute_barrier(vk, command_buffer);
    }
    HammingTopkPushConstants push{};
    push.flags = (pass.from_codes ? FERRY_HAMMING_FROM_CODES : 0u) |
                 (pass.final ? FERRY_HAMMING_FINAL : 0u) | dispatches[p].flags;
    push.words = args.words;
    push.k = dispatches[p].k;
    push.bound_base = bound_base;
    push.items = pass.items;
    push.groups = pass.groups;
    push.group_items = pass.group_items;
    push.cap = shape.cap;
    push.query_begin = pass.query_begin;
    push.query_count = pass.query_count;
    push.in_base = pass.in_base;
    push.in_stride = pass.in_stride;
    push.out_base = pass.out_base;
    push.out_stride = pass.out_stride;
    set_first_words(push, windows);
    vk.vkCmdPushConstants(command_buffer, program.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          sizeof(push), &push);
    const std::uint32_t rows_of_groups =
        pass.from_codes ? (pass.query_count + shape.tile - 1) / shape.tile : pass.query_count;
    if (rows_of_groups > max_groups_y_) {
      return Status(ErrorCode::internal, "hamming_topk: a slice of " +
                                             std::to_string(pass.query_count) +
                                             " queries exceeds the device's grid");
    }
    vk.vkCmdDispatch(command_buffer, std::min(pass.groups, max_groups_x_), rows_of_groups, 1);
  }
  return Status();
}

bool hamming_opens_coopmat(const CooperativeMatrixSupport& support,
                           const DeviceFeatures& features) {
  return support.requested && hamming_coopmat_unsupported(support).empty() &&
         HammingTopkPipeline::kNeeds.missing_from(features).empty();
}

std::string hamming_search_path(const CooperativeMatrixSupport& support,
                                const DeviceFeatures& features) {
  if (const std::string missing = HammingTopkPipeline::kNeeds.missing_from(features);
      !missing.empty()) {
    return "none: hamming_topk needs " + missing;
  }
  if (hamming_opens_coopmat(support, features)) {
    return "int8 cooperative matrices (VK_NV_cooperative_matrix) for batches of " +
           std::to_string(kHammingCoopmatFillMinQueries) +
           " queries or more, subgroup popcounts for fewer";
  }
  const std::string why = support.requested ? hamming_coopmat_unsupported(support)
                                            : "FERRY_VULKAN_HAMMING_SCAN=portable";
  return "subgroup popcounts (no cooperative matrices: " + why + ")";
}

}  // namespace ferry::vulkan
