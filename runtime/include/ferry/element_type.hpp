// The floating-point element types ops read and write (normalize's outputs, binary_quantize's
// inputs), shared by every op that takes one so that they all spell them the same way.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry {

enum class ElementType : std::uint8_t { float32, float16, bfloat16 };

inline std::string_view to_string(ElementType type) noexcept {
  switch (type) {
    case ElementType::float32: return "float32";
    case ElementType::float16: return "float16";
    case ElementType::bfloat16: return "bfloat16";
  }
  return "unknown element type";
}

// Bytes of one element: 4 for float32, 2 for the 16-bit types (and for an out-of-range value,
// which every op rejects before it uses a size).
inline std::uint32_t element_size(ElementType type) noexcept {
  return type == ElementType::float32 ? 4 : 2;
}

}  // namespace ferry
