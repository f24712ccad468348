#include "vulkan/queue_families.hpp"

#include <algorithm>
#include <charconv>
#include <string>

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


QueuePlan make_plan(const std::array<QueueSlot, kQueueKindCount>& slots) {
  QueuePlan plan;
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
  // Within each tier, families whose timestamps keep more valid bits first (a trace can time
  // them without unwrapping a counter, or at all); otherwise in the device's order.
  auto add_tier = [&](auto belongs) {
    std::vector<const QueueFamilyInfo*> tier;
    for (const QueueFamilyInfo& family : families) {
      if (belongs(family)) tier.push_back(&family);
    }
    std::stable_sort(tier.begin(), tier.end(), [](const auto* a, const auto* b) {
      return a->timestamp_valid_bits > b->timestamp_valid_bits;
    });
    for (const QueueFamilyInfo* family : tier) add_family(*family, 0);
  };
  add_tier([](const QueueFamilyInfo& family) { return is_transfer_only(family); });
  add_tier([&](const QueueFamilyInfo& family) {
    return !is_transfer_only(family) && can_transfer(family) && family.index != compute.family;
  });
  add_family(*compute_family, 1);

  const QueueSlot upload = transfer_slots.empty() ? compute : transfer_slots[0];
  const QueueSlot download = transfer_slots.size() < 2 ? upload : transfer_slots[1];
  return make_plan({compute, upload, download});
}

Result<QueuePlan> override_queues(std::span<const QueueFamilyInfo> families, const QueuePlan& plan,
                                  std::string_view spec) {
  std::array<QueueSlot, kQueueKindCount> slots{};
  for (std::size_t kind = 0; kind < slots.size(); ++kind) {
    slots[kind] = {plan.queues[kind].family, plan.queues[kind].index};
  }
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const std::size_t equals = item.find('=');
    const std::size_t dot = equals == std::string_view::npos ? equals : item.find('.', equals);
    // invalid_argument: the text is malformed (wrong on every device); failed_precondition:
    // well formed, but this device has no such queue.
    auto bad = [&](const char* why, ErrorCode code = ErrorCode::invalid_argument) {
      return Status(code, "FERRY_VULKAN_QUEUES: '" + std::string(item) + "': " + why +
                              " (expected e.g. upload=1.0,download=3.0)");
    };
    if (dot == std::string_view::npos) return bad("malformed");
    int kind = -1;
    for (int k = 0; k < kQueueKindCount; ++k) {
      if (item.substr(0, equals) == to_string(static_cast<QueueKind>(k))) kind = k;
    }
    if (kind < 0) return bad("unknown queue");
    auto number = [](std::string_view text, std::uint32_t& value) {
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      return !text.empty() && error == std::errc() && end == text.data() + text.size();
    };
    QueueSlot slot{};
    if (!number(item.substr(equals + 1, dot - equals - 1), slot.family) ||
        !number(item.substr(dot + 1), slot.index)) {
      return bad("not numbers");
    }
    const auto family = std::find_if(families.begin(), families.end(),
                                     [&](const QueueFamilyInfo& f) { return f.index == slot.family; });
    if (family == families.end() || slot.index >= family->queue_count) {
      return bad("no such queue on this device", ErrorCode::failed_precondition);
    }
    if (kind == static_cast<int>(QueueKind::compute) && !family->compute) {
      return bad("family has no compute", ErrorCode::failed_precondition);
    }
    slots[static_cast<std::size_t>(kind)] = slot;
  }
  return make_plan(slots);
}

}  // namespace ferry::vulkan
