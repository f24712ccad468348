// image_ingest: real images through IngressPipeline, checked and shown.
//
// Decodes the PNG/JPEG files of a folder, scales each to a common square canvas of
// (size + 32) pixels on the host and packs them into one uint8 NHWC batch. IngressPipeline uploads
// that batch `repeat` times and normalizes each copy on the device: center crop of size x size,
// mirrored, ImageNet mean/std, float32 NCHW. The first tensor is read back and de-normalized on
// the host; every pixel must equal the cropped, mirrored original exactly. contact_sheet.png shows
// each canvas (crop window outlined) next to its de-normalized device output, which appears
// mirrored, so a person can see the round trip too.
//
//   image_ingest [--backend auto|cpu|vulkan|cuda] [--images DIR] [--out DIR] [--size 224]
//                [--repeat N] [--trace FILE]
//
// Exit status: 0 success, 1 error or a pixel that did not survive the round trip, 2 bad usage.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "ferry/ferry.hpp"
#include "image_io.hpp"

namespace {

namespace fs = std::filesystem;
using image_ingest::RgbImage;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr std::uint32_t kChannels = 3;
constexpr std::uint32_t kBorder = 16;  // canvas pixels on each side of the crop window
constexpr const char* kContactSheet = "contact_sheet.png";

constexpr const char* kUsage =
    "Usage: image_ingest [--backend auto|cpu|vulkan|cuda] [--images DIR] [--out DIR]\n"
    "                    [--size 224] [--repeat N] [--trace FILE]\n"
    "\n"
    "  --backend  device to run on (default auto: cuda, then vulkan, then cpu)\n"
    "  --trace    write a trace of the device's work to FILE (ui.perfetto.dev opens it)\n"
    "  --images   folder of PNG/JPEG files (default: the sample's own images)\n"
    "  --out      folder for contact_sheet.png (default: the current folder)\n"
    "  --size     side of the normalized crop; images are scaled to size + 32 (default 224)\n"
    "  --repeat   batches streamed through the pipeline for the throughput (default 20)\n"
    "\n"
    "Exit status: 0 success, 1 error or a pixel that did not survive the round trip,\n"
    "2 bad usage.\n";

struct Options {
  std::string backend = "auto";
  std::string trace;  // --trace: where to write a trace of the device's work; empty: none
  fs::path images = FERRY_SAMPLE_IMAGES_DIR;
  fs::path out = ".";
  std::uint32_t size = 224;
  std::uint32_t repeat = 20;
};

int fail(const ferry::Status& status) {
  std::fprintf(stderr, "image_ingest: %s\n", status.to_string().c_str());
  return kExitFailure;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "image_ingest: %s\n\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

std::optional<std::uint32_t> parse_count(std::string_view text, std::uint32_t min,
                                         std::uint32_t max) {
  std::uint32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

// The options, or the exit status to return (help or a usage error).
std::variant<Options, int> parse_args(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (i + 1 >= argc) return usage_error("missing value after " + std::string(arg));
    const std::string_view value = argv[++i];
    if (arg == "--backend") {
      options.backend = value;
    } else if (arg == "--trace") {
      options.trace = value;
    } else if (arg == "--images") {
      options.images = value;
    } else if (arg == "--out") {
      options.out = value;
    } else if (arg == "--size") {
      const auto size = parse_count(value, 1, 4096);
      if (!size) return usage_error("--size must be 1 to 4096, got '" + std::string(value) + "'");
      options.size = *size;
    } else if (arg == "--repeat") {
      const auto repeat = parse_count(value, 1, 1'000'000);
      if (!repeat) {
        return usage_error("--repeat must be 1 to 1000000, got '" + std::string(value) + "'");
      }
      options.repeat = *repeat;
    } else {
      return usage_error("unknown option " + std::string(arg));
    }
  }
  return options;
}

bool is_png_or_jpeg(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg";
}

// The PNG/JPEG files of `folder`, sorted by name.
ferry::Result<std::vector<fs::path>> list_images(const fs::path& folder) {
  std::error_code error;
  if (!fs::is_directory(folder, error)) {
    return ferry::Status(ferry::ErrorCode::invalid_argument,
                         "--images " + folder.string() + ": not a folder");
  }
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error) && is_png_or_jpeg(it->path())) paths.push_back(it->path());
  }
  if (error) {
    return ferry::Status(ferry::ErrorCode::invalid_argument,
                         "--images " + folder.string() + ": " + error.message());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The device output of each image, de-normalized, and how many pixels came back exactly.
struct RoundTrip {
  std::vector<RgbImage> outputs;
  std::uint64_t exact_pixels = 0;
  std::uint64_t pixels = 0;
  double largest_difference = 0.0;  // |de-normalized - original|, in 0..255 levels
  std::string first_mismatch;       // where the first wrong pixel is, for the report
};

// tensor: float32 NCHW as params describe. Output pixel (x, y) of image n must be canvas pixel
// (crop.x + crop.width - 1 - x, crop.y + y): the crop, mirrored.
RoundTrip check_round_trip(const std::vector<float>& tensor, const std::vector<RgbImage>& canvases,
                           const ferry::NormalizeParams& params) {
  const ferry::CropWindow& crop = params.crop;
  const std::size_t plane = std::size_t{crop.width} * crop.height;
  RoundTrip result;
  for (std::size_t n = 0; n < canvases.size(); ++n) {
    const RgbImage& canvas = canvases[n];
    RgbImage output{crop.width, crop.height, std::vector<std::uint8_t>(plane * kChannels)};
    for (std::uint32_t y = 0; y < crop.height; ++y) {
      for (std::uint32_t x = 0; x < crop.width; ++x) {
        const std::size_t source_x = crop.x + (crop.width - 1 - x);
        const std::size_t source_y = crop.y + y;
        const std::uint8_t* expected =
            &canvas.pixels[(source_y * canvas.width + source_x) * kChannels];
        bool exact = true;
        for (std::uint32_t c = 0; c < kChannels; ++c) {
          const float normalized =
              tensor[(n * kChannels + c) * plane + std::size_t{y} * crop.width + x];
          // x = y * std + mean undoes the normalization; one float rounding is far below 0.5.
          const double restored = double{normalized} * params.std[c] + params.mean[c];
          const long rounded = std::isfinite(restored) ? std::lround(restored) : -1;
          const double difference = std::isfinite(restored)
                                        ? std::abs(restored - expected[c])
                                        : std::numeric_limits<double>::infinity();
          result.largest_difference = std::max(result.largest_difference, difference);
          if (rounded != expected[c] && result.first_mismatch.empty()) {
            result.first_mismatch = "image " + std::to_string(n) + " output x " +
                                    std::to_string(x) + " y " + std::to_string(y) + " channel " +
                                    std::to_string(c) + ": tensor " + std::to_string(normalized) +
                                    " -> " + std::to_string(restored) + ", original " +
                                    std::to_string(expected[c]);
          }
          exact = exact && rounded == expected[c];
          output.pixels[(std::size_t{y} * crop.width + x) * kChannels + c] =
              static_cast<std::uint8_t>(std::clamp(rounded, 0L, 255L));
        }
        result.exact_pixels += exact ? 1 : 0;
        ++result.pixels;
      }
    }
    result.outputs.push_back(std::move(output));
  }
  return result;
}

void put_pixel(RgbImage& image, long x, long y, const std::uint8_t (&rgb)[3]) {
  if (x < 0 || y < 0 || x >= long{image.width} || y >= long{image.height}) return;
  std::memcpy(&image.pixels[(static_cast<std::size_t>(y) * image.width + x) * kChannels], rgb,
              kChannels);
}

void blit(RgbImage& sheet, const RgbImage& image, std::uint32_t left, std::uint32_t top) {
  for (std::uint32_t y = 0; y < image.height; ++y) {
    std::memcpy(&sheet.pixels[((std::size_t{top} + y) * sheet.width + left) * kChannels],
                &image.pixels[std::size_t{y} * image.width * kChannels],
                std::size_t{image.width} * kChannels);
  }
}

// A title, then one row per image, each captioned: the canvas with the crop window outlined (just
// outside the window, so the cropped pixels stay visible), then the de-normalized device output
// level with the window.
RgbImage make_contact_sheet(const std::vector<RgbImage>& canvases,
                            const std::vector<std::string>& names,
                            const std::vector<RgbImage>& outputs, const ferry::CropWindow& crop,
                            const std::string& device) {
  constexpr std::uint32_t kMargin = 16;
  constexpr std::uint32_t kLine = 14;  // a caption line at scale 1
  constexpr std::uint8_t kBackground = 40;
  constexpr std::uint8_t kOutline[3] = {255, 200, 0};
  constexpr std::uint8_t kText[3] = {235, 235, 235};
  constexpr long kOutlineWidth = 2;
  const std::uint32_t canvas_side = canvases.front().width;
  const std::uint32_t title = 4 * kLine;  // three lines of text and a blank one
  const std::uint32_t row = kLine + canvas_side + kMargin;
  RgbImage sheet;
  sheet.width = kMargin + canvas_side + kMargin + crop.width + kMargin;
  sheet.height = kMargin + title + static_cast<std::uint32_t>(canvases.size()) * row;
  sheet.pixels.assign(std::size_t{sheet.width} * sheet.height * kChannels, kBackground);
  const int right_panel = static_cast<int>(kMargin + canvas_side + kMargin);
  image_ingest::draw_text(sheet, kMargin, kMargin, "ferry image_ingest: " + device, 1, kText);
  image_ingest::draw_text(sheet, kMargin, kMargin + kLine,
                          "uint8 images up, normalized on the device (crop, mirror,", 1, kText);
  image_ingest::draw_text(sheet, kMargin, kMargin + 2 * kLine,
                          "ImageNet mean/std, float32 NCHW), read back, de-normalized", 1, kText);
  for (std::size_t n = 0; n < canvases.size(); ++n) {
    const std::uint32_t caption = kMargin + title + static_cast<std::uint32_t>(n) * row;
    const std::uint32_t top = caption + kLine;
    image_ingest::draw_text(sheet, kMargin, static_cast<int>(caption),
                            "input " + names[n] + " (crop outlined)", 1, kText);
    image_ingest::draw_text(sheet, right_panel, static_cast<int>(caption),
                            "device output (mirrored)", 1, kText);
    blit(sheet, canvases[n], kMargin, top);
    blit(sheet, outputs[n], kMargin + canvas_side + kMargin, top + crop.y);
    const long left = long{kMargin} + crop.x - kOutlineWidth;
    const long right = long{kMargin} + crop.x + crop.width + kOutlineWidth - 1;
    const long upper = long{top} + crop.y - kOutlineWidth;
    const long lower = long{top} + crop.y + crop.height + kOutlineWidth - 1;
    for (long i = 0; i < kOutlineWidth; ++i) {
      for (long x = left; x <= right; ++x) {
        put_pixel(sheet, x, upper + i, kOutline);
        put_pixel(sheet, x, lower - i, kOutline);
      }
      for (long y = upper; y <= lower; ++y) {
        put_pixel(sheet, left + i, y, kOutline);
        put_pixel(sheet, right - i, y, kOutline);
      }
    }
  }
  return sheet;
}

int run(const Options& options) {
  using namespace ferry;
  const std::uint32_t canvas_side = options.size + 2 * kBorder;

  DeviceOptions device_options;
  device_options.trace_path = options.trace;
  auto device = Device::open(options.backend, 0, device_options);
  if (!device.ok()) return fail(device.status());
  std::printf("device: %s (%s)\n", device->info().name.c_str(),
              std::string(to_string(device->backend())).c_str());

  // Decode and scale on the host; a file that does not decode is skipped, not fatal.
  auto paths = list_images(options.images);
  if (!paths.ok()) return fail(paths.status());
  std::vector<RgbImage> canvases;
  std::vector<std::string> names;
  for (const fs::path& path : *paths) {
    auto image = image_ingest::load_rgb(path);
    if (!image.ok()) {
      std::fprintf(stderr, "image_ingest: skipping %s\n", image.status().message().c_str());
      continue;
    }
    auto canvas = image_ingest::resize_to_square(*image, canvas_side);
    if (!canvas.ok()) return fail(canvas.status());
    std::printf("image: %s %ux%u -> %ux%u\n", path.filename().string().c_str(), image->width,
                image->height, canvas_side, canvas_side);
    canvases.push_back(std::move(*canvas));
    names.push_back(path.filename().string());
  }
  if (canvases.empty()) {
    return fail(Status(ErrorCode::invalid_argument,
                       "--images " + options.images.string() + ": no PNG or JPEG file decoded"));
  }

  NormalizeParams params;
  params.input = {.batch = static_cast<std::uint32_t>(canvases.size()),
                  .height = canvas_side,
                  .width = canvas_side,
                  .channels = kChannels,
                  .layout = ImageLayout::nhwc,
                  .row_pitch = 0,
                  .plane_pitch = 0,
                  .image_pitch = 0};
  params.crop = {kBorder, kBorder, options.size, options.size};
  params.mirror = true;
  params.output_type = ElementType::float32;
  params.output_layout = ImageLayout::nchw;
  params.mean = {123.675, 116.28, 103.53, 0.0};  // ImageNet, in 0..255 units
  params.std = {58.395, 57.12, 57.375, 1.0};

  const std::size_t image_bytes = std::size_t{canvas_side} * canvas_side * kChannels;
  std::vector<std::byte> batch(canvases.size() * image_bytes);
  for (std::size_t n = 0; n < canvases.size(); ++n) {
    std::memcpy(batch.data() + n * image_bytes, canvases[n].pixels.data(), image_bytes);
  }

  // Pools made before the clock starts, so the throughput is the stream's alone.
  auto upload_pool = device->create_staging_pool({.kind = MemoryKind::host_upload});
  auto readback_pool = device->create_staging_pool({.kind = MemoryKind::host_readback});
  if (!upload_pool.ok()) return fail(upload_pool.status());
  if (!readback_pool.ok()) return fail(readback_pool.status());

  IngressOptions ingress;
  auto transform = normalize_transform(params);
  if (!transform.ok()) return fail(transform.status());
  ingress.transform = std::move(transform).value();
  ingress.depth = 4;  // batch 0 is held for the check until the end: 3 tensors keep flowing
  ingress.pool = *upload_pool;
  const std::span<const std::byte> batch_bytes(batch);
  const std::uint32_t repeat = options.repeat;
  // The same host batch every time: the pipeline copies it into the staging pool per batch.
  IngressSource source = [batch_bytes, repeat](std::uint64_t index)
      -> Result<std::optional<HostBatch>> {
    if (index >= repeat) return std::optional<HostBatch>();
    return std::optional<HostBatch>(HostBatch::pageable(batch_bytes));
  };

  const auto start = std::chrono::steady_clock::now();
  auto pipeline = IngressPipeline::create(*device, ingress, std::move(source));
  if (!pipeline.ok()) return fail(pipeline.status());
  IngressBatch first;
  TimelinePoint last_ready;
  std::uint64_t batches = 0;
  for (;;) {
    auto next = pipeline->next();
    if (!next.ok()) return fail(next.status());
    if (!next->has_value()) break;
    IngressBatch taken = std::move(**next);
    last_ready = taken.ready();
    ++batches;
    // No work reads the tensors here, so the others go straight back to the pipeline.
    if (taken.index() == 0) first = std::move(taken);
  }
  if (!first) return fail(Status(ErrorCode::internal, "the pipeline never delivered batch 0"));
  if (Status s = last_ready.wait(); !s.ok()) return fail(s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Check: read batch 0 back and undo the normalization on the host.
  auto resolved = resolve_normalize(params);
  if (!resolved.ok()) return fail(resolved.status());
  const NormalizeShape& shape = *resolved;
  std::vector<float> tensor(shape.elements());
  const std::span<std::byte> tensor_bytes(reinterpret_cast<std::byte*>(tensor.data()),
                                          shape.output_bytes);
  if (Status s = download(device->queue(QueueKind::download), *readback_pool, first.tensor(), 0,
                          tensor_bytes, {.wait = {first.ready()}, .signal = {}});
      !s.ok()) {
    return fail(s);
  }
  first.release();
  const RoundTrip round_trip = check_round_trip(tensor, canvases, params);

  const double batch_megabytes = static_cast<double>(shape.input_bytes) / 1e6;
  const double batch_count = static_cast<double>(batches);
  const double image_count = batch_count * static_cast<double>(canvases.size());
  std::printf("throughput: %llu batches of %zu images (%.2f MB of uint8 each) in %.3f s: "
              "%.1f batches/s, %.1f images/s, %.1f MB/s uploaded\n",
              static_cast<unsigned long long>(batches), canvases.size(), batch_megabytes, seconds,
              batch_count / seconds, image_count / seconds,
              batch_megabytes * batch_count / seconds);
  // What is compared: the device's float tensor, de-normalized on the host (x * std + mean) and
  // rounded to a 0..255 level, against the cropped, mirrored input pixel.
  std::printf("round trip: %llu of %llu pixels match the cropped, mirrored input after "
              "de-normalizing (x * std + mean) and rounding to 0..255; before rounding, the "
              "largest difference is %.2g levels (float32 rounding)\n",
              static_cast<unsigned long long>(round_trip.exact_pixels),
              static_cast<unsigned long long>(round_trip.pixels), round_trip.largest_difference);

  // The sheet is written even when the check failed: it shows what went wrong.
  std::error_code error;
  fs::create_directories(options.out, error);
  if (error) {
    return fail(Status(ErrorCode::failed_precondition,
                       "--out " + options.out.string() + ": " + error.message()));
  }
  const fs::path sheet_path = options.out / kContactSheet;
  if (Status s = image_ingest::write_png(
          sheet_path, make_contact_sheet(canvases, names, round_trip.outputs, params.crop,
                                         device->info().name + " (" +
                                             std::string(to_string(device->backend())) + ")"));
      !s.ok()) {
    return fail(s);
  }
  std::printf("wrote %s\n", fs::absolute(sheet_path, error).string().c_str());

  if (const std::uint64_t messages = device->validation_message_count(); messages != 0) {
    return fail(Status(ErrorCode::internal,
                       std::to_string(messages) + " validation messages (printed above)"));
  }
  if (round_trip.exact_pixels != round_trip.pixels) {
    std::fprintf(stderr, "image_ingest: the device output differs from the crop (first: %s)\n",
                 round_trip.first_mismatch.c_str());
    return kExitFailure;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_args(argc, argv);
  if (const int* exit_status = std::get_if<int>(&parsed)) return *exit_status;
  return run(std::get<Options>(parsed));
}
