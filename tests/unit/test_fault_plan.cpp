// Fault plans (ferry/faults.hpp): parsing FERRY_FAULTS, the N-th call, seeded probabilities.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/printers.hpp"
#include "core/faults.hpp"
#include "ferry/faults.hpp"

using ferry::ErrorCode;
using ferry::FaultPlan;
using ferry::FaultSite;

namespace {

int index(FaultSite site) { return static_cast<int>(site); }

// Which of `calls` calls at `site` fail under `plan`.
std::vector<bool> run_calls(const FaultPlan& plan, FaultSite site, int calls) {
  REQUIRE(ferry::set_fault_plan(plan).ok());
  std::vector<bool> failed;
  for (int i = 0; i < calls; ++i) {
    failed.push_back(!ferry::detail::injected_fault(site, "a test call").ok());
  }
  ferry::clear_fault_plan();
  return failed;
}

}  // namespace

TEST_CASE("fault plan: parsing") {
  const auto plan = ferry::parse_fault_plan("submit=3,alloc=p0.25,seed=42,wait=1,thread=p1");
  REQUIRE(plan.ok());
  CHECK(plan->fail_call[index(FaultSite::submit)] == 3);
  CHECK(plan->fail_call[index(FaultSite::wait)] == 1);
  CHECK(plan->fail_call[index(FaultSite::allocation)] == 0);
  CHECK(plan->probability[index(FaultSite::allocation)] == 0.25);
  CHECK(plan->probability[index(FaultSite::thread)] == 1.0);
  CHECK(plan->seed == 42);
  CHECK(ferry::parse_fault_plan("").ok());

  for (const char* bad : {"submit", "submit=0", "submit=x", "submit=-1", "alloc=p2", "alloc=p",
                          "alloc=p0.5x", "disk=1", "seed=abc", "=3", "submit=99999999999999999999"}) {
    CAPTURE(bad);
    const auto parsed = ferry::parse_fault_plan(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == ErrorCode::invalid_argument);
    // The message quotes the bad item.
    CHECK(parsed.status().message().find("'" + std::string(bad)) != std::string::npos);
  }
  CHECK(ferry::to_string(FaultSite::allocation) == "alloc");
  CHECK(ferry::to_string(FaultSite::thread) == "thread");
}

TEST_CASE("fault plan: the N-th call of a site fails once, with the site's error code") {
  const std::vector<bool> failed = run_calls(FaultPlan{}.fail(FaultSite::submit, 4),
                                             FaultSite::submit, 10);
  for (int i = 0; i < 10; ++i) CHECK(failed[i] == (i == 3));
  // Other sites are not counted against it.
  CHECK(run_calls(FaultPlan{}.fail(FaultSite::submit, 1), FaultSite::wait, 5) ==
        std::vector<bool>(5, false));

  REQUIRE(ferry::set_fault_plan(FaultPlan{}.fail(FaultSite::allocation, 1)).ok());
  const ferry::Status injected =
      ferry::detail::injected_fault(FaultSite::allocation, "allocating a test buffer");
  CHECK(injected.code() == ErrorCode::out_of_memory);
  CHECK(injected.message().find("allocating a test buffer") != std::string::npos);
  CHECK(ferry::fault_counts().injected[index(FaultSite::allocation)] == 1);
  CHECK(ferry::fault_counts().calls[index(FaultSite::allocation)] == 1);
  ferry::clear_fault_plan();
  CHECK(ferry::detail::injected_fault(FaultSite::allocation, "after clearing").ok());

  REQUIRE(ferry::set_fault_plan(FaultPlan{}.fail(FaultSite::thread, 1)).ok());
  CHECK(ferry::detail::injected_fault(FaultSite::thread, "t").code() ==
        ErrorCode::resource_exhausted);
  ferry::clear_fault_plan();
}

TEST_CASE("fault plan: probabilities are seeded and repeatable") {
  FaultPlan plan;
  plan.fail_randomly(FaultSite::wait, 0.3);
  plan.seed = 1234;
  const std::vector<bool> first = run_calls(plan, FaultSite::wait, 2000);
  const std::vector<bool> again = run_calls(plan, FaultSite::wait, 2000);
  CHECK(first == again);
  const auto failures = std::count(first.begin(), first.end(), true);
  CHECK(failures > 450);  // 600 expected; far outside either bound is a broken generator
  CHECK(failures < 750);
  plan.seed = 99;
  CHECK(run_calls(plan, FaultSite::wait, 2000) != first);

  CHECK(run_calls(FaultPlan{}.fail_randomly(FaultSite::submit, 1.0), FaultSite::submit, 20) ==
        std::vector<bool>(20, true));
  CHECK(run_calls(FaultPlan{}.fail_randomly(FaultSite::submit, 0.0), FaultSite::submit, 20) ==
        std::vector<bool>(20, false));
  CHECK(ferry::set_fault_plan(FaultPlan{}.fail_randomly(FaultSite::submit, 1.5)).code() ==
        ErrorCode::invalid_argument);
  CHECK(ferry::set_fault_plan(FaultPlan{}.fail_randomly(FaultSite::submit, -0.1)).code() ==
        ErrorCode::invalid_argument);
  ferry::clear_fault_plan();
}
