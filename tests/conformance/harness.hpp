// Conformance harness: every test is written once and run for each backend compiled in, as a
// doctest SUBCASE named after the backend.
//
// Environment:
//   FERRY_BACKENDS=cpu,vulkan   run only these backends (default: all compiled in)
//   FERRY_REQUIRE=cpu,vulkan    these must run: unavailable means the test fails, not skips
//   FERRY_TEST_SEED=N           repeat a run's random inputs (the seed is printed at start)
//
// A test that needs ops a device cannot run (Device::supports) is skipped on it, with the reason;
// a summary of such skips is printed at exit, and FERRY_REQUIRE turns them into failures.
//
// Devices are opened with validation on; any validation message (warning or error) fails the
// subcase that produced it, with the messages printed.
#pragma once

#include <cstdlib>
#include <string_view>

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/printers.hpp"
#include "ferry/ferry.hpp"

namespace ferry_test {

// Finite stand-in for "forever" in tests, so a hang fails the test instead of ctest's timeout.
inline constexpr auto kLongWait = std::chrono::seconds(120);

class MessageLog;

// What one backend's run of a conformance test gets.
class BackendUnderTest {
 public:
  ferry::Backend backend = ferry::Backend::cpu;
  ferry::Device device;
  std::uint64_t seed = 0;
  std::mt19937_64 rng;

  // Opens another device of the same backend (same options); its validation messages are
  // checked like the main device's.
  ferry::Result<ferry::Device> open_another();
  // The CPU reference device, for comparing results.
  ferry::Result<ferry::Device> open_cpu_reference();
  // Several devices of the backend for multi-device cases: every device it has (up to 4; the
  // first is `device`), or `device` and the same device opened again where it has one.
  std::vector<ferry::Device> several_devices();

  // Internal to the harness.
  std::shared_ptr<MessageLog> log;
  std::vector<ferry::Device> extra_devices;
  ferry::DeviceOptions options;
};

using BackendTest = std::function<void(BackendUnderTest&)>;

// Runs `test` once per selected backend, each inside SUBCASE(<backend name>).
void for_each_backend(const BackendTest& test);
// The same for a test that needs these ops (Device::supports): on a device that cannot run one,
// the test is skipped with the reason and counted in the summary printed at exit; when
// FERRY_REQUIRE names the backend, that is a failure instead.
void for_each_backend(std::initializer_list<std::string_view> ops, const BackendTest& test);

// The run's base seed (FERRY_TEST_SEED or random), printed to stderr on first use.
std::uint64_t base_seed();

// Whether this run samples its largest sweeps (FERRY_TEST_LIGHT set and not 0: the sanitizer
// presets, which check memory and threads, not semantics the ci preset covers in full).
inline bool light_run() {
  const char* light = std::getenv("FERRY_TEST_LIGHT");
  return light != nullptr && light[0] != '\0' && std::string_view(light) != "0";
}

// Pool options for tests: small slabs so tests stay light and limits are easy to reach.
inline ferry::StagingPoolOptions small_pool(ferry::MemoryKind kind = ferry::MemoryKind::host_upload,
                                            std::uint64_t slab_bytes = 1ull << 20,
                                            std::uint32_t max_slabs = 4) {
  ferry::StagingPoolOptions options;
  options.kind = kind;
  options.slab_bytes = slab_bytes;
  options.max_slabs = max_slabs;
  options.reserved_slabs = 1;
  return options;
}

// Sets a fault plan (ferry/faults.hpp) for its lifetime. Plans are process-wide and the suite
// runs one test at a time, so a test's plan hits only that test's work.
class ScopedFaultPlan {
 public:
  explicit ScopedFaultPlan(const ferry::FaultPlan& plan);
  ~ScopedFaultPlan() { ferry::clear_fault_plan(); }
  ScopedFaultPlan(const ScopedFaultPlan&) = delete;
  ScopedFaultPlan& operator=(const ScopedFaultPlan&) = delete;
};

// Ends the test process with a message if it is still alive after `limit`: a test of something
// that must not hang fails in a minute instead of at ctest's timeout.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit = std::chrono::seconds(60));
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// ---- Status checks (work on Status and Result<T>) -------------------------------------------

inline ferry::Status status_of(const ferry::Status& status) { return status; }
template <typename T>
ferry::Status status_of(const ferry::Result<T>& result) {
  return result.status();
}

template <typename T>
T value_or_fail(ferry::Result<T>&& result, const char* expr, const char* file, int line) {
  if (!result.ok()) {
    const std::string text = std::string(expr) + " failed: " + result.status().to_string();
    ADD_FAIL_AT(file, line, text);
  }
  return std::move(result).value();
}

}  // namespace ferry_test

// Fails (and stops) the test unless `expr` (a Status or Result) is ok; prints the error.
#define REQUIRE_OK(expr)                                                           \
  do {                                                                             \
    const ::ferry::Status ft_status_ = ::ferry_test::status_of(expr);              \
    REQUIRE_MESSAGE(ft_status_.ok(), #expr " failed: " << ft_status_.to_string()); \
  } while (0)

#define CHECK_OK(expr)                                                           \
  do {                                                                           \
    const ::ferry::Status ft_status_ = ::ferry_test::status_of(expr);            \
    CHECK_MESSAGE(ft_status_.ok(), #expr " failed: " << ft_status_.to_string()); \
  } while (0)

// Checks that `expr` (a Status or Result) failed with `code`.
#define CHECK_ERROR(expr, expected_code)                                                         \
  do {                                                                                           \
    const ::ferry::Status ft_status_ = ::ferry_test::status_of(expr);                            \
    CHECK_MESSAGE(ft_status_.code() == (expected_code), #expr " -> " << ft_status_.to_string()); \
  } while (0)

// The value of a Result, or a failed (stopped) test printing the error.
#define REQUIRE_VALUE(expr) ::ferry_test::value_or_fail((expr), #expr, __FILE__, __LINE__)
