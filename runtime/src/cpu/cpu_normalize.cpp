#include "cpu/cpu_normalize.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ferry::cpu {
namespace {

// Output bits of every possible input byte of one channel: the op has only 256 distinct results
// per channel, computed with the exact definition (std::fma is correctly rounded).
using ChannelTable = std::array<std::uint32_t, 256>;

ChannelTable build_table(float scale, float bias, ElementType type) {
  ChannelTable table{};
  for (std::uint32_t x = 0; x < 256; ++x) {
    const float y = std::fma(static_cast<float>(x), scale, bias);
    switch (type) {
      case ElementType::float32: std::memcpy(&table[x], &y, sizeof y); break;
      case ElementType::float16: table[x] = to_float16_bits(y); break;
      case ElementType::bfloat16: table[x] = to_bfloat16_bits(y); break;
    }
  }
  return table;
}

template <typename Element>
void run(const backend::NormalizeCommand& cmd, const std::byte* src, std::byte* dst,
         const std::array<ChannelTable, kMaxNormalizeChannels>& tables) {
  auto* out = reinterpret_cast<Element*>(dst + cmd.dst_offset);
  const auto* in = reinterpret_cast<const std::uint8_t*>(src + cmd.src_offset);
  const std::uint64_t width = cmd.width;
  const std::uint64_t height = cmd.height;
  const std::uint64_t channels = cmd.channels;
  // Output strides in elements.
  const bool planar = cmd.output_layout == ImageLayout::nchw;
  const std::uint64_t out_x = planar ? 1 : channels;
  const std::uint64_t out_y = width * out_x;
  const std::uint64_t out_c = planar ? height * width : 1;
  const std::uint64_t out_n = channels * height * width;
  for (std::uint64_t n = 0; n < cmd.batch; ++n) {
    for (std::uint64_t c = 0; c < channels; ++c) {
      const ChannelTable& table = tables[c];
      for (std::uint64_t y = 0; y < height; ++y) {
        const std::uint8_t* row = in + n * cmd.image_stride + c * cmd.channel_stride + y * cmd.row_stride;
        Element* out_row = out + n * out_n + c * out_c + y * out_y;
        for (std::uint64_t x = 0; x < width; ++x) {
          const std::uint64_t source_x = cmd.mirror ? width - 1 - x : x;
          out_row[x * out_x] = static_cast<Element>(table[row[source_x * cmd.pixel_stride]]);
        }
      }
    }
  }
}

}  // namespace

void run_normalize(const backend::NormalizeCommand& command, const std::byte* src, std::byte* dst) {
  std::array<ChannelTable, kMaxNormalizeChannels> tables{};
  for (std::uint32_t c = 0; c < command.channels; ++c) {
    tables[c] = build_table(command.scale[c], command.bias[c], command.output_type);
  }
  if (command.output_type == ElementType::float32) {
    run<std::uint32_t>(command, src, dst, tables);
  } else {
    run<std::uint16_t>(command, src, dst, tables);
  }
}

}  // namespace ferry::cpu
