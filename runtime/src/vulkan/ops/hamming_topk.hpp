// hamming_topk on Vulkan: the compute pipelines of shaders/hamming_topk.comp, one dispatch per
// pass of the plan (ops/hamming_topk.hpp), with five storage buffers bound with push descriptors.
// One pipeline per path (specialization constants): the merges', made with the device, and the
// level-0 scan's for each tile size (hamming_topk_plan.hpp), each made the first time a search
// needs it. The pooled search (the default where its pools apply: hamming_pool_plan) runs the
// scan's pipeline over a sample, the merges' for the bounds, the scan's again filling the pools
// and the merges' (its selection) last. Where the device was opened with cooperative matrices
// (DeviceContext::cooperative_matrix: by default where it offers them), the fill is
// shaders/hamming_topk_coopmat_fill.comp's for codes that hamming_coopmat_fill_tile gives a
// tile (same pools, same results). With FERRY_VULKAN_HAMMING_SCAN=coopmat the buffered scan is
// shaders/hamming_topk_coopmat.comp's for the searches hamming_coopmat_scan_shape gives a tile
// (same keys and selection, same results), without pools.
#pragma once

#include <volk.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "core/backend.hpp"
#include "hamming_topk_abi.h"
#include "ops/hamming_topk.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/context.hpp"
#include "vulkan/cooperative_matrix.hpp"

namespace ferry::vulkan {

// The shader's shared memory: the pool, the query codes' quads and 4 words.
inline constexpr std::uint32_t kHammingSharedBytes =
    4 * FERRY_HAMMING_POOL_WORDS + 16 * FERRY_HAMMING_QUERY_QUADS + 4 * 4;

class HammingTopkPipeline {
 public:
  // Nothing optional; the shared memory and workgroup size the shader takes.
  static constexpr DeviceFeatures kNeeds{.compute_shared_bytes = kHammingSharedBytes,
                                         .workgroup_invocations = FERRY_HAMMING_WORKGROUP_SIZE};

  HammingTopkPipeline() = default;
  HammingTopkPipeline(const HammingTopkPipeline&) = delete;
  HammingTopkPipeline& operator=(const HammingTopkPipeline&) = delete;
  ~HammingTopkPipeline() { destroy(); }

  // The merges' pipeline, the grid's shape from the device (and FERRY_VULKAN_HAMMING_TILE).
  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // unavailable when the device has too little shared memory for the shader or a binding is
  // larger than maxStorageBufferRange.
  Status check(const ops::HammingTopkArgs& args, std::span<const backend::Binding> bindings) const;
  // Safe to call from several threads at once (on different command buffers).
  Status record(VkCommandBuffer command_buffer, const ops::HammingTopkArgs& args,
                std::span<const backend::Binding> bindings) const;

 private:
  // The scan's pipeline for tiles of `tile` queries (32, 16, 8 or 4), made now if no search
  // needed it before.
  Result<VkPipeline> scan_pipeline(std::uint32_t tile) const;
  // The cooperative-matrix scan's pipeline for tiles of 32 or 16 queries, made now if needed.
  Result<VkPipeline> coopmat_pipeline(std::uint32_t tile) const;
  // The pools' fill with cooperative matrices for tiles of `tile` queries (64, 128 or 256) and
  // codes of `words` words, made now if needed.
  Result<VkPipeline> fill_pipeline(std::uint32_t tile, std::uint32_t words) const;
  // tile 0: the merges; words 0: a pipeline for codes of any length.
  Result<VkPipeline> make_pipeline(const ComputeProgram& program, std::uint32_t tile,
                                   std::uint32_t words = 0) const;
  // The pooled search (hamming_topk.comp, "Pools") where it applies (hamming_pool_plan, the
  // portable scan, scratch bound); false when it does not, having recorded nothing.
  Result<bool> record_pooled(VkCommandBuffer command_buffer, const ops::HammingTopkArgs& args,
                             std::span<const backend::Binding> bindings) const;

  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  // Both made only with DeviceContext::cooperative_matrix (coopmat_).
  ComputeProgram coopmat_program_;
  ComputeProgram fill_program_;
  bool coopmat_ = false;
  // FERRY_VULKAN_HAMMING_SCAN=coopmat: the cooperative-matrix buffered scan where it applies.
  bool coopmat_scan_ = false;
  mutable std::array<VkPipeline, 2> coopmat_pipelines_{};  // tiles 32, 16; guarded by scan_mutex_
  // Tiles 256, 128, 64 x codes of 1 to 128 words; guarded by scan_mutex_.
  mutable std::array<VkPipeline, 3 * kHammingMaxCodeBits / 32> fill_pipelines_{};
  VkPipeline merge_pipeline_ = VK_NULL_HANDLE;  // null when the device cannot run the shader
  mutable std::mutex scan_mutex_;  // guards scan_pipelines_, coopmat_pipelines_, fill_pipelines_
  mutable std::array<VkPipeline, 4> scan_pipelines_{};  // tiles 32, 16, 8, 4
  std::uint64_t resident_groups_ = 1;  // workgroups the device runs at once (an estimate)
  std::uint32_t max_span_ = ops::kHammingScanMaxSpan;  // kCpuMaxSpan on a CPU implementation
  std::uint32_t preferred_tile_ = 0;   // FERRY_VULKAN_HAMMING_TILE, 0 when unset
  // FERRY_VULKAN_HAMMING_SCAN: pools where they apply (unset, pooled, portable; coopmat where
  // the cooperative-matrix scan applies, which has no pools), buffered (never), pooled-exact
  // (pools that hold nothing: every query takes the selection's exact pass, for tests).
  enum class Pools { where_they_apply, never, exact_only };
  Pools pools_ = Pools::where_they_apply;
  // lavapipe: pools only for databases whose exact pass stays within its loop limit.
  std::uint64_t max_exact_iterations_ = 0;  // 0: no limit
  std::uint64_t offset_alignment_ = 1;
  std::uint64_t max_window_bytes_ = 0;
  std::uint32_t max_groups_x_ = 65535;
  std::uint32_t max_groups_y_ = 65535;
};

// Whether a device with `support` and `features` is opened with cooperative matrices for
// hamming_topk's fill (device.cpp): offered and usable (hamming_coopmat_unsupported), not refused
// with FERRY_VULKAN_HAMMING_SCAN=portable, and the scan itself runs there.
bool hamming_opens_coopmat(const CooperativeMatrixSupport& support,
                           const DeviceFeatures& features);
// The same device's DeviceInfo::search_path: the fill's units, or why not the faster ones.
std::string hamming_search_path(const CooperativeMatrixSupport& support,
                                const DeviceFeatures& features);

}  // namespace ferry::vulkan
