#include "vulkan/queue_hazards.hpp"

#include <utility>

namespace ferry::vulkan {

MemoryAccess copy_memory(bool host_visible, std::uint64_t host_address, std::uint64_t device_handle,
                         std::uint64_t offset, std::uint64_t size, bool write) {
  constexpr std::uint64_t kBlock = 16;
  // Cannot overflow: core checked offset + size against the buffer, which lies in memory.
  const std::uint64_t base = host_visible ? host_address : 0;
  MemoryAccess access;
  access.space = host_visible ? 0 : device_handle;
  access.begin = (base + offset) / kBlock * kBlock;
  access.end = (base + offset + size + kBlock - 1) / kBlock * kBlock;
  access.write = write;
  return access;
}

QueueHazards::Plan QueueHazards::plan(bool copies_only, std::vector<MemoryAccess> accesses) const {
  Plan plan;
  if (!copies_only) return plan;  // the barrier; nothing to remember
  plan.start_barrier = false;
  plan.wait = floor_;
  std::uint64_t latest = 0;
  for (const MemoryAccess& later : accesses) {
    for (const Tracked& earlier : tracked_) {
      const MemoryAccess& a = earlier.access;
      const bool overlap = later.space == a.space && later.begin < a.end && a.begin < later.end;
      if (overlap && (later.write || a.write) && earlier.order > latest) {
        latest = earlier.order;
        plan.wait = earlier.done;  // newer than the floor: it covers the floor too
      }
    }
  }
  plan.accesses = std::move(accesses);
  return plan;
}

void QueueHazards::submitted(Plan&& plan, ProgressPoint done) {
  const std::uint64_t order = next_order_++;
  if (plan.start_barrier) {
    // Its signal covers it and everything before it on the VkQueue.
    floor_ = done;
    tracked_.clear();
    return;
  }
  for (const MemoryAccess& access : plan.accesses) tracked_.push_back({access, order, done});
  if (tracked_.size() > kMaxTracked) {
    // Forget the oldest half, behind a floor at the newest forgotten one (whose signal covers
    // every older one). A submission's accesses are forgotten together or not at all.
    std::size_t cut = tracked_.size() / 2;
    while (cut < tracked_.size() && tracked_[cut].order == tracked_[cut - 1].order) ++cut;
    floor_ = tracked_[cut - 1].done;
    tracked_.erase(tracked_.begin(), tracked_.begin() + static_cast<std::ptrdiff_t>(cut));
  }
}

}  // namespace ferry::vulkan
