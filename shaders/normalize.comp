// normalize (ferry/normalize.hpp) over the images of one dispatch: uint8 source window in, float32
// or 16-bit float destination window out.
//
// Each workgroup first builds a lookup table in shared memory of the final output bits for every
// (channel, byte) pair, with integer-only code (normalize_lut.h), so results do not depend on
// how the device implements fma, float->half conversion or denormals. The main loop then only
// loads bytes, looks them up and stores; the host caps the group count at about what the device
// runs at a time, so that the table is built a few times per compute unit, not once per handful
// of pixels.
//
// Two paths, chosen per dispatch by the host, each a pipeline of its own made from this shader
// with specialization constants (runtime/src/vulkan/ops/normalize.hpp):
// - the vector path, for interleaved tightly packed input (the common NHWC case) whose width is a
//   multiple of the run length and whose words and vectors are all aligned: each work item is a
//   run of 4 or 8 pixels of a row, loaded as 32-bit words and stored as 16-byte (or 8-byte)
//   vectors. Invocations take their runs a few at a time and load the next few before looking up
//   and storing the current ones (the first few before the table is built), so that loads are
//   always in flight.
//   Channels, run length, element size and output layout are specialization constants, so every
//   byte index and table row folds to a constant (no arrays indexed at run time).
// - the element path for everything else: one pixel per work item, byte loads, element stores.
// 8- and 16-bit storage let the element path load single bytes and store single 16-bit elements,
// so no two invocations (or two commands writing neighbouring ranges) ever share a word; vector
// stores cover whole runs, which no other invocation or command writes either.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#include "normalize_abi.h"
#include "normalize_lut.h"

layout(local_size_x = FERRY_NORMALIZE_DEFAULT_WORKGROUP_SIZE, local_size_x_id = 0) in;

// The path (see normalize_abi.h for the constant ids): 0 channels is the element path.
layout(constant_id = FERRY_NORMALIZE_CHANNELS_ID) const uint kVectorChannels = 0u;
layout(constant_id = FERRY_NORMALIZE_RUN_PIXELS_ID) const uint kRunPixels = 4u;
layout(constant_id = FERRY_NORMALIZE_STORE16_ID) const bool kStore16 = false;
layout(constant_id = FERRY_NORMALIZE_PLANAR_ID) const bool kPlanar = true;
layout(constant_id = FERRY_NORMALIZE_RUNS_IN_FLIGHT_ID) const uint kRunsInFlight = 2u;

// Two views of the same source window: bytes (element path) and words (vector path, whose word
// reads the host has checked are aligned). Both are read-only, so their aliasing is harmless.
layout(std430, set = 0, binding = 0) restrict readonly buffer Source {
  uint8_t bytes[];
} src;
layout(std430, set = 0, binding = 0) restrict readonly buffer SourceWords {
  uint words[];
} src_words;

// Views of the same destination window; a dispatch uses the one of its path and output type.
layout(std430, set = 0, binding = 1) writeonly buffer Destination32 {
  uint words[];
} dst32;
layout(std430, set = 0, binding = 1) writeonly buffer Destination16 {
  uint16_t halves[];
} dst16;
layout(std430, set = 0, binding = 1) writeonly buffer DestinationVectors {
  uvec4 vectors[];
} dst128;
layout(std430, set = 0, binding = 1) writeonly buffer DestinationHalfVectors {
  uvec2 vectors[];
} dst64;

// lut[(c << 8) | x]: the stored bits for byte x of channel c.
shared uint lut[FERRY_NORMALIZE_MAX_CHANNELS * 256];

void build_lut() {
  const uint channels = push.channels;
  for (uint entry = gl_LocalInvocationID.x; entry < (channels << 8); entry += gl_WorkGroupSize.x) {
    const uint channel = entry >> 8;
    lut[entry] = ferry_normalize_entry(entry & 255u, push.scale_bits[channel],
                                       push.bias_bits[channel], push.output_type);
  }
  barrier();
}

// Moves a grid-walk position (work item `item` at (image, y, x)) one grid stride on, without
// dividing: see step_x / step_rows / step_images in normalize_abi.h.
void advance(inout uint item, inout uint x, inout uint y, inout uint image,
             const uint items_per_row) {
  item += gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  x += push.step_x;
  y += push.step_rows;
  image += push.step_images;
  if (x >= items_per_row) {
    x -= items_per_row;
    ++y;
  }
  if (y >= push.height) {
    y -= push.height;
    ++image;
  }
}

