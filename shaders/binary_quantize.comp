// binary_quantize (ferry/ops/binary_quantize.hpp) over the rows of one dispatch: float32, float16
// or bfloat16 rows in, packed 32-bit code words out.
//
// One work item per (row, 32-bit code word): it reads that word's 32 elements (fewer at the end
// of a row, none in a padding word) and their thresholds, and stores the word; no two items
// share a word, so there are no atomics and nothing next to the codes is ever written.
//
// Nothing here is float arithmetic: Vulkan lets a device flush denormals in conversions and
// comparisons, which would change bits (a bfloat16 or float32 subnormal compared with 0). So the
// elements are read as raw bits, float16 is widened to float32 bits by integer code, and
// "x > t" is an integer comparison of sign-magnitude keys after ruling out NaNs.
//
// Inputs are read as 32-bit words (16-bit elements: the half of the word they lie in), so the
// shader needs no 16-bit storage feature. When the host has checked that every whole group of 32
// elements (and of thresholds) starts on 16 bytes, it says so in vector_loads and full groups are
// read as 16-byte vectors.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "binary_quantize_abi.h"

layout(local_size_x = FERRY_BINARY_QUANTIZE_WORKGROUP_SIZE) in;

// Two views of each read-only window: words (any element) and 16-byte vectors (aligned groups).
// Both are read-only, so their aliasing is harmless.
layout(std430, set = 0, binding = 0) restrict readonly buffer Input {
  uint words[];
} src;
layout(std430, set = 0, binding = 0) restrict readonly buffer InputVectors {
  uvec4 vectors[];
} src4;
layout(std430, set = 0, binding = 1) restrict writeonly buffer Codes {
  uint words[];
} dst;
// Without thresholds the host binds the input window here (a binding must be valid); it is never
// read then.
layout(std430, set = 0, binding = 2) restrict readonly buffer Thresholds {
  uint words[];
} thr;
layout(std430, set = 0, binding = 2) restrict readonly buffer ThresholdVectors {
  uvec4 vectors[];
} thr4;

// float32 bits of a float16, exactly: subnormal halves become normal floats.
uint half_to_float_bits(uint h) {
  const uint sign = (h & 0x8000u) << 16u;
  const uint exponent = (h >> 10u) & 0x1fu;
  const uint mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13u);  // infinity, NaN
  if (exponent != 0u) return sign | ((exponent + (127u - 15u)) << 23u) | (mantissa << 13u);
  if (mantissa == 0u) return sign;
  // mantissa * 2^-24 with its leading 1 at bit p (0..9): 2^(p - 24) times 1.fraction.
  const uint p = uint(findMSB(mantissa));
  return sign | ((p + (127u - 24u)) << 23u) | ((mantissa << (23u - p)) & 0x7fffffu);
}

// float32 bits of a raw element (the low 16 bits of `raw` for the 16-bit types).
uint float_bits(uint raw) {
  if (push.input_type == FERRY_BINARY_QUANTIZE_FLOAT16) return half_to_float_bits(raw);
  if (push.input_type == FERRY_BINARY_QUANTIZE_BFLOAT16) return raw << 16u;
  return raw;
}

// 1 when the float32 x > t (IEEE: false with a NaN, -0 == +0, subnormals kept), else 0. For
// non-NaN floats, sign-magnitude keys (-0 and +0 both 0) are ordered as the values.
uint greater(uint x, uint t) {
  const uint x_magnitude = x & 0x7fffffffu;
  const uint t_magnitude = t & 0x7fffffffu;
  if (x_magnitude > 0x7f800000u || t_magnitude > 0x7f800000u) return 0u;
  const int x_key = (x >> 31u) != 0u ? -int(x_magnitude) : int(x_magnitude);
  const int t_key = (t >> 31u) != 0u ? -int(t_magnitude) : int(t_magnitude);
  return x_key > t_key ? 1u : 0u;
}

uint threshold_bits(uint index) {
  return push.has_thresholds != 0u ? thr.words[index] : 0u;
}

uvec4 threshold_vector(uint index) {
  return push.has_thresholds != 0u ? thr4.vectors[index] : uvec4(0u);
}

// The code word of `count` (1..32) elements from input element e0, thresholds from word t0.
uint scalar_word(uint e0, uint t0, uint count) {
  uint word = 0u;
  for (uint b = 0u; b < count; ++b) {
    const uint e = e0 + b;
    uint raw;
    if (push.input_type == FERRY_BINARY_QUANTIZE_FLOAT32) {
      raw = src.words[e];
    } else {
      // Little endian: the even element is the low half of its word.
      raw = (src.words[e >> 1u] >> ((e & 1u) << 4u)) & 0xffffu;
    }
    word |= greater(float_bits(raw), threshold_bits(t0 + b)) << b;
  }
  return word;
}

// The code word of 32 elements from input element e0, thresholds from word t0, both starting on
// 16 bytes (vector_loads).
uint vector_word(uint e0, uint t0) {
  uint word = 0u;
  if (push.input_type == FERRY_BINARY_QUANTIZE_FLOAT32) {
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uvec4 x = src4.vectors[(e0 >> 2u) + k];
      const uvec4 t = threshold_vector((t0 >> 2u) + k);
      word |= (greater(x.x, t.x) | (greater(x.y, t.y) << 1u) | (greater(x.z, t.z) << 2u) |
               (greater(x.w, t.w) << 3u)) << (4u * k);
    }
  } else {
    // 8 elements per vector: element 8k + 2c is the low half of component c, 8k + 2c + 1 the high.
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uvec4 x = src4.vectors[(e0 >> 3u) + k];
      const uvec4 t_low = threshold_vector((t0 >> 2u) + 2u * k);
      const uvec4 t_high = threshold_vector((t0 >> 2u) + 2u * k + 1u);
      const uint t[8] = uint[8](t_low.x, t_low.y, t_low.z, t_low.w, t_high.x, t_high.y, t_high.z,
                                t_high.w);
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        const uint low = float_bits(x[c] & 0xffffu);
        const uint high = float_bits(x[c] >> 16u);
        word |= (greater(low, t[2u * c]) | (greater(high, t[2u * c + 1u]) << 1u))
                << (8u * k + 2u * c);
      }
    }
  }
  return word;
}

void main() {
  const uint words_per_row = push.words_per_row;
  const uint items = push.rows * words_per_row;  // < 2^29: the codes window is under 2^31 bytes
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // Grid-stride loop: the host caps the group count, each invocation may cover several items.
  for (uint item = gl_GlobalInvocationID.x; item < items; item += stride) {
    const uint row = item / words_per_row;
    const uint first = (item - row * words_per_row) * 32u;  // the word's first dimension
    uint word = 0u;  // padding words (first >= dims) stay 0
    if (first < push.dims) {
      const uint count = min(32u, push.dims - first);
      const uint e0 = push.src_origin + row * push.row_stride + first;
      const uint t0 = push.threshold_origin + first;
      word = push.vector_loads != 0u && count == 32u ? vector_word(e0, t0)
                                                     : scalar_word(e0, t0, count);
    }
    dst.words[push.dst_origin + item] = word;
  }
}
