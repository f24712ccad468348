// The ops, in one list. Everything per op is generated from it: the variant of the ops'
// arguments that commands carry, each backend's dispatch (so a backend without a handler for a
// listed op does not compile), the names Device::supports() knows. No static registration a
// linker could drop. Adding an op (docs/ARCHITECTURE.md, "Adding an op"): write its files, then
// add its include and its entry here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>

#include "ops/binary_quantize.hpp"
#include "ops/fill.hpp"
#include "ops/hamming_topk.hpp"
#include "ops/ibp_decode.hpp"
#include "ops/ibp_encode.hpp"
#include "ops/normalize.hpp"
#include "ops/rescore.hpp"

// X(name, Type): the op's name (Device::supports, error messages, tests) and the prefix of its
// types: ops::<Type>Args (what a command carries), vulkan::<Type>Pipeline, cuda::<Type>Kernel.
#define FERRY_OP_LIST(X)             \
  X(fill, Fill)                      \
  X(normalize, Normalize)            \
  X(binary_quantize, BinaryQuantize) \
  X(hamming_topk, HammingTopk)       \
  X(rescore, Rescore)                \
  X(ibp_decode, IbpDecode)           \
  X(ibp_encode, IbpEncode)

namespace ferry::ops {

enum class OpKind : std::uint8_t {
#define FERRY_OP_KIND(name, Type) name,
  FERRY_OP_LIST(FERRY_OP_KIND)
#undef FERRY_OP_KIND
};

// The ops' names, in list order.
inline constexpr std::string_view kOpNames[] = {
#define FERRY_OP_NAME(name, Type) #name,
    FERRY_OP_LIST(FERRY_OP_NAME)
#undef FERRY_OP_NAME
};
inline constexpr std::size_t kOpCount = std::size(kOpNames);

constexpr std::string_view op_name(OpKind kind) { return kOpNames[static_cast<std::size_t>(kind)]; }

// `Template<T...>` over a list written as `void, T1, T2, ...` (the leading void lets the X-macro
// put a comma before every entry).
template <template <typename...> class Template, typename Void, typename... T>
struct ApplyToList {
  using type = Template<T...>;
};

// What a command carries: one alternative per op, in list order (index() == OpKind).
#define FERRY_OP_ARGS(name, Type) , Type##Args
using OpArgs = typename ApplyToList<std::variant, void FERRY_OP_LIST(FERRY_OP_ARGS)>::type;
#undef FERRY_OP_ARGS

// The OpKind of an op's arguments type.
template <typename Args, typename... Alternatives>
constexpr std::size_t index_in(const std::variant<Alternatives...>*) {
  std::size_t index = 0;
  bool found = false;
  ((found = found || std::is_same_v<Args, Alternatives>, index += found ? 0 : 1), ...);
  return index;
}
template <typename Args>
constexpr OpKind kind_of() {
  constexpr std::size_t index = index_in<Args>(static_cast<const OpArgs*>(nullptr));
  static_assert(index < kOpCount, "not the arguments of an op in ops/op_list.hpp");
  return static_cast<OpKind>(index);
}

// Whether `Handler` can be called with every op's arguments (then `Extra...`): each backend
// static_asserts it for its dispatch, so a missing handler is a compile error that names it.
#define FERRY_OP_HANDLED(name, Type) &&std::is_invocable_v<Handler, const Type##Args&, Extra...>
template <typename Handler, typename... Extra>
inline constexpr bool handles_every_op = true FERRY_OP_LIST(FERRY_OP_HANDLED);
#undef FERRY_OP_HANDLED

}  // namespace ferry::ops
