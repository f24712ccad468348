// Reads a SPIR-V module's push-constant block layout at compile time, so that each shader's C++
// push-constant struct is checked against the SPIR-V the build really produced:
//   constexpr auto layout = spirv::push_constant_layout(shaders::fill_spv);
//   static_assert(layout.offsets[1] == offsetof(FillPushConstants, end_byte));
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace ferry::vulkan::spirv {

struct PushConstantLayout {
  bool found = false;              // the module has exactly one push-constant block
  std::uint32_t member_count = 0;
  std::array<std::uint32_t, 32> offsets{};  // Offset decoration of each member
};

constexpr PushConstantLayout push_constant_layout(std::span<const std::uint32_t> words) {
  // Opcodes and enumerants from the SPIR-V specification.
  constexpr std::uint32_t kOpTypeStruct = 30;
  constexpr std::uint32_t kOpTypePointer = 32;
  constexpr std::uint32_t kOpVariable = 59;
  constexpr std::uint32_t kOpMemberDecorate = 72;
  constexpr std::uint32_t kDecorationOffset = 35;
  constexpr std::uint32_t kStorageClassPushConstant = 9;
  constexpr std::size_t kHeaderWords = 5;

  PushConstantLayout layout;
  if (words.size() < kHeaderWords || words[0] != 0x07230203u) return layout;

  // Calls visit(opcode, operands) for every instruction; stops at a malformed one.
  auto for_each_instruction = [&](auto&& visit) {
    for (std::size_t at = kHeaderWords; at < words.size();) {
      const std::uint32_t count = words[at] >> 16;
      if (count == 0 || at + count > words.size()) return;
      visit(words[at] & 0xFFFFu, words.subspan(at + 1, count - 1));
      at += count;
    }
  };

  std::uint32_t pointer_type = 0;
  int variables = 0;
  for_each_instruction([&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpVariable: result type, result id, storage class.
    if (opcode == kOpVariable && operands.size() >= 3 &&
        operands[2] == kStorageClassPushConstant) {
      pointer_type = operands[0];
      ++variables;
    }
  });
  if (variables != 1) return layout;

  std::uint32_t block_type = 0;
  for_each_instruction([&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpTypePointer: result id, storage class, pointee type.
    if (opcode == kOpTypePointer && operands.size() >= 3 && operands[0] == pointer_type) {
      block_type = operands[2];
    }
  });

  bool is_struct = false;
  for_each_instruction([&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpTypeStruct: result id, member types...
    if (opcode == kOpTypeStruct && !operands.empty() && operands[0] == block_type) {
      is_struct = true;
      layout.member_count = static_cast<std::uint32_t>(operands.size() - 1);
    }
    // OpMemberDecorate: struct type, member, decoration, literals...
    if (opcode == kOpMemberDecorate && operands.size() >= 4 && operands[0] == block_type &&
        operands[2] == kDecorationOffset && operands[1] < layout.offsets.size()) {
      layout.offsets[operands[1]] = operands[3];
    }
  });
  layout.found = is_struct && layout.member_count <= layout.offsets.size();
  return layout;
}

}  // namespace ferry::vulkan::spirv
