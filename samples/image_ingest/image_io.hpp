// Image files for the image_ingest sample: PNG/JPEG decoding, scaling and PNG writing (stb).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace image_ingest {

// 8-bit RGB, rows tightly packed (width * 3 bytes), top row first.
struct RgbImage {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::vector<std::uint8_t> pixels;
};

// Decodes a PNG or JPEG file to RGB (gray is expanded, alpha dropped, 16 bits reduced to 8).
ferry::Result<RgbImage> load_rgb(const std::filesystem::path& path);

// Scales the image so its shorter side is `side` (aspect ratio kept), then cuts out the centered
// side x side square: every image of a batch gets the same canvas without being distorted.
ferry::Result<RgbImage> resize_to_square(const RgbImage& image, std::uint32_t side);

ferry::Status write_png(const std::filesystem::path& path, const RgbImage& image);

// Draws `text` (ASCII) with its top-left corner at (x, y), each font pixel `scale` x `scale`
// image pixels, clipped to the image (stb_easy_font: about 6 x 12 font pixels a character).
void draw_text(RgbImage& image, int x, int y, const std::string& text, int scale,
               const std::uint8_t (&rgb)[3]);

}  // namespace image_ingest