// ---- element path ---------------------------------------------------------------------------

void element_path() {
  const uint channels = push.channels;
  const uint width = push.width;
  const uint height = push.height;
  const bool store16 = push.output_type != FERRY_NORMALIZE_FLOAT32;
  // Position of this invocation's first pixel; later ones are a grid stride further, reached by
  // adding the stride's (images, rows, x) decomposition with carries.
  uint pixel = gl_GlobalInvocationID.x;
  uint x = pixel % width;
  uint y = (pixel / width) % height;
  uint image = pixel / width / height;
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

    advance(pixel, x, y, image, width);
  }
}

// ---- vector path ----------------------------------------------------------------------------

// A run's source words (at most 8 pixels x 4 channels = 8 words), as two vectors rather than an
// array so that they stay in registers: word n is low[n] for n < 4, high[n - 4] otherwise.
struct RunWords {
  uvec4 low;
  uvec4 high;
};

// Word n of the run starting at word `first`, or 0 past its `run_words` words.
uint load_word(const uint run_words, const uint first, const uint n) {
  return n < run_words ? src_words.words[first + n] : 0u;
}

// Loads the `run_words` source words of one run starting at word `first` (built whole rather than
// component by component, which would leave the vectors in memory in the SPIR-V).
RunWords load_run(const uint run_words, const uint first) {
  return RunWords(uvec4(load_word(run_words, first, 0u), load_word(run_words, first, 1u),
                        load_word(run_words, first, 2u), load_word(run_words, first, 3u)),
                  uvec4(load_word(run_words, first, 4u), load_word(run_words, first, 5u),
                        load_word(run_words, first, 6u), load_word(run_words, first, 7u)));
}

// Byte n (a constant once unrolled) of a run's words, little endian.
uint run_byte(const RunWords words, const uint n) {
  const uint word = (n >> 2) < 4u ? words.low[n >> 2] : words.high[(n >> 2) - 4u];
  return bitfieldExtract(word, int((n & 3u) * 8u), 8);
}

// Looks up and stores vector k of a run (see vector_path) at vector `index` of the destination.
void store_vector(const bool mirrored, const uint k, const uint index, const RunWords words) {
  uint elements[8];
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    if (i < kRunPixels) {
      const uint element = k * kRunPixels + i;
      const uint pixel = kPlanar ? i : element / kVectorChannels;
      const uint channel = kPlanar ? k : element % kVectorChannels;
      const uint forward = pixel * kVectorChannels + channel;
      const uint backward = (kRunPixels - 1u - pixel) * kVectorChannels + channel;
      // Both bytes, then a select (not a branch) on the dispatch-wide mirror flag.
      const uint forward_value = run_byte(words, forward);
      const uint backward_value = run_byte(words, backward);
      const uint value = mirrored ? backward_value : forward_value;
      elements[i] = lut[(channel << 8) | value];
    }
  }
  if (!kStore16) {
    dst128.vectors[index] = uvec4(elements[0], elements[1], elements[2], elements[3]);
  } else if (kRunPixels == 8u) {
    dst128.vectors[index] =
        uvec4(elements[0] | (elements[1] << 16), elements[2] | (elements[3] << 16),
              elements[4] | (elements[5] << 16), elements[6] | (elements[7] << 16));
  } else {
    dst64.vectors[index] =
        uvec2(elements[0] | (elements[1] << 16), elements[2] | (elements[3] << 16));
  }
}

// Looks up and stores a run's vectors, vector 0 at `first_vector`, vector k a vector_step later.
void store_run(const bool mirrored, const uint first_vector, const uint vector_step,
               const RunWords words) {
  // Spelled out, so that k is a constant in each.
  store_vector(mirrored, 0u, first_vector, words);
  if (kVectorChannels > 1u) store_vector(mirrored, 1u, first_vector + vector_step, words);
  if (kVectorChannels > 2u) store_vector(mirrored, 2u, first_vector + 2u * vector_step, words);
  if (kVectorChannels > 3u) store_vector(mirrored, 3u, first_vector + 3u * vector_step, words);
}

