// The host clock of traces: std::chrono::steady_clock in nanoseconds. Core's trace (trace.hpp)
// and the execution times backends report (backend.hpp's ExecutionTimes) use it.
#pragma once

#include <chrono>
#include <cstdint>

namespace ferry::detail {

inline std::int64_t trace_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ferry::detail
