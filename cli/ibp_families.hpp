// The tensor families `ferry bench ibp` measures the IBP codec on: tensors with the statistics
// of real ML data, made from each element's index (so any size or row width is the same data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ferry/ibp.hpp"

namespace ferry::cli {

struct IbpFamily {
  std::string name;
  std::string description;
  ibp::DType dtype;
  std::uint8_t element_size;
  std::uint64_t row_elements;  // the family's natural row (the codec bench's)
};

// The families of `names` (a --families list, checked against the choices: indices64, tokens32,
// bf16-weights, fp16-activations, relu32, bow-features, embeddings32), in that order.
std::vector<const IbpFamily*> ibp_families_named(std::span<const std::string> names);

// The family's tensor: `elements` elements, threads filling slices (each element from its index).
std::vector<std::byte> make_ibp_tensor(const IbpFamily& family, std::uint64_t elements);

}  // namespace ferry::cli
