// How error messages write sizes, ranges and numbers: the same wording in core, pipelines and
// backends.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::detail {

// "12345 bytes (11.8 MiB)".
std::string describe_bytes(std::uint64_t bytes);
// "[4096, 8192)": a byte range with both ends as numbers ("[18446744073709551615, +4 past
// 2^64)" when the end does not fit).
std::string describe_range(std::uint64_t offset, std::uint64_t size);
// A number as the shortest text that reads back the same (1e-320, not "0.000000").
std::string describe_number(double value);

}  // namespace ferry::detail
