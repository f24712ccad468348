// Compiled by ctest, never built into anything: a backend's dispatch over the op list
// (ops/op_list.hpp) compiles when it has a handler for every listed op, and fails to compile
// when one is missing, with handles_every_op's static_assert naming what is wrong. Each backend
// asserts the same (the CPU backend: RunOnCpu; Vulkan and CUDA: their <Type>Pipeline and
// <Type>Kernel tuples, which cannot be formed without every op's class).
#include <variant>

#include "ops/op_list.hpp"

namespace {

struct Handlers {
#ifdef FERRY_HANDLE_EVERY_OP
#define FERRY_HANDLER(name, Type) \
  void operator()(const ferry::ops::Type##Args&) const {}
  FERRY_OP_LIST(FERRY_HANDLER)
#undef FERRY_HANDLER
#else
  void operator()(const ferry::ops::FillArgs&) const {}  // normalize's handler is missing
#endif
};

static_assert(ferry::ops::handles_every_op<Handlers>, "a listed op has no handler");

}  // namespace

void dispatch(const ferry::ops::OpArgs& args) { std::visit(Handlers{}, args); }
