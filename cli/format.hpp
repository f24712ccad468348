// Small text formatting helpers shared by the commands.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::cli {

// 65536 -> "64 KiB", 1610612736 -> "1.5 GiB", 100 -> "100 B".
std::string format_bytes(std::uint64_t bytes);
// Fixed-point with `decimals` digits after the point; "-" for NaN or infinity.
std::string format_fixed(double value, int decimals);
// The current time as "2026-11-22 03:48:05 UTC".
std::string utc_timestamp();

}  // namespace ferry::cli
