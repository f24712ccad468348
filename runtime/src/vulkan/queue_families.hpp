// Which native Vulkan queues serve ferry's compute, upload and download queues: a pure function of
// the device's queue families, unit-tested without a GPU (tests/unit/test_queue_families.cpp).
//
// Compute goes to the first family with COMPUTE. Upload and download prefer queues of
// transfer-only families (the copy engines: NVIDIA's family 1 has two, so upload gets (1,0) and
// download (1,1)); then other queues of other families; then further queues of the compute
// family; and when nothing is left they share: upload shares compute's queue, download shares
// upload's (lavapipe has one family with one queue, so all three share it). Within each of
// those tiers, families whose timestamps keep more valid bits come first (on the H100 a
// transfer-only family has 32-bit ones, which a trace must unwrap), else the device's order.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry::vulkan {

struct QueuePlan {
  // Indexed by QueueKind.
  std::array<QueueAssignment, kQueueKindCount> queues{};

  // What to create: queues 0..queue_count-1 of each family in use, families in ascending order.
  struct FamilyQueues {
    std::uint32_t family = 0;
    std::uint32_t queue_count = 0;
  };
  std::vector<FamilyQueues> families;

  const QueueAssignment& operator[](QueueKind kind) const {
    return queues[static_cast<std::size_t>(kind)];
  }
  // Distinct families in use, ascending (for VK_SHARING_MODE_CONCURRENT).
  std::vector<std::uint32_t> family_indices() const;
};

// ErrorCode::unavailable when no family supports compute.
Result<QueuePlan> plan_queues(std::span<const QueueFamilyInfo> families);

// Replaces assignments from a spec like "upload=1.0,download=3.0" (queue=family.index), for
// measuring other layouts (environment variable FERRY_VULKAN_QUEUES). invalid_argument when the
// spec is malformed (so on every device), failed_precondition when it names a family or queue
// this device does not have.
Result<QueuePlan> override_queues(std::span<const QueueFamilyInfo> families, const QueuePlan& plan,
                                  std::string_view spec);

}  // namespace ferry::vulkan
