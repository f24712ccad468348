// Internal side of fault injection (ferry/faults.hpp): the check each injection point makes.
#pragma once

#include <string_view>

#include "ferry/faults.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

// Counts a call at `site`; returns the injected failure when the plan says this call fails, ok
// otherwise. `what` names the call for the message. Costs one relaxed atomic load when no plan
// is set.
Status injected_fault(FaultSite site, std::string_view what);

// Runs `allocate` (returning a Result) unless the fault plan fails this allocation.
template <typename Allocate>
auto allocate_unless_injected(std::string_view what, Allocate&& allocate) -> decltype(allocate()) {
  if (Status injected = injected_fault(FaultSite::allocation, what); !injected.ok()) {
    return injected;
  }
  return allocate();
}

// Applies FERRY_FAULTS once per process; returns the parse error, if any, every time.
Status apply_fault_environment();

}  // namespace ferry::detail
