// fill, as every backend runs it (ferry/ops/fill.hpp has the public call and its semantics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::ops {

// Binding 0: the destination range, written. Byte i of it (i counted from the binding's start)
// gets byte (i % 4) of `pattern`, little endian: any byte offset and size.
struct FillArgs {
  std::uint32_t pattern = 0;
};

// The CPU reference: `bindings` are the bindings' bytes.
void run_on_cpu(const FillArgs& args, std::span<const std::span<std::byte>> bindings);

}  // namespace ferry::ops
