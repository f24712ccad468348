#include "core/describe.hpp"

#include <charconv>
#include <cstdio>
#include <system_error>

#include "core/checked.hpp"

namespace ferry::detail {

std::string describe_bytes(std::uint64_t bytes) {
  std::string out = std::to_string(bytes) + " bytes";
  if (bytes >= (1ull << 20)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f MiB)", static_cast<double>(bytes) / (1 << 20));
    out += buf;
  }
  return out;
}

std::string describe_range(std::uint64_t offset, std::uint64_t size) {
  if (const auto end = checked_add(offset, size)) {
    return "[" + std::to_string(offset) + ", " + std::to_string(*end) + ")";
  }
  return "[" + std::to_string(offset) + ", +" + std::to_string(size) + " past 2^64)";
}

std::string describe_number(double value) {
  char buf[64];
  const auto [end, error] = std::to_chars(buf, buf + sizeof buf, value);
  return error == std::errc() ? std::string(buf, end) : std::string("?");
}

}  // namespace ferry::detail
