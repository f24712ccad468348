// The ABI of normalize.comp: its push constants, shared word for word by the GLSL shader and the C++ host code
// (the shader #includes this file too), so the two layouts cannot drift apart. The C++ side
// checks with static_assert that its struct has the std430 offsets the shader uses.
//
// One dispatch covers `image_count` whole images. Its invocations walk the work items (image, row,
// run) of those images in order, a grid stride apart, where a run is the vector path's run length
// of consecutive output pixels of a row (one pixel on the element path); every byte offset is
// relative to the bound source window and every element index to the bound destination window,
// so all of them fit in 32 bits (windows are under 2^31 bytes; see
// runtime/src/vulkan/ops/normalize_plan.hpp).
#ifndef FERRY_SHADERS_NORMALIZE_ABI_H
#define FERRY_SHADERS_NORMALIZE_ABI_H

// Default of the workgroup size, a specialization constant (constant_id 0) that the device sets.
#define FERRY_NORMALIZE_DEFAULT_WORKGROUP_SIZE 256
// Specialization constant ids of the path (all 32-bit): the vector path's channel count (0: the
// element path), its run length in pixels (4 or 8), whether it stores 16-bit elements, whether
// its output is planar (nchw; always with 1 channel) rather than interleaved (nhwc), and how many
// runs an invocation loads at once (1 to 4).
#define FERRY_NORMALIZE_CHANNELS_ID 1
#define FERRY_NORMALIZE_RUN_PIXELS_ID 2
#define FERRY_NORMALIZE_STORE16_ID 3
#define FERRY_NORMALIZE_PLANAR_ID 4
#define FERRY_NORMALIZE_RUNS_IN_FLIGHT_ID 5
#define FERRY_NORMALIZE_MAX_RUNS_IN_FLIGHT 4
#define FERRY_NORMALIZE_MAX_CHANNELS 4
// Output element types, as output_type holds them.
#define FERRY_NORMALIZE_FLOAT32 0u
#define FERRY_NORMALIZE_FLOAT16 1u
#define FERRY_NORMALIZE_BFLOAT16 2u

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
inline constexpr std::uint32_t kNormalizeDefaultWorkgroupSize =
    FERRY_NORMALIZE_DEFAULT_WORKGROUP_SIZE;
inline constexpr std::uint32_t kNormalizeMaxChannels = FERRY_NORMALIZE_MAX_CHANNELS;
#define FERRY_UINT std::uint32_t
struct NormalizePushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform NormalizePushConstants {
#endif
  // Source byte of channel 0 of output pixel (image 0, row 0, x 0): with mirroring, the last pixel
  // of the crop's first row.
  FERRY_UINT src_origin;
  FERRY_UINT image_stride;    // source bytes between images (0 when one image)
  FERRY_UINT channel_stride;  // source bytes between channels of a pixel
  FERRY_UINT row_stride;      // source bytes between rows
  // Source bytes from output pixel x to x + 1: the pixel stride, or its negation modulo 2^32
  // when mirrored (the 32-bit sums wrap back into the window).
  FERRY_UINT pixel_step;
  FERRY_UINT width;        // output pixels per row (crop width)
  FERRY_UINT height;       // rows per image (crop height)
  FERRY_UINT image_count;  // images in this dispatch
  FERRY_UINT channels;     // 1 to FERRY_NORMALIZE_MAX_CHANNELS
  FERRY_UINT output_type;  // FERRY_NORMALIZE_FLOAT32 / FLOAT16 / BFLOAT16
  // Output element (image n, channel c) of linear pixel p = (n * height + row) * width + x of the
  // dispatch is dst_origin + p * pixel_elements + n * image_gap + c * channel_elements:
  //   nchw: pixel_elements 1, image_gap (channels - 1) * height * width, channel_elements
  //         height * width;
  //   nhwc: pixel_elements channels, image_gap 0, channel_elements 1.
  FERRY_UINT dst_origin;
  FERRY_UINT pixel_elements;
  FERRY_UINT image_gap;
  FERRY_UINT channel_elements;
  // The grid stride (invocations in the dispatch) as images, rows and runs: with
  // runs_per_row = width / run length, stride =
  // (step_images * height + step_rows) * runs_per_row + step_x, with step_rows < height and
  // step_x < runs_per_row, so invocations advance without dividing.
  FERRY_UINT step_x;
  FERRY_UINT step_rows;
  FERRY_UINT step_images;
  // Per channel: float bits of scale[c] and bias[c].
  FERRY_UINT scale_bits[FERRY_NORMALIZE_MAX_CHANNELS];
  FERRY_UINT bias_bits[FERRY_NORMALIZE_MAX_CHANNELS];
#ifdef __cplusplus
};
#undef FERRY_UINT
// std430 offsets of the block above, as the SPIR-V declares them.
static_assert(sizeof(NormalizePushConstants) == 100);
static_assert(offsetof(NormalizePushConstants, src_origin) == 0);
static_assert(offsetof(NormalizePushConstants, image_stride) == 4);
static_assert(offsetof(NormalizePushConstants, channel_stride) == 8);
static_assert(offsetof(NormalizePushConstants, row_stride) == 12);
static_assert(offsetof(NormalizePushConstants, pixel_step) == 16);
static_assert(offsetof(NormalizePushConstants, width) == 20);
static_assert(offsetof(NormalizePushConstants, height) == 24);
static_assert(offsetof(NormalizePushConstants, image_count) == 28);
static_assert(offsetof(NormalizePushConstants, channels) == 32);
static_assert(offsetof(NormalizePushConstants, output_type) == 36);
static_assert(offsetof(NormalizePushConstants, dst_origin) == 40);
static_assert(offsetof(NormalizePushConstants, pixel_elements) == 44);
static_assert(offsetof(NormalizePushConstants, image_gap) == 48);
static_assert(offsetof(NormalizePushConstants, channel_elements) == 52);
static_assert(offsetof(NormalizePushConstants, step_x) == 56);
static_assert(offsetof(NormalizePushConstants, step_rows) == 60);
static_assert(offsetof(NormalizePushConstants, step_images) == 64);
static_assert(offsetof(NormalizePushConstants, scale_bits) == 68);
static_assert(offsetof(NormalizePushConstants, bias_bits) == 84);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_NORMALIZE_ABI_H
