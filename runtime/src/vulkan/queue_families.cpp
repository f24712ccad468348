#include "vulkan/queue_families.hpp"

#include <algorithm>

namespace ferry::vulkan {
namespace {

struct QueueSlot {
  std::uint32_t family = 0;
  std::uint32_t index = 0;
  bool operator==(const QueueSlot&) const = default;
};

// Graphics and compute families can always transfer, whether or not they report the bit.
bool can_transfer(const QueueFamilyInfo& family) {
  return family.transfer || family.compute || family.graphics;
}

bool is_transfer_only(const QueueFamilyInfo& family) {
  return family.transfer && !family.compute && !family.graphics;
}

}  // namespace

std::vector<std::uint32_t> QueuePlan::family_indices() const {
  std::vector<std::uint32_t> indices;
  for (const FamilyQueues& family : families) indices.push_back(family.family);
  return indices;
}

Result<QueuePlan> plan_queues(std::span<const QueueFamilyInfo> families) {
  const QueueFamilyInfo* compute_family = nullptr;
  for (const QueueFamilyInfo& family : families) {
    if (family.compute && family.queue_count > 0) {
      compute_family = &family;
      break;
    }
  }
  if (compute_family == nullptr) {
    return Status(ErrorCode::unavailable, "no Vulkan queue family supports compute");
  }
  const QueueSlot compute{compute_family->index, 0};

  // Candidate queues for the copy queues, best first.
  std::vector<QueueSlot> transfer_slots;
  auto add_family = [&](const QueueFamilyInfo& family, std::uint32_t first_index) {
    for (std::uint32_t i = first_index; i < family.queue_count; ++i) {
      transfer_slots.push_back({family.index, i});
    }
  };
  for (const QueueFamilyInfo& family : families) {
    if (is_transfer_only(family)) add_family(family, 0);
  }
  for (const QueueFamilyInfo& family : families) {
    if (!is_transfer_only(family) && can_transfer(family) && family.index != compute.family) {
      add_family(family, 0);
    }
  }
  add_family(*compute_family, 1);

  const QueueSlot upload = transfer_slots.empty() ? compute : transfer_slots[0];
  const QueueSlot download = transfer_slots.size() < 2 ? upload : transfer_slots[1];

  QueuePlan plan;
  const std::array<QueueSlot, kQueueKindCount> slots{compute, upload, download};
  for (std::size_t kind = 0; kind < slots.size(); ++kind) {
    QueueAssignment& assignment = plan.queues[kind];
    assignment.kind = static_cast<QueueKind>(kind);
    assignment.family = slots[kind].family;
    assignment.index = slots[kind].index;
    assignment.shared = std::count(slots.begin(), slots.end(), slots[kind]) > 1;

    auto existing = std::find_if(plan.families.begin(), plan.families.end(),
                                 [&](const auto& f) { return f.family == slots[kind].family; });
    if (existing == plan.families.end()) {
      plan.families.push_back({slots[kind].family, slots[kind].index + 1});
    } else {
      existing->queue_count = std::max(existing->queue_count, slots[kind].index + 1);
    }
  }
  std::sort(plan.families.begin(), plan.families.end(),
            [](const auto& a, const auto& b) { return a.family < b.family; });
  return plan;
}

}  // namespace ferry::vulkan
