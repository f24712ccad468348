#include "format.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace ferry::cli {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  std::uint64_t whole = bytes;
  while (whole >= 1024 && unit < 4) {
    whole /= 1024;
    ++unit;
  }
  const double scaled = static_cast<double>(bytes) / std::pow(1024.0, unit);
  char text[32];
  if (scaled == std::floor(scaled)) {
    std::snprintf(text, sizeof text, "%.0f %s", scaled, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", scaled, kUnits[unit]);
  }
  return text;
}

std::string format_fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

}  // namespace ferry::cli
