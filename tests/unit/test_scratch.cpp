// Scratch memory for ops (core/op_record.hpp, acquire_scratch): a bounded, reused pool of device
// memory, a lease per command, kept with the submission until it completes. Exercised through
// core's recorder on the CPU backend (no op needs scratch yet, so a fill stands in for one).
#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "common/printers.hpp"
#include "core/op_record.hpp"
#include "core/state.hpp"
#include "ferry/ferry.hpp"

namespace {

using ferry::CommandList;
using ferry::ErrorCode;
using ferry::Status;

ferry::Device open_cpu(std::uint64_t slab_bytes, std::uint32_t max_slabs) {
  ferry::DeviceOptions options;
  options.scratch_slab_bytes = slab_bytes;
  options.scratch_max_slabs = max_slabs;
  auto device = ferry::Device::open("cpu", 0, options);
  REQUIRE(device.ok());
  return std::move(device).value();
}

// Records a fill of `target` that also asks for `scratch` bytes of scratch memory.
Status record_with_scratch(CommandList& list, const ferry::Buffer& target, std::uint64_t scratch) {
  const ferry::BufferRef ref(target);
  const ferry::detail::BindingRequest bindings[] = {
      {&ref, 0, ref.size, ferry::backend::Access::write, "destination"}};
  return ferry::detail::OpRecorder::record(list, "test op", ferry::ops::FillArgs{0x01020304u},
                                           bindings, scratch);
}

ferry::StagingPoolStats scratch_stats(const ferry::Device& device) {
  const auto& state = device.state();
  std::lock_guard lock(state->scratch_mutex);
  REQUIRE(state->scratch != nullptr);
  return ferry::StagingPool(state->scratch).stats();
}

}  // namespace

TEST_CASE("scratch: a device-memory binding per command, bounded, never held by unsubmitted work") {
  ferry::Device device = open_cpu(4096, 2);
  ferry::Buffer target = device.create_buffer(64).value();

  CommandList list;
  REQUIRE(record_with_scratch(list, target, 1000).ok());
  // The scratch is the command's last binding: device memory, read and written.
  const auto& op = std::get<ferry::backend::OpCommand>(list.commands().front().command);
  REQUIRE(op.bindings.size() == 2);
  CHECK(op.bindings[1].access == ferry::backend::Access::read_write);
  CHECK(op.bindings[1].size == 1000);
  CHECK(scratch_stats(device).bytes_in_use == 1024);  // 256-byte granules

  // Two slabs of 4096 hold eight such leases; the ninth would wait for work nobody submitted.
  for (int i = 1; i < 8; ++i) REQUIRE(record_with_scratch(list, target, 1000).ok());
  const Status full = record_with_scratch(list, target, 1000);
  CHECK(full.code() == ErrorCode::resource_exhausted);
  CHECK(full.message().find("not yet submitted") != std::string::npos);
  CHECK(list.size() == 8);  // the refused command was not recorded
  // Larger than a slab: it could never fit.
  CHECK(record_with_scratch(list, target, 5000).code() == ErrorCode::resource_exhausted);

  // Submitted, the scratch stays leased until the work completes, then comes back.
  const ferry::Timeline gate = device.create_timeline().value();
  const auto done =
      device.queue(ferry::QueueKind::compute).submit(std::move(list), {.wait = {{gate, 1}}, .signal = {}});
  REQUIRE(done.ok());
  CHECK(scratch_stats(device).bytes_in_use == 8 * 1024);
  REQUIRE(gate.signal(1).ok());
  REQUIRE(done->wait(std::chrono::seconds(30)).ok());
  REQUIRE(device.wait_idle(std::chrono::seconds(30)).ok());
  CHECK(scratch_stats(device).bytes_in_use == 0);
}

TEST_CASE("scratch: reused across submissions, waiting for work in flight, never growing") {
  ferry::Device device = open_cpu(4096, 1);
  ferry::Buffer target = device.create_buffer(4096).value();
  const auto queue = device.queue(ferry::QueueKind::compute);
  for (int round = 0; round < 200; ++round) {
    CommandList list;
    // Three leases of 1280 bytes fill the one slab; the next round's wait for this one's
    // submission (in flight), instead of failing.
    for (int i = 0; i < 3; ++i) REQUIRE(record_with_scratch(list, target, 1200).ok());
    REQUIRE(queue.submit(std::move(list)).ok());
  }
  REQUIRE(device.wait_idle(std::chrono::seconds(60)).ok());
  const ferry::StagingPoolStats stats = scratch_stats(device);
  CHECK(stats.slabs == 1);
  CHECK(stats.bytes_reserved == 4096);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.acquires >= 600);  // tries, counting those that waited for work in flight
}
