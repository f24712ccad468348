#include "image_io.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

// Declarations only; stb_impl.cpp holds the implementations.
#include <stb_image.h>
#include <stb_image_resize.h>
#include <stb_image_write.h>
// Header-only, static functions: tiny text as axis-aligned quads, enough to caption a picture.
#include <stb_easy_font.h>

namespace image_ingest {

using ferry::ErrorCode;
using ferry::Status;

namespace {

constexpr int kRgb = 3;

}  // namespace

ferry::Result<RgbImage> load_rgb(const std::filesystem::path& path) {
  int width = 0;
  int height = 0;
  int channels_in_file = 0;
  unsigned char* decoded = stbi_load(path.c_str(), &width, &height, &channels_in_file, kRgb);
  if (decoded == nullptr) {
    const char* reason = stbi_failure_reason();
    return Status(ErrorCode::invalid_argument,
                  path.string() + ": not a PNG or JPEG that stb_image decodes (" +
                      (reason != nullptr ? reason : "no reason given") + ")");
  }
  RgbImage image;
  image.width = static_cast<std::uint32_t>(width);
  image.height = static_cast<std::uint32_t>(height);
  const std::size_t bytes = std::size_t{image.width} * image.height * kRgb;
  image.pixels.assign(decoded, decoded + bytes);
  stbi_image_free(decoded);
  return image;
}

ferry::Result<RgbImage> resize_to_square(const RgbImage& image, std::uint32_t side) {
  if (image.width == 0 || image.height == 0 || side == 0) {
    return Status(ErrorCode::invalid_argument,
                  "resize_to_square: empty image (" + std::to_string(image.width) + "x" +
                      std::to_string(image.height) + ") or side " + std::to_string(side));
  }
  const double scale = static_cast<double>(side) / std::min(image.width, image.height);
  const auto scaled_width =
      std::max(side, static_cast<std::uint32_t>(std::lround(image.width * scale)));
  const auto scaled_height =
      std::max(side, static_cast<std::uint32_t>(std::lround(image.height * scale)));
  std::vector<std::uint8_t> scaled(std::size_t{scaled_width} * scaled_height * kRgb);
  if (stbir_resize_uint8(image.pixels.data(), static_cast<int>(image.width),
                         static_cast<int>(image.height), 0, scaled.data(),
                         static_cast<int>(scaled_width), static_cast<int>(scaled_height), 0,
                         kRgb) == 0) {
    return Status(ErrorCode::out_of_memory,
                  "stbir_resize_uint8 " + std::to_string(image.width) + "x" +
                      std::to_string(image.height) + " -> " + std::to_string(scaled_width) + "x" +
                      std::to_string(scaled_height) + " failed");
  }

  RgbImage square;
  square.width = side;
  square.height = side;
  square.pixels.resize(std::size_t{side} * side * kRgb);
  const std::size_t left = (scaled_width - side) / 2;
  const std::size_t top = (scaled_height - side) / 2;
  const std::size_t row_bytes = std::size_t{side} * kRgb;
  for (std::size_t row = 0; row < side; ++row) {
    const std::uint8_t* from = scaled.data() + ((top + row) * scaled_width + left) * kRgb;
    std::copy(from, from + row_bytes, square.pixels.data() + row * row_bytes);
  }
  return square;
}

Status write_png(const std::filesystem::path& path, const RgbImage& image) {
  if (stbi_write_png(path.c_str(), static_cast<int>(image.width), static_cast<int>(image.height),
                     kRgb, image.pixels.data(), static_cast<int>(image.width) * kRgb) == 0) {
    return Status(ErrorCode::failed_precondition,
                  "cannot write " + path.string() + " (stbi_write_png failed; is the folder "
                                                    "writable?)");
  }
  return Status();
}

void draw_text(RgbImage& image, int x, int y, const std::string& text, int scale,
               const std::uint8_t (&rgb)[3]) {
  // stb_easy_font writes 4 vertices of 16 bytes (x, y, z as floats, 4 color bytes) per quad.
  struct Vertex {
    float x, y, z;
    unsigned char color[4];
  };
  std::vector<Vertex> vertices(text.size() * 4 * 40 + 4);  // at most ~40 quads a character
  std::vector<char> chars(text.begin(), text.end());
  chars.push_back('\0');
  const int quads = stb_easy_font_print(0, 0, chars.data(), nullptr, vertices.data(),
                                        static_cast<int>(vertices.size() * sizeof(Vertex)));
  for (int q = 0; q < quads; ++q) {
    const Vertex& a = vertices[static_cast<std::size_t>(q) * 4];
    const Vertex& c = vertices[static_cast<std::size_t>(q) * 4 + 2];
    const int left = x + static_cast<int>(a.x) * scale;
    const int top = y + static_cast<int>(a.y) * scale;
    const int right = x + static_cast<int>(c.x) * scale;
    const int bottom = y + static_cast<int>(c.y) * scale;
    for (int py = std::max(top, 0); py < std::min(bottom, static_cast<int>(image.height)); ++py) {
      for (int px = std::max(left, 0); px < std::min(right, static_cast<int>(image.width)); ++px) {
        std::memcpy(&image.pixels[(static_cast<std::size_t>(py) * image.width + px) * kRgb], rgb,
                    kRgb);
      }
    }
  }
}

}  // namespace image_ingest
