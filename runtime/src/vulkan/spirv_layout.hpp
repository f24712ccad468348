// Reads a SPIR-V module's push-constant block layout at compile time, so that each shader's C++
// push-constant struct is checked against the SPIR-V the build really produced:
//   constexpr auto layout = spirv::push_constant_layout(shaders::fill_spv);
//   static_assert(layout.offsets[1] == offsetof(FillPushConstants, end_byte));
// and its float arithmetic (float_arithmetic), where an op's exact results depend on it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

namespace ferry::vulkan::spirv {

inline constexpr std::uint32_t kMagic = 0x07230203u;
inline constexpr std::size_t kHeaderWords = 5;

// Calls visit(opcode, operands) for every instruction of a module; stops at a malformed one.
template <typename Visit>
constexpr void for_each_instruction(std::span<const std::uint32_t> words, Visit&& visit) {
  if (words.size() < kHeaderWords || words[0] != kMagic) return;
  for (std::size_t at = kHeaderWords; at < words.size();) {
    const std::uint32_t count = words[at] >> 16;
    if (count == 0 || at + count > words.size()) return;
    visit(words[at] & 0xFFFFu, words.subspan(at + 1, count - 1));
    at += count;
  }
}

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

  PushConstantLayout layout;
  if (words.size() < kHeaderWords || words[0] != kMagic) return layout;

  std::uint32_t pointer_type = 0;
  int variables = 0;
  for_each_instruction(words, [&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpVariable: result type, result id, storage class.
    if (opcode == kOpVariable && operands.size() >= 3 &&
        operands[2] == kStorageClassPushConstant) {
      pointer_type = operands[0];
      ++variables;
    }
  });
  if (variables != 1) return layout;

  std::uint32_t block_type = 0;
  for_each_instruction(words, [&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpTypePointer: result id, storage class, pointee type.
    if (opcode == kOpTypePointer && operands.size() >= 3 && operands[0] == pointer_type) {
      block_type = operands[2];
    }
  });

