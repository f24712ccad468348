// normalize (ferry/normalize.hpp) over the images of one dispatch: uint8 source window in, float32
// or 16-bit float destination window out.
//
// Each workgroup first builds a lookup table in shared memory of the final output bits for every
// (channel, byte) pair, with integer-only code (normalize_lut.h), so results do not depend on
// how the device implements fma, float->half conversion or denormals. The main loop then only
// loads bytes, looks them up and stores; the host caps the group count so that the table is built
// a few times per compute unit, not once per handful of pixels.
//
// 8- and 16-bit storage let each invocation load single bytes and store single 16-bit elements,
// so no two invocations (or two commands writing neighbouring ranges) ever share a word.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#include "normalize_push_constants.h"
#include "normalize_lut.h"

layout(local_size_x = FERRY_NORMALIZE_DEFAULT_WORKGROUP_SIZE, local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) restrict readonly buffer Source {
  uint8_t bytes[];
} src;

// Two views of the same destination window; a dispatch uses the one of its output type.
layout(std430, set = 0, binding = 1) writeonly buffer Destination32 {
  uint words[];
} dst32;
layout(std430, set = 0, binding = 1) writeonly buffer Destination16 {
  uint16_t halves[];
} dst16;

// lut[(c << 8) | x]: the stored bits for byte x of channel c.
shared uint lut[FERRY_NORMALIZE_MAX_CHANNELS * 256];

void main() {
  const uint channels = push.channels;
  for (uint entry = gl_LocalInvocationID.x; entry < (channels << 8); entry += gl_WorkGroupSize.x) {
    const uint channel = entry >> 8;
    lut[entry] = ferry_normalize_entry(entry & 255u, push.scale_bits[channel],
                                       push.bias_bits[channel], push.output_type);
  }
  barrier();

  const uint width = push.width;
  const uint height = push.height;
  const bool store16 = push.output_type != FERRY_NORMALIZE_FLOAT32;
  // Position of this invocation's first pixel; later ones are a grid stride further, reached by
  // adding the stride's (images, rows, x) decomposition with carries.
  uint pixel = gl_GlobalInvocationID.x;
  uint x = pixel % width;
  uint y = (pixel / width) % height;
  uint image = pixel / width / height;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  while (image < push.image_count) {
    const uint src_pixel = push.src_origin + image * push.image_stride + y * push.row_stride +
                           x * push.pixel_step;
    const uint dst_pixel = push.dst_origin + pixel * push.pixel_elements + image * push.image_gap;
    // All loads first, so that they are in flight together.
    uint values[FERRY_NORMALIZE_MAX_CHANNELS];
    [[unroll]] for (uint c = 0u; c < FERRY_NORMALIZE_MAX_CHANNELS; ++c) {
      if (c < channels) values[c] = uint(src.bytes[src_pixel + c * push.channel_stride]);
    }
    [[unroll]] for (uint c = 0u; c < FERRY_NORMALIZE_MAX_CHANNELS; ++c) {
      if (c < channels) {
        const uint bits = lut[(c << 8) | values[c]];
        const uint index = dst_pixel + c * push.channel_elements;
        if (store16) {
          dst16.halves[index] = uint16_t(bits);
        } else {
          dst32.words[index] = bits;
        }
      }
    }

    pixel += stride;
    x += push.step_x;
    y += push.step_rows;
    image += push.step_images;
    if (x >= width) {
      x -= width;
      ++y;
    }
    if (y >= height) {
      y -= height;
      ++image;
    }
  }
}
