// Fault injection: a process-wide plan consulted at ferry's calls into the backend.
#include "core/faults.hpp"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <system_error>

namespace ferry {
namespace {

struct Injector {
  std::atomic<bool> armed{false};  // the fast path: false means no plan
  std::mutex mutex;
  FaultPlan plan;
  FaultCounts counts;
  std::mt19937_64 random;
};

Injector& injector() {
  // Never destroyed: threads may still check it during static destruction.
  static Injector* instance = new Injector();
  return *instance;
}

constexpr std::array<std::string_view, kFaultSiteCount> kSiteNames = {"alloc", "submit", "wait",
                                                                      "thread"};

ErrorCode code_for(FaultSite site) {
  switch (site) {
    case FaultSite::allocation: return ErrorCode::out_of_memory;
    case FaultSite::thread: return ErrorCode::resource_exhausted;
    case FaultSite::submit:
    case FaultSite::wait: return ErrorCode::backend_error;
  }
  return ErrorCode::backend_error;
}

Status invalid_item(std::string_view spec, std::string_view item, std::string_view why) {
  return Status(ErrorCode::invalid_argument,
                "fault plan '" + std::string(spec) + "': item '" + std::string(item) + "' " +
                    std::string(why) +
                    " (expected items <site>=<N>, <site>=p<probability> or seed=<S>, sites alloc, "
                    "submit, wait, thread)");
}

}  // namespace

std::string_view to_string(FaultSite site) noexcept {
  const auto index = static_cast<std::size_t>(site);
  return index < kSiteNames.size() ? kSiteNames[index] : "unknown";
}

Status set_fault_plan(const FaultPlan& plan) {
  for (int site = 0; site < kFaultSiteCount; ++site) {
    const double p = plan.probability[site];
    if (!(p >= 0.0 && p <= 1.0)) {
      return Status(ErrorCode::invalid_argument,
                    "set_fault_plan: the probability of site " +
                        std::string(to_string(static_cast<FaultSite>(site))) +
                        " must be in [0, 1]");
    }
  }
  Injector& state = injector();
  std::lock_guard lock(state.mutex);
  state.plan = plan;
  state.counts = FaultCounts{};
  state.random.seed(plan.seed);
  bool any = false;
  for (int site = 0; site < kFaultSiteCount; ++site) {
    any = any || plan.fail_call[site] != 0 || plan.probability[site] > 0.0;
  }
  state.armed.store(any, std::memory_order_release);
  return Status();
}

void clear_fault_plan() {
  Injector& state = injector();
  std::lock_guard lock(state.mutex);
  state.plan = FaultPlan{};
  state.armed.store(false, std::memory_order_release);
}

FaultCounts fault_counts() {
  Injector& state = injector();
  std::lock_guard lock(state.mutex);
  return state.counts;
}

Result<FaultPlan> parse_fault_plan(std::string_view spec) {
  FaultPlan plan;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) return invalid_item(spec, item, "has no '='");
    const std::string_view key = item.substr(0, equals);
    const std::string_view text = item.substr(equals + 1);
    const char* const end = text.data() + text.size();
    if (key == "seed") {
      const auto [stop, error] = std::from_chars(text.data(), end, plan.seed);
      if (text.empty() || error != std::errc() || stop != end) {
        return invalid_item(spec, item, "has no whole-number seed");
      }
      continue;
    }
    int site = 0;
    while (site < kFaultSiteCount && kSiteNames[site] != key) ++site;
    if (site == kFaultSiteCount) return invalid_item(spec, item, "names no fault site");
    if (!text.empty() && text.front() == 'p') {
      // strtod, not from_chars: GCC 12's libstdc++ has floating-point from_chars, older ones not.
      const std::string number(text.substr(1));
      char* stop = nullptr;
      const double p = std::strtod(number.c_str(), &stop);
      if (number.empty() || stop != number.c_str() + number.size() || !(p >= 0.0 && p <= 1.0)) {
        return invalid_item(spec, item, "has no probability in [0, 1]");
      }
      plan.probability[site] = p;
    } else {
      std::uint64_t call = 0;
      const auto [stop, error] = std::from_chars(text.data(), end, call);
      if (text.empty() || error != std::errc() || stop != end || call == 0) {
        return invalid_item(spec, item, "has no call number >= 1");
      }
      plan.fail_call[site] = call;
    }
  }
  return plan;
}

namespace detail {

Status injected_fault(FaultSite site, std::string_view what) {
  Injector& state = injector();
  if (!state.armed.load(std::memory_order_acquire)) return Status();
  const int index = static_cast<int>(site);
  std::uint64_t call = 0;
  bool fail = false;
  {
    std::lock_guard lock(state.mutex);
    if (!state.armed.load(std::memory_order_relaxed)) return Status();
    call = ++state.counts.calls[index];
    fail = state.plan.fail_call[index] == call;
    const double p = state.plan.probability[index];
    if (!fail && p > 0.0) fail = std::uniform_real_distribution<double>(0.0, 1.0)(state.random) < p;
    if (fail) ++state.counts.injected[index];
  }
  if (!fail) return Status();
  return Status(code_for(site), "injected fault: " + std::string(what) + " (" +
                                    std::string(to_string(site)) + " call " +
                                    std::to_string(call) + " of the fault plan)");
}

Status apply_fault_environment() {
  static const Status applied = [] {
    const char* spec = std::getenv("FERRY_FAULTS");
    if (spec == nullptr || spec[0] == '\0') return Status();
    Result<FaultPlan> plan = parse_fault_plan(spec);
    if (!plan.ok()) {
      Status status = plan.status();
      status.with_context("FERRY_FAULTS");
      return status;
    }
    return set_fault_plan(*plan);
  }();
  return applied;
}

}  // namespace detail
}  // namespace ferry
