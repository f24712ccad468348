#include "core/host_view.hpp"

#include <string>

#include "core/state.hpp"

namespace ferry::detail {

Result<std::span<std::byte>> host_view(const BufferRef& memory, std::uint64_t offset) {
  if (!memory.buffer || !memory.buffer->impl) {
    return Status(ErrorCode::released, std::string("the ") + memory.what + " was released");
  }
  std::byte* data = memory.buffer->impl->host_data();
  if (data == nullptr) {
    return Status(ErrorCode::invalid_argument,
                  std::string("the ") + memory.what +
                      " is device memory; the host cannot read it (use a Lease or host memory)");
  }
  if (offset > memory.size) {
    return Status(ErrorCode::out_of_range, "offset " + std::to_string(offset) + " past the " +
                                               std::to_string(memory.size) + " bytes of the " +
                                               memory.what);
  }
  return std::span<std::byte>(data + memory.base + offset, memory.size - offset);
}

}  // namespace ferry::detail
