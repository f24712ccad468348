// How a Vulkan submission is ordered after earlier ones on its VkQueue (pure logic, no GPU):
// the rules case by case, and random copies against a brute-force model of which earlier
// submission each byte depends on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "vulkan/queue_hazards.hpp"

namespace {

using ferry::vulkan::copy_memory;
using ferry::vulkan::MemoryAccess;
using ferry::vulkan::ProgressPoint;
using ferry::vulkan::QueueHazards;

MemoryAccess device(std::uint64_t handle, std::uint64_t begin, std::uint64_t end, bool write) {
  return copy_memory(false, 0, handle, begin, end - begin, write);
}

// Two logical queues' progress timelines (as on lavapipe, where they share one VkQueue).
int timeline_a = 0;
int timeline_b = 0;

struct Queue {
  QueueHazards hazards;
  std::uint64_t value = 0;  // last progress value submitted

  // Plans and submits as progress value value + 1 of `timeline`; returns the plan.
  QueueHazards::Plan submit(bool copies_only, std::vector<MemoryAccess> accesses,
                            int* timeline = &timeline_a) {
    QueueHazards::Plan plan = hazards.plan(copies_only, std::move(accesses));
    QueueHazards::Plan copy = plan;
    hazards.submitted(std::move(plan), {timeline, ++value});
    return copy;
  }
};

bool waits_on(const QueueHazards::Plan& plan, std::uint64_t value, int* timeline = &timeline_a) {
  return !plan.start_barrier && plan.wait.timeline == timeline && plan.wait.value == value;
}
bool free_of_order(const QueueHazards::Plan& plan) { return !plan.start_barrier && !plan.wait; }

}  // namespace

TEST_CASE("queue hazards: copy memory is widened to 16-byte blocks, host memory by address") {
  const MemoryAccess d = copy_memory(false, 0x5000, 77, 17, 10, true);
  CHECK(d.space == 77);
  CHECK(d.begin == 16);
  CHECK(d.end == 32);
  CHECK(d.write);
  const MemoryAccess h = copy_memory(true, 0x10008, 77, 4, 4, false);
  CHECK(h.space == 0);  // host memory: one space whatever the buffer
  CHECK(h.begin == 0x10000);
  CHECK(h.end == 0x10010);
  CHECK_FALSE(h.write);
  const MemoryAccess whole = copy_memory(false, 0, 9, 32, 32, false);
  CHECK(whole.begin == 32);
  CHECK(whole.end == 64);
}

TEST_CASE("queue hazards: the rules, case by case") {
  Queue q;
  // 1: nothing before.
  CHECK(free_of_order(q.submit(true, {device(1, 0, 64, false), device(2, 0, 64, true)})));
  // 2: disjoint writes of one buffer, reads of the same memory: nothing to wait for.
  CHECK(free_of_order(q.submit(true, {device(1, 0, 64, false), device(2, 64, 128, true)})));
  // 3: read after write of 2 (by 1 and 2): waits on the latest, 2.
  CHECK(waits_on(q.submit(true, {device(2, 48, 80, false), device(3, 0, 32, true)}), 2));
  // 4: write after read (3 read 2's [48, 80)).
  CHECK(waits_on(q.submit(true, {device(2, 60, 64, true)}), 4 - 1));
  // 5: write after write of 3, touching but not overlapping 4's write.
  CHECK(waits_on(q.submit(true, {device(3, 16, 32, true), device(2, 64, 80, false)}), 3));
  // 6: touching ends do not overlap; other buffers, or host against device, never conflict.
  CHECK(free_of_order(q.submit(true, {device(3, 32, 48, true)})));
  CHECK(free_of_order(q.submit(true, {device(5, 0, 16, true), copy_memory(true, 0, 0, 0, 16, true)})));
  // 8: host memory is one space: a write of the same host bytes conflicts, whatever the import.
  CHECK(waits_on(q.submit(true, {copy_memory(true, 8, 0, 0, 4, true)}), 7));
  // 9: an op gets the barrier and becomes the floor: later copies wait on it at least.
  CHECK(q.submit(false, {}).start_barrier);
  CHECK(waits_on(q.submit(true, {device(9, 0, 16, false)}), 9));
  CHECK(waits_on(q.submit(true, {device(9, 0, 16, true)}), 10));  // after 10's read, not 9
  // A failed submission (planned, never submitted) leaves nothing behind.
  (void)q.hazards.plan(true, {device(7, 0, 16, true)});
  CHECK(waits_on(q.submit(true, {device(7, 0, 16, true)}), 9));
}

