// fill: the public call (validation, lowering) and the CPU reference.
#include "ferry/ops/fill.hpp"

#include <algorithm>
#include <cstring>

#include "core/op_record.hpp"
#include "ops/fill.hpp"

namespace ferry {

Status fill(CommandList& commands, const BufferRef& dst, std::uint64_t offset, std::uint64_t size,
            std::uint32_t pattern) {
  static constexpr const char* kCall = "ferry::fill";
  if (size == 0) return Status(ErrorCode::invalid_argument, std::string(kCall) + ": size must be > 0");
  const detail::BindingRequest bindings[] = {
      {&dst, offset, size, backend::Access::write, "destination"}};
  return detail::OpRecorder::record(commands, kCall, ops::FillArgs{pattern}, bindings);
}

namespace ops {

void run_on_cpu(const FillArgs& args, std::span<const std::span<std::byte>> bindings) {
  std::span<std::byte> dst = bindings[0];
  std::byte block[64];
  for (std::size_t i = 0; i < sizeof block; ++i) {
    block[i] = static_cast<std::byte>((args.pattern >> (8 * (i % 4))) & 0xffu);
  }
  for (std::uint64_t done = 0; done < dst.size();) {
    const std::uint64_t n = std::min<std::uint64_t>(sizeof block, dst.size() - done);
    std::memcpy(dst.data() + done, block, n);  // the block is whole words: the phase is kept
    done += n;
  }
}

}  // namespace ops
}  // namespace ferry
