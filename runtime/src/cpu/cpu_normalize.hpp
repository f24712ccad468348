// The reference implementation of the normalize op (backend::NormalizeCommand).
#pragma once

#include <cstddef>

#include "core/backend.hpp"

namespace ferry::cpu {

// src and dst are the starts of the command's buffers (offsets are applied here).
void run_normalize(const backend::NormalizeCommand& command, const std::byte* src, std::byte* dst);

}  // namespace ferry::cpu
