// How a submission is ordered after the ones before it on the same VkQueue (pure logic, no
// Vulkan headers: unit-tested anywhere).
//
// Vulkan orders nothing between command buffers by itself, while ferry's queues let each
// submission see the results of the ones before it. A full barrier at the start of every command
// buffer gave that, but on the H100 it costs ~4 us per submission even on an idle queue (a 64 KiB
// round trip 18.6 -> 14.8 us without it; docs/PERFORMANCE.md). So:
// - a submission with an op (ops are judged by their bindings only inside a submission) starts
//   with the full barrier, as before;
// - a submission of copies only gets no barrier. Where one of its copies touches memory that an
//   earlier copy touched, at least one of the two writing, it waits on the progress value of the
//   latest such submission (a semaphore wait: a full dependency on it and, since a signal waits
//   for every earlier command of its queue, on everything before it); otherwise on the floor.
// The floor is a progress value whose wait orders after everything no longer remembered: the last
// submission with an op, and the newest one forgotten when the remembered set is full. Waits on
// values already reached cost little, and copies of disjoint memory may overlap on the device.
// Timeline values, lease returns and host waits keep their order: a signal waits for every
// earlier command on its queue. Submissions the host has seen complete are forgotten (and a floor
// the host has seen reached): ferry takes host-observed completion as ordering a later submission
// after the work everywhere, across queues too, as CUDA does.
//
// One per VkQueue: logical queues that share a VkQueue share it, and their progress timelines
// serve alike (each signal covers the whole VkQueue before it). Software devices (lavapipe) do
// not use it: they keep the barrier on every submission (vulkan/device.cpp says why).
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::vulkan {

// Memory a copy reads or writes: [begin, end) in an address space (a device buffer's VkBuffer,
// or 0 for the host's addresses of host-visible memory, so that two imports of the same host
// pages are one memory).
struct MemoryAccess {
  std::uint64_t space = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool write = false;
};

// One side of a copy: `size` bytes at `offset` of a buffer, which is host memory at
// `host_address` (host-visible) or else the device buffer `device_handle`; widened to whole
// 16-byte blocks, as the copy shader moves them.
MemoryAccess copy_memory(bool host_visible, std::uint64_t host_address, std::uint64_t device_handle,
                         std::uint64_t offset, std::uint64_t size, bool write);

// A submission's progress value on its logical queue's progress timeline (an opaque identity,
// the backend's timeline object); timeline null: none.
struct ProgressPoint {
  void* timeline = nullptr;
  std::uint64_t value = 0;
  explicit operator bool() const noexcept { return timeline != nullptr; }
};

class QueueHazards {
 public:
  struct Plan {
    bool start_barrier = true;  // an op: the full barrier first
    ProgressPoint wait;         // copies only: wait on this first (none: nothing to wait for)
    std::vector<MemoryAccess> accesses;  // of the copies
  };

  // `copies_only`: every command of the submission is a copy, `accesses` their memory.
  Plan plan(bool copies_only, std::vector<MemoryAccess> accesses) const;
  // The planned submission was submitted with the progress value `done` (a failed one is simply
  // not reported).
  void submitted(Plan&& plan, ProgressPoint done);
  // Forgets what completed: `reached(timeline)` is a value the host has seen that timeline reach.
  template <typename Reached>
  void forget_reached(Reached&& reached) {
    if (floor_ && floor_.value <= reached(floor_.timeline)) floor_ = {};
    std::erase_if(tracked_, [&](const Tracked& t) { return t.done.value <= reached(t.done.timeline); });
  }

  // Remembered accesses beyond this are forgotten, oldest first, behind the floor.
  static constexpr std::size_t kMaxTracked = 256;

 private:
  struct Tracked {
    MemoryAccess access;
    std::uint64_t order = 0;  // submission order on the VkQueue
    ProgressPoint done;
  };
  std::vector<Tracked> tracked_;  // oldest first, all after the floor
  ProgressPoint floor_;           // none: nothing forgotten yet
  std::uint64_t next_order_ = 1;
};

}  // namespace ferry::vulkan