TEST_CASE("queue hazards: what the host has seen complete is forgotten") {
  Queue q;
  CHECK(free_of_order(q.submit(true, {device(1, 0, 16, true)})));   // 1
  CHECK(free_of_order(q.submit(true, {device(2, 0, 16, true)})));   // 2
  CHECK(q.submit(false, {}).start_barrier);                        // 3: the floor
  CHECK(waits_on(q.submit(true, {device(3, 0, 16, true)}), 3));     // 4: after the floor
  // The host saw 3: the floor and everything up to it go; 4 is still remembered.
  q.hazards.forget_reached([](void*) { return std::uint64_t{3}; });
  CHECK(free_of_order(q.submit(true, {device(1, 0, 16, true)})));   // 5
  CHECK(waits_on(q.submit(true, {device(3, 0, 16, false)}), 4));    // 6
  // Another timeline's progress says nothing about this one's.
  q.hazards.forget_reached([](void* t) { return t == &timeline_b ? std::uint64_t{100} : 0; });
  CHECK(waits_on(q.submit(true, {device(3, 0, 16, true)}), 6));     // 7
  q.hazards.forget_reached([](void*) { return std::uint64_t{7}; });
  CHECK(free_of_order(q.submit(true, {device(3, 0, 16, true)})));
}

TEST_CASE("queue hazards: logical queues sharing a VkQueue wait on each other's progress") {
  Queue q;
  CHECK(free_of_order(q.submit(true, {device(1, 0, 16, true)}, &timeline_a)));
  CHECK(waits_on(q.submit(true, {device(1, 0, 16, false)}, &timeline_b), 1, &timeline_a));
  CHECK(waits_on(q.submit(true, {device(1, 0, 16, true)}, &timeline_a), 2, &timeline_b));
}

TEST_CASE("queue hazards: the remembered set is bounded by a floor") {
  Queue q;
  for (std::size_t i = 0; i < QueueHazards::kMaxTracked; ++i) {
    CHECK(free_of_order(q.submit(true, {device(1000 + i, 0, 16, true)})));
  }
  // One more: the oldest half is forgotten behind the floor at the newest of them.
  CHECK(free_of_order(q.submit(true, {device(1, 0, 16, true)})));
  const QueueHazards::Plan forgotten = q.submit(true, {device(1000, 0, 16, false)});
  CHECK(!forgotten.start_barrier);
  CHECK(forgotten.wait.value == (QueueHazards::kMaxTracked + 1) / 2);
  // Still remembered: waits on it exactly.
  CHECK(waits_on(q.submit(true, {device(1000 + QueueHazards::kMaxTracked - 1, 0, 16, false)}),
                 QueueHazards::kMaxTracked));
}

TEST_CASE("queue hazards: random copies against a model of each byte's last users") {
  // For each byte of 3 device buffers and a host range: the last submission that wrote it and
  // the last that read or wrote it. A submission must follow (wait on a value at least) the
  // latest earlier one it conflicts with; ops and forgetting raise a floor it must follow too.
  // Checked: the wait covers every conflict, and never exceeds the latest conflict or floor.
  std::mt19937_64 rng(0x9a2a);
  constexpr std::uint64_t kBytes = 256;
  for (int round = 0; round < 20; ++round) {
    Queue q;
    std::vector<std::vector<std::uint64_t>> last_write(4, std::vector<std::uint64_t>(kBytes, 0));
    std::vector<std::vector<std::uint64_t>> last_use(4, std::vector<std::uint64_t>(kBytes, 0));
    std::uint64_t floor = 0;
    int waits = 0;
    for (int s = 0; s < 400; ++s) {
      const std::uint64_t value = q.value + 1;
      if (rng() % 25 == 0) {
        CHECK(q.submit(false, {}).start_barrier);
        floor = value;
        continue;
      }
      std::vector<MemoryAccess> accesses;
      struct Side {
        std::size_t space;
        std::uint64_t begin, end;
        bool write;
      };
      std::vector<Side> sides;
      std::uint64_t needed = 0;
      for (int c = 0; c < 2 * (1 + static_cast<int>(rng() % 3)); ++c) {
        const std::size_t space = rng() % 4;
        const std::uint64_t size = 1 + rng() % 40;
        const std::uint64_t offset = rng() % (kBytes - size);
        const bool write = c % 2 == 1;
        const MemoryAccess access = space == 3 ? copy_memory(true, 0x1000, 0, offset, size, write)
                                               : copy_memory(false, 0, 10 + space, offset, size, write);
        accesses.push_back(access);
        const std::uint64_t base = space == 3 ? 0x1000 : 0;
        sides.push_back({space, access.begin - base, access.end - base, write});
        for (std::uint64_t b = access.begin - base; b < access.end - base; ++b) {
          needed = std::max(needed, write ? last_use[space][b] : last_write[space][b]);
        }
      }
      const QueueHazards::Plan plan = q.submit(true, std::move(accesses));
      CHECK_FALSE(plan.start_barrier);
      const std::uint64_t waited = plan.wait ? plan.wait.value : 0;
      CHECK(waited >= needed);                       // every conflict covered
      CHECK(waited < value);                         // only ever an earlier submission
      if (needed > floor) CHECK(waited == needed);   // exactly the conflict when remembered
      if (needed <= floor && floor > 0) CHECK(waited >= floor);
      if (plan.wait) ++waits;
      // What the queue forgot raises the floor: learn it from a wait beyond any conflict.
      if (waited > needed) floor = std::max(floor, waited);
      for (const Side& side : sides) {
        for (std::uint64_t b = side.begin; b < side.end; ++b) {
          last_use[side.space][b] = value;
          if (side.write) last_write[side.space][b] = value;
        }
      }
    }
    CHECK(waits > 0);
  }
}
