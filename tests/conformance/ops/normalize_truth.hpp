// The truth for normalize: the expected output computed element by element straight from the
// definition in ferry/normalize.hpp (std::fma, the compiler's _Float16 conversion, bfloat16
// rounding by comparison), sharing no code with the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ferry/ops/normalize.hpp"

namespace ferry_test {

// The output bytes of `params` applied to `input` (which starts at the op's source offset).
std::vector<std::byte> expected_output(const ferry::NormalizeParams& params,
                                       std::span<const std::byte> input);

// The parameters in one line, for failure messages.
std::string describe(const ferry::NormalizeParams& params, std::uint64_t src_offset = 0,
                     std::uint64_t dst_offset = 0);

}  // namespace ferry_test