  bool is_struct = false;
  for_each_instruction(words, [&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
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

// Opcodes, enumerants and names from the SPIR-V and GLSL.std.450 specifications.
inline constexpr std::uint32_t kOpExtInstImport = 11;
inline constexpr std::uint32_t kOpExtInst = 12;
// OpDecorate, then OpMemberDecorate to OpGroupMemberDecorate (72-75).
inline constexpr std::uint32_t kOpDecorate = 71;
inline constexpr std::uint32_t kOpDecorateId = 332;
inline constexpr std::uint32_t kOpDecorateString = 5632;
inline constexpr std::uint32_t kOpMemberDecorateString = 5633;
inline constexpr std::uint32_t kDecorationNoContraction = 42;
inline constexpr std::uint32_t kGlslFma = 50;
inline constexpr std::uint32_t kGlslName = 0x4C534C47u;  // "GLSL" of "GLSL.std.450"

// The id of the module's GLSL.std.450 import (0 without one).
constexpr std::uint32_t glsl_import(std::span<const std::uint32_t> words) {
  std::uint32_t glsl = 0;
  for_each_instruction(words, [&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpExtInstImport: result id, name.
    if (opcode == kOpExtInstImport && operands.size() >= 2 && operands[1] == kGlslName) {
      glsl = operands[0];
    }
  });
  return glsl;
}

// Whether `id` is decorated NoContraction. Only the module's decorations are read: they come
// together, before the types and functions (SPIR-V's logical layout). Read through the whole
// module for each fma and subtraction, a rescore shader of 134 KB (a variant tried and dropped,
// docs/PERFORMANCE.md) took GCC past its limit of constexpr operations.
constexpr bool has_no_contraction(std::span<const std::uint32_t> words, std::uint32_t id) {
  if (words.size() < kHeaderWords || words[0] != kMagic) return false;
  bool in_decorations = false;
  for (std::size_t at = kHeaderWords; at < words.size();) {
    const std::uint32_t count = words[at] >> 16, opcode = words[at] & 0xFFFFu;
    if (count == 0 || at + count > words.size()) return false;
    const bool decoration = (opcode >= kOpDecorate && opcode <= kOpDecorate + 4) ||
                            opcode == kOpDecorateId || opcode == kOpDecorateString ||
                            opcode == kOpMemberDecorateString;
    if (in_decorations && !decoration) return false;  // past the last one
    in_decorations = in_decorations || decoration;
    // OpDecorate: target, decoration.
    if (opcode == kOpDecorate && count >= 3 && words[at + 1] == id &&
        words[at + 2] == kDecorationNoContraction) {
      return true;
    }
    at += count;
  }
  return false;
}

// The float arithmetic of a module, for shaders whose results must not depend on how a compiler
// contracts or splits it (rescore.comp): how many GLSL.std.450 Fma and OpFSub instructions it has
// and how many of them are decorated NoContraction, and how many OpFMul and OpFAdd (which a split
// fma would leave).
struct FloatArithmetic {
  std::uint32_t fmas = 0;
  std::uint32_t precise_fmas = 0;
  std::uint32_t subs = 0;
  std::uint32_t precise_subs = 0;
  std::uint32_t muls_and_adds = 0;
};

constexpr FloatArithmetic float_arithmetic(std::span<const std::uint32_t> words) {
  // Opcodes from the SPIR-V specification.
  constexpr std::uint32_t kOpFAdd = 129;
  constexpr std::uint32_t kOpFSub = 131;
  constexpr std::uint32_t kOpFMul = 133;

  const std::uint32_t glsl = glsl_import(words);
  FloatArithmetic found;
  for_each_instruction(words, [&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    // OpExtInst: result type, result id, set, instruction, operands; OpFSub: type, id, a, b.
    if (opcode == kOpExtInst && operands.size() >= 4 && operands[2] == glsl &&
        operands[3] == kGlslFma) {
      ++found.fmas;
      if (has_no_contraction(words, operands[1])) ++found.precise_fmas;
    }
    if (opcode == kOpFSub && operands.size() >= 2) {
      ++found.subs;
      if (has_no_contraction(words, operands[1])) ++found.precise_subs;
    }
    if (opcode == kOpFMul || opcode == kOpFAdd) ++found.muls_and_adds;
  });
  return found;
}

// `words` with NoContraction added to every GLSL.std.450 Fma that lacks it (kWords: words.size()
// plus 3 per such Fma, float_arithmetic's fmas - precise_fmas). glslang does not decorate an fma()
// that a `precise` variable consumes, although GLSL makes it one operation of the precision every
// such fma() has; SPIR-V says that with the decoration (GLSL.std.450, Fma), so it is added here,
// in front of the module's first decoration.
template <std::size_t kWords>
constexpr std::array<std::uint32_t, kWords> with_precise_fmas(
    std::span<const std::uint32_t> words) {
  std::array<std::uint32_t, kWords> out{};
  const std::uint32_t glsl = glsl_import(words);
  std::size_t first_decoration = 0;
  for (std::size_t at = kHeaderWords; at < words.size() && first_decoration == 0;) {
    if ((words[at] & 0xFFFFu) == kOpDecorate) first_decoration = at;
    at += std::max<std::uint32_t>(1, words[at] >> 16);
  }
  std::size_t n = 0;
  for (std::size_t i = 0; i < first_decoration && n < kWords; ++i) out[n++] = words[i];
  for_each_instruction(words, [&](std::uint32_t opcode, std::span<const std::uint32_t> operands) {
    if (opcode == kOpExtInst && operands.size() >= 4 && operands[2] == glsl &&
        operands[3] == kGlslFma && !has_no_contraction(words, operands[1]) && n + 3 <= kWords) {
      out[n++] = (3u << 16) | kOpDecorate;
      out[n++] = operands[1];
      out[n++] = kDecorationNoContraction;
    }
  });
  for (std::size_t i = first_decoration; i < words.size() && n < kWords; ++i) out[n++] = words[i];
  return out;
}

}  // namespace ferry::vulkan::spirv