// The vector path: kVectorChannels channels (1 to 4, as push.channels), runs of kRunPixels (4 or
// 8) pixels, 16-bit (kStore16) or 32-bit elements (then kRunPixels is 4), planar (nchw: one vector
// per channel, a plane apart) or interleaved (nhwc: kVectorChannels vectors in a row) output.
//
// Byte n of a run's words is byte n % 4 of word n / 4 (little endian): pixel n / channels,
// channel n % channels, counted from the run's lowest source pixel. Output element (vector k,
// lane i) is pixel i, channel k (planar) or element k * kRunPixels + i of the run's interleaved
// elements (interleaved); mirrored, the run's output pixel p comes from its source pixel
// kRunPixels - 1 - p.
//
// An invocation takes its work items kRunsInFlight at a time (a grid stride apart, so that a
// subgroup's loads and stores stay contiguous), and loads a batch's words before it looks up and
// stores the previous batch: a run's stores have to wait for its loads, so the source bytes
// loading at once bound how fast the output is written.
void vector_path() {
  const uint run_words = kRunPixels * kVectorChannels / 4u;
  const uint runs_per_row = push.width / kRunPixels;
  // Mirrored, pixel_step is the pixel stride's negation and the run's lowest source byte is that
  // of its last output pixel, kRunPixels - 1 pixel steps past its first.
  const bool mirrored = int(push.pixel_step) < 0;
  const uint run_step = kRunPixels * push.pixel_step;
  const uint run_origin =
      push.src_origin + (mirrored ? (kRunPixels - 1u) * push.pixel_step : 0u);
  // Destination in vectors of kRunPixels elements: the host checked that dst_origin and every
  // offset below are multiples of kRunPixels elements.
  const uint dst_first = push.dst_origin / kRunPixels;
  const uint image_gap = push.image_gap / kRunPixels;
  const uint vector_step = kPlanar ? push.channel_elements / kRunPixels : 1u;
  const uint run_vectors = kPlanar ? 1u : kVectorChannels;  // vectors from one run to the next

  uint run = gl_GlobalInvocationID.x;
  uint x = run % runs_per_row;
  uint y = (run / runs_per_row) % push.height;
  uint image = run / runs_per_row / push.height;

  // The batch in hand: loaded[u] when its run u exists, with its words and first vector.
  RunWords words[FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT];
  uint first_vectors[FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT];
  bool loaded[FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT];
  [[unroll]] for (uint u = 0u; u < FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT; ++u) {
    words[u] = RunWords(uvec4(0u), uvec4(0u));
    first_vectors[u] = 0u;
    loaded[u] = false;
    if (u < kRunsInFlight) {
      loaded[u] = image < push.image_count;
      if (loaded[u]) {
        words[u] = load_run(run_words, (run_origin + image * push.image_stride +
                                        y * push.row_stride + x * run_step) >> 2);
        first_vectors[u] = dst_first + run * run_vectors + image * image_gap;
      }
      advance(run, x, y, image, runs_per_row);
    }
  }
  build_lut();  // while the first batch is loading

  while (loaded[0]) {
    RunWords next_words[FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT] = words;
    uint next_first_vectors[FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT] = first_vectors;
    bool next_loaded[FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT] = loaded;
    [[unroll]] for (uint u = 0u; u < FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT; ++u) {
      if (u < kRunsInFlight) {
        next_loaded[u] = image < push.image_count;
        if (next_loaded[u]) {
          next_words[u] = load_run(run_words, (run_origin + image * push.image_stride +
                                               y * push.row_stride + x * run_step) >> 2);
          next_first_vectors[u] = dst_first + run * run_vectors + image * image_gap;
        }
        advance(run, x, y, image, runs_per_row);
      }
    }
    [[unroll]] for (uint u = 0u; u < FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT; ++u) {
      if (u < kRunsInFlight && loaded[u]) {
        store_run(mirrored, first_vectors[u], vector_step, words[u]);
      }
    }
    words = next_words;
    first_vectors = next_first_vectors;
    loaded = next_loaded;
  }
}

void main() {
  if (kVectorChannels == 0u) {
    build_lut();
    element_path();
  } else {
    vector_path();
  }
}
