// What a device offers for cooperative matrices (VK_NV_cooperative_matrix), described without
// Vulkan types: physical_devices.cpp reads it, ops decide from it whether a shader of theirs can
// run (pure functions, unit-tested without a GPU: hamming_topk_plan.hpp).
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::vulkan {

enum class MatrixComponent : std::uint8_t { other, sint8, uint8, sint32, uint32 };

// One VkCooperativeMatrixPropertiesNV: D (result) = A (M x K) * B (K x N) + C (M x N).
struct CooperativeMatrixShape {
  MatrixComponent a = MatrixComponent::other;
  MatrixComponent b = MatrixComponent::other;
  MatrixComponent c = MatrixComponent::other;
  MatrixComponent result = MatrixComponent::other;
  std::uint32_t m = 0;
  std::uint32_t n = 0;
  std::uint32_t k = 0;
  bool subgroup_scope = false;  // VK_SCOPE_SUBGROUP_NV
};

struct CooperativeMatrixSupport {
  bool extension = false;            // VK_NV_cooperative_matrix
  bool feature = false;              // cooperativeMatrix (false when hidden for tests)
  // Not refused with FERRY_VULKAN_HAMMING_SCAN=portable: the device is then set up for them
  // (extension, features, modules) where it offers them.
  bool requested = false;
  bool shader_int8 = false;          // shaderInt8: the matrices' int8 components
  bool vulkan_memory_model = false;  // vulkanMemoryModel: GL_KHR_memory_scope_semantics
  // vulkanMemoryModelDeviceScope: once vulkanMemoryModel is on, every shader that uses Device
  // scope (the other ops' barriers) needs it too (VUID-RuntimeSpirv-vulkanMemoryModel-06265).
  bool vulkan_memory_model_device_scope = false;
  bool subgroup_vote = false;        // vote operations in compute shaders
  std::uint32_t subgroup_size = 0;   // the default, and the range a shader may get
  std::uint32_t min_subgroup_size = 0;
  std::uint32_t max_subgroup_size = 0;
  std::uint32_t compute_shared_bytes = 0;  // maxComputeSharedMemorySize
  std::vector<CooperativeMatrixShape> shapes;
};

}  // namespace ferry::vulkan
