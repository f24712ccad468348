// Byte-granular fill of one bound window: byte i of the window, for i in [begin_byte, end_byte),
// gets byte (i % 4) of word_pattern (the host rotates the user's pattern so that this holds).
// Whole words are plain stores; the one or two partial words at the edges are merged with
// atomics, so bytes next to the range, which other work may be writing, are never written.
#version 460
#extension GL_GOOGLE_include_directive : require

#include "fill_abi.h"

layout(local_size_x = FERRY_FILL_WORKGROUP_SIZE) in;

layout(std430, set = 0, binding = 0) restrict buffer Destination {
  uint words[];
} dst;

void main() {
  const uint first_word = push.begin_byte >> 2;
  const uint end_word = (push.end_byte + 3u) >> 2;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // Grid-stride loop: the host caps the group count, each invocation covers several words.
  for (uint word = first_word + gl_GlobalInvocationID.x; word < end_word; word += stride) {
    const uint word_byte = word << 2;
    const uint lo = max(push.begin_byte, word_byte) - word_byte;       // 0..3
    const uint hi = min(push.end_byte, word_byte + 4u) - word_byte;    // 1..4
    if (lo == 0u && hi == 4u) {
      dst.words[word] = push.word_pattern;
    } else {
      // hi - lo < 4 here, so the shift stays below 32.
      const uint mask = ((1u << ((hi - lo) * 8u)) - 1u) << (lo * 8u);
      atomicAnd(dst.words[word], ~mask);
      atomicOr(dst.words[word], push.word_pattern & mask);
    }
  }
}
