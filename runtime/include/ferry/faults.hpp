// Fault injection: makes ferry's own calls into the backend fail on purpose, so that every error
// path (an allocation, a submission, a host wait or a thread that cannot be had) can be tested
// on every backend, by ferry's tests and by applications embedding it.
//
// A plan is process-wide: it applies to every device and thread from the moment it is set. The
// injected failure is exactly what the backend reports for a real one, with the same code:
//   allocation  Device::create_buffer / register_host_memory / create_timeline and staging-pool
//               slabs fail with ErrorCode::out_of_memory
//   submit      handing a submission to the backend fails with ErrorCode::backend_error (after
//               it was accepted: its signals fail, the queue goes on)
//   wait        a host wait (Timeline::wait, TimelinePoint::wait) that has to ask the backend
//               fails with ErrorCode::backend_error
//   thread      starting one of ferry's threads (pipeline producer and workers, the CPU
//               backend's queues) fails with ErrorCode::resource_exhausted
// Waits and submissions ferry makes for its own bookkeeping (retiring work, the staging pool's
// backpressure, teardown) are never failed: a fault hits work the application owns.
//
// The environment variable FERRY_FAULTS sets a plan when the first device is opened, in the
// syntax of parse_fault_plan, e.g. FERRY_FAULTS=submit=3,alloc=p0.01,seed=7.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "ferry/status.hpp"

namespace ferry {

enum class FaultSite : std::uint8_t { allocation = 0, submit = 1, wait = 2, thread = 3 };
inline constexpr int kFaultSiteCount = 4;
// "alloc", "submit", "wait", "thread": the names FERRY_FAULTS uses.
std::string_view to_string(FaultSite site) noexcept;

struct FaultPlan {
  // Per site (indexed by FaultSite): the call that fails, counted from 1 since the plan was set;
  // 0 for none. It fails once.
  std::array<std::uint64_t, kFaultSiteCount> fail_call{};
  // Per site: the probability (0 to 1) that any call fails, drawn from a generator seeded with
  // `seed`, so a run can be repeated.
  std::array<double, kFaultSiteCount> probability{};
  std::uint64_t seed = 0;

  FaultPlan& fail(FaultSite site, std::uint64_t call) {
    fail_call[static_cast<int>(site)] = call;
    return *this;
  }
  FaultPlan& fail_randomly(FaultSite site, double p) {
    probability[static_cast<int>(site)] = p;
    return *this;
  }
};

struct FaultCounts {
  std::array<std::uint64_t, kFaultSiteCount> calls{};     // since the plan was set
  std::array<std::uint64_t, kFaultSiteCount> injected{};  // of those, failed on purpose
};

// Replaces the process-wide plan and restarts the counts. invalid_argument for a probability
// outside [0, 1] (the plan in force is then unchanged).
Status set_fault_plan(const FaultPlan& plan);
// No more faults (the counts go on).
void clear_fault_plan();
FaultCounts fault_counts();

// Parses comma-separated items: `<site>=<N>` fails the N-th call of that site, `<site>=p<P>`
// fails each call with probability P, `seed=<S>` seeds the draws; sites are alloc, submit,
// wait and thread. "" is the empty plan. invalid_argument names the bad item.
Result<FaultPlan> parse_fault_plan(std::string_view spec);

}  // namespace ferry
