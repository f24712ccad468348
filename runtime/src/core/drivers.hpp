// The drivers compiled into this build, created once per process.
#pragma once

#include <vector>

#include "core/backend.hpp"

namespace ferry::detail {

struct DriverEntry {
  backend::Driver* driver;
  const backend::ProbeResult* probe;  // probed once, on first use
};

// In preference order for "auto": cuda, vulkan, cpu.
const std::vector<DriverEntry>& drivers();

}  // namespace ferry::detail
