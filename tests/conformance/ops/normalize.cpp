// The normalize op: every backend must agree bit for bit with the truth of normalize_truth.hpp,
// computed element by element straight from the definition, independently of the library.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "device_io.hpp"
#include "harness.hpp"
#include "normalize_truth.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ElementType;
using ferry::ImageLayout;
using ferry::NormalizeParams;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;
using ferry_test::describe;
using ferry_test::expected_output;

namespace {

// ---- running one case --------------------------------------------------------------------

struct Case {
  NormalizeParams params;
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
};

// Runs the cases in one submission on `device` (t.device when null), each into its own output
// buffer with guard bytes around it, and checks each against the truth.
void run_and_check(BackendUnderTest& t, const std::vector<Case>& cases,
                   ferry::Device* other_device = nullptr) {
  ferry::Device& device = other_device != nullptr ? *other_device : t.device;
  struct Prepared {
    Buffer src;
    Buffer dst;
    std::vector<std::byte> input;
    std::uint64_t out_bytes = 0;
  };
  constexpr std::uint64_t kGuard = 24;
  std::vector<Prepared> prepared;
  CommandList commands;
  for (const Case& c : cases) {
    INFO(describe(c.params, c.src_offset, c.dst_offset));
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(c.params));
    Prepared p;
    p.input = ferry_test::random_bytes(t.rng, c.src_offset + shape.input_bytes + 5);
    p.out_bytes = shape.output_bytes;
    p.src = REQUIRE_VALUE(ferry_test::device_buffer_with(device, p.input));
    p.dst = REQUIRE_VALUE(ferry_test::device_buffer_with(
        device, ferry_test::poison_bytes(c.dst_offset + shape.output_bytes + kGuard, 3)));
    REQUIRE_OK(ferry::normalize(commands, p.src, c.src_offset, p.dst, c.dst_offset, c.params));
    prepared.push_back(std::move(p));
  }
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(describe(c.params, c.src_offset, c.dst_offset));
    const Prepared& p = prepared[i];
    std::vector<std::byte> expected = ferry_test::poison_bytes(c.dst_offset + p.out_bytes + kGuard, 3);
    const std::vector<std::byte> values = expected_output(
        c.params, std::span<const std::byte>(p.input).subspan(c.src_offset));
    std::copy(values.begin(), values.end(), expected.begin() + static_cast<std::ptrdiff_t>(c.dst_offset));
    const auto actual = REQUIRE_VALUE(ferry_test::read_bytes(device, p.dst, 0, expected.size()));
    ferry_test::check_bytes_equal(actual, expected, "normalize output (with guard bytes)");
  }
}

// Sets an environment variable for the life of the object, then restores it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Bytes of one image of `in`, from its first to one past its last byte.
std::uint64_t one_image_bytes(const ferry::ImageBatchLayout& in) {
  ferry::ImageBatchLayout one = in;
  one.batch = 1;
  one.image_pitch = 0;
  return one.span_bytes();
}

double random_real(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

// A random case of small, awkward shape.
Case random_case(std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return static_cast<std::uint32_t>(ferry_test::uniform(rng, lo, hi));
  };
  Case c;
  NormalizeParams& p = c.params;
  p.input.batch = pick(1, 3);
  p.input.height = pick(1, 23);
  p.input.width = pick(1, 41);
  p.input.channels = pick(1, 4);
  p.input.layout = pick(0, 1) ? ImageLayout::nchw : ImageLayout::nhwc;
  const bool planar = p.input.layout == ImageLayout::nchw;
  const std::uint64_t row = std::uint64_t{p.input.width} * (planar ? 1 : p.input.channels);
  if (pick(0, 1)) p.input.row_pitch = row + pick(0, 9);
  const std::uint64_t row_pitch = p.input.row_pitch ? p.input.row_pitch : row;
  if (planar && pick(0, 1)) p.input.plane_pitch = row_pitch * p.input.height + pick(0, 17);
  if (pick(0, 1)) {
    p.input.image_pitch = one_image_bytes(p.input) + pick(0, 31);
  }
  // Crops: none, or a window that often touches an edge.
  if (pick(0, 3) != 0) {
    p.crop.x = pick(0, 2) == 0 ? 0 : pick(0, p.input.width - 1);
    p.crop.y = pick(0, 2) == 0 ? 0 : pick(0, p.input.height - 1);
    const std::uint32_t max_w = p.input.width - p.crop.x;
    const std::uint32_t max_h = p.input.height - p.crop.y;
    p.crop.width = pick(0, 1) ? max_w : pick(1, max_w);
    p.crop.height = pick(0, 1) ? max_h : pick(1, max_h);
  }
  p.mirror = pick(0, 1) != 0;
  p.output_type = static_cast<ElementType>(pick(0, 2));
  p.output_layout = pick(0, 1) ? ImageLayout::nchw : ImageLayout::nhwc;
  for (std::uint32_t ch = 0; ch < 4; ++ch) {
    p.mean[ch] = random_real(rng, -300.0, 300.0);
    p.std[ch] = random_real(rng, 0.01, 300.0) * (pick(0, 7) == 0 ? -1.0 : 1.0);
  }
  c.src_offset = pick(0, 40);
  c.dst_offset = pick(0, 10) * ferry::element_size(p.output_type);
  return c;
}

}  // namespace

TEST_CASE("normalize: random shapes, layouts, crops, mirror and output types match the truth") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    for (int round = 0; round < 4; ++round) {
      std::vector<Case> cases;
      for (int i = 0; i < 12; ++i) cases.push_back(random_case(t.rng));
      run_and_check(t, cases);
    }
  });
}

TEST_CASE("normalize: packed interleaved input, aligned for word runs or not, matches the truth") {
  // Interleaved, tightly packed input whose rows start on 4-byte boundaries, with widths that are
  // multiples of 4 or 8, goes through whole-word loads and 8- or 16-byte stores on Vulkan; each
  // placement here either keeps everything aligned for that or breaks one alignment. Every
  // channel count, both output layouts, 32- and 16-bit outputs, mirrored or not.
  struct Placement {
    const char* what;
    std::uint32_t width = 16;
    std::uint64_t src_offset = 0;
    std::uint64_t row_padding = 0;    // bytes after each row
    std::uint64_t image_padding = 0;  // bytes after each image
    std::uint32_t crop_x = 0;         // crop of the whole height from crop_x, crop_width wide
    std::uint32_t crop_width = 0;     // 0: no crop
    std::uint32_t dst_elements = 0;   // destination offset in elements
  };
  const Placement placements[] = {
      {"aligned, runs of 8", 16},
      {"aligned, width a multiple of 4 only", 12},
      {"aligned offsets and padding", 24, 8, 4, 12, 0, 0, 8},
      {"destination 4 elements in", 16, 0, 0, 0, 0, 0, 4},
      {"cropped by 8 columns", 24, 4, 0, 0, 8, 16},
      {"odd source offset", 16, 3},
      {"row padding 2", 16, 0, 2},
      {"image padding 1", 16, 0, 0, 1},
      {"width 14", 14},
      {"destination 2 elements in", 16, 0, 0, 0, 0, 0, 2},
  };
  ferry_test::for_each_backend({"normalize"}, [&](BackendUnderTest& t) {
    std::vector<Case> cases;
    for (const Placement& placement : placements) {
      for (std::uint32_t channels = 1; channels <= 4; ++channels) {
        for (ImageLayout layout : {ImageLayout::nchw, ImageLayout::nhwc}) {
          if (channels == 1 && layout == ImageLayout::nhwc) continue;  // the same as nchw
          // bfloat16 stores as float16 does (the types differ only in the lookup table).
          for (ElementType type : {ElementType::float32, ElementType::float16}) {
            for (bool mirror : {false, true}) {
              Case c;
              NormalizeParams& p = c.params;
              p.input = {3, 5, placement.width, channels, ImageLayout::nhwc};
              const std::uint64_t row = std::uint64_t{placement.width} * channels;
              if (placement.row_padding != 0) p.input.row_pitch = row + placement.row_padding;
              if (placement.image_padding != 0) {
                p.input.image_pitch = (row + placement.row_padding) * 5 + placement.image_padding;
              }
              if (placement.crop_width != 0) {
                p.crop = {placement.crop_x, 0, placement.crop_width, 5};
              }
              p.mirror = mirror;
              p.output_type = type;
              p.output_layout = layout;
              for (std::uint32_t ch = 0; ch < 4; ++ch) {
                p.mean[ch] = random_real(t.rng, -300.0, 300.0);
                p.std[ch] = random_real(t.rng, 0.01, 300.0);
              }
              c.src_offset = placement.src_offset;
              c.dst_offset = std::uint64_t{placement.dst_elements} * ferry::element_size(type);
              cases.push_back(c);
            }
          }
        }
      }
    }
    run_and_check(t, cases);
  });
}

TEST_CASE("normalize: a grid far smaller than the work, invocations looping, matches the truth") {
  ferry_test::for_each_backend({"normalize"}, [&](BackendUnderTest& t) {
    // A Vulkan device with 3 workgroups of 32 invocations on either path, each loading up to 48
    // source bytes ahead (the CPU backend ignores the variable): every invocation walks many work
    // items, in several batches of 1 to 4 runs on the vector path, the last batch partly past the
    // end.
    std::optional<ferry::Device> small_grid;
    {
      const ScopedEnvironment grid(
          "FERRY_VULKAN_NORMALIZE_GRID",
          "workgroup=32,groups=3,element_workgroup=32,element_groups=3,in_flight=48");
      small_grid = REQUIRE_VALUE(t.open_another());
    }
    struct Shape {
      std::uint32_t channels;
      ElementType type;
      ImageLayout layout;
    };
    // Runs in flight: 4, 4, 3, 4, 2 and 1 (48 source bytes over runs of 4 (float32) or 8 (16-bit)
    // pixels of `channels` bytes, at most 4).
    const Shape shapes[] = {
        {1, ElementType::float32, ImageLayout::nchw}, {3, ElementType::float32, ImageLayout::nchw},
        {4, ElementType::float32, ImageLayout::nhwc}, {1, ElementType::float16, ImageLayout::nchw},
        {3, ElementType::float16, ImageLayout::nhwc}, {4, ElementType::float16, ImageLayout::nchw},
    };
    std::vector<Case> cases;
    for (const Shape& shape : shapes) {
      for (bool packed : {true, false}) {
        for (bool mirror : {false, true}) {
          Case c;
          NormalizeParams& p = c.params;
          // Packed: the vector path. Not: a row padding of 1 takes the element path.
          p.input = {2, 11, 96, shape.channels, ImageLayout::nhwc};
          if (!packed) p.input.row_pitch = 96 * shape.channels + 1;
          p.mirror = mirror;
          p.output_type = shape.type;
          p.output_layout = shape.layout;
          for (std::uint32_t ch = 0; ch < 4; ++ch) {
            p.mean[ch] = random_real(t.rng, -300.0, 300.0);
            p.std[ch] = random_real(t.rng, 0.01, 300.0);
          }
          cases.push_back(c);
        }
      }
    }
    run_and_check(t, cases, &*small_grid);
  });
}

TEST_CASE("normalize: every byte value with extreme factors (overflow, subnormals, exact zeros)") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    // One row of 256 pixels x 4 channels holding every byte value in every channel.
    auto base = [] {
      NormalizeParams p;
      p.input = {1, 1, 256, 4, ImageLayout::nhwc};
      return p;
    };
    std::vector<std::array<double, 8>> factor_sets = {
        // mean x4, std x4
        {0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 3.0, 0.1},           // bias -0.0 and +0.0, exact results
        {128.0, 64.0, 255.0, 1.0, 1.0, 64.0, 255.0, 1.0},     // exact zeros inside the range
        {0.485 * 255, 0.456 * 255, 0.406 * 255, 0.5 * 255,    // the ImageNet constants
         0.229 * 255, 0.224 * 255, 0.225 * 255, 0.25 * 255},
        {0.0, 1.0, 1e-3, -7.0, 1e-3, 1e-2, 3e-3, 7e-3},       // float16 overflow to infinity
        {0.0, 5.0, -3.0, 100.0, 1e7, 3e8, 1e6, 7e9},          // float16 subnormals and zeros
        {1e30, -1e30, 1e-30, 0.0, 1e-8, 1e-7, 1e-38, 1e36},   // huge and tiny factors
        {100.5, 99.25, 17.125, 200.0, 0.3, 0.7, 1.1, 1.9},    // many near-cancellations
        {-1e-45, 1e-40, 3e-39, 2.0, 1e-30, 1e-35, 1e-3, 3.0}, // subnormal float results
    };
    // Plus random ones with widely spread magnitudes (a fused and an unfused multiply-add differ
    // on a good share of these).
    for (int i = 0; i < 6; ++i) {
      std::array<double, 8> f{};
      for (int k = 0; k < 4; ++k) {
        f[k] = std::ldexp(random_real(t.rng, -1.0, 1.0), static_cast<int>(ferry_test::uniform(t.rng, 0, 40)) - 20);
        f[4 + k] = std::ldexp(random_real(t.rng, 0.5, 1.0), static_cast<int>(ferry_test::uniform(t.rng, 0, 40)) - 20);
      }
      factor_sets.push_back(f);
    }
    std::vector<std::byte> input(1024);
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::byte>(i / 4);
    const Buffer src = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, input));
    for (const auto& f : factor_sets) {
      for (ElementType type : {ElementType::float32, ElementType::float16, ElementType::bfloat16}) {
        NormalizeParams p = base();
        for (int k = 0; k < 4; ++k) {
          p.mean[k] = f[k];
          p.std[k] = f[4 + k];
        }
        p.output_type = type;
        INFO(describe(p, 0, 0));
        const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(p));
        const Buffer dst = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes));
        CommandList commands;
        REQUIRE_OK(ferry::normalize(commands, src, 0, dst, 0, p));
        REQUIRE_OK(REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)))
                       .wait(ferry_test::kLongWait));
        const auto actual = REQUIRE_VALUE(ferry_test::read_bytes(t.device, dst, 0, shape.output_bytes));
        ferry_test::check_bytes_equal(actual, expected_output(p, input), "every byte value");
      }
    }
  });
}

TEST_CASE("normalize: reads straight from host memory, and chains with copies in one submission") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    NormalizeParams p;
    p.input = {2, 37, 53, 3, ImageLayout::nhwc};
    p.crop = {3, 0, 50, 37};
    p.mirror = true;
    p.mean = {123.675, 116.28, 103.53, 0};
    p.std = {58.395, 57.12, 57.375, 1};
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(p));
    ferry::StagingPool upload_pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    ferry::StagingPool readback_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(ferry::MemoryKind::host_readback)));
    ferry::Lease staged = REQUIRE_VALUE(upload_pool.acquire(shape.input_bytes));
    ferry_test::fill_random(t.rng, staged.data());
    const std::vector<std::byte> input(staged.data().begin(), staged.data().end());
    const std::vector<std::byte> expected = expected_output(p, input);

    // 1. The kernel reads the pinned lease directly and writes device memory.
    const Buffer direct = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes));
    // 2. Upload into device memory, normalize, download: one submission, in order.
    const Buffer device_input = REQUIRE_VALUE(t.device.create_buffer(shape.input_bytes));
    const Buffer device_output = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes));
    ferry::Lease result = REQUIRE_VALUE(readback_pool.acquire(shape.output_bytes));
    CommandList commands;
    REQUIRE_OK(ferry::normalize(commands, staged, 0, direct, 0, p));
    REQUIRE_OK(commands.copy(staged, 0, device_input, 0, shape.input_bytes));
    REQUIRE_OK(ferry::normalize(commands, device_input, 0, device_output, 0, p));
    REQUIRE_OK(commands.copy(device_output, 0, result, 0, shape.output_bytes));
    REQUIRE_OK(REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)))
                   .wait(ferry_test::kLongWait));
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, direct, 0, shape.output_bytes)), expected,
        "normalize reading the host lease");
    ferry_test::check_bytes_equal(result.data(), expected, "upload, normalize, download");
  });
}

TEST_CASE("normalize: bad parameters are clear errors and record nothing") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    NormalizeParams good;
    good.input = {2, 8, 10, 3, ImageLayout::nhwc};
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(good));
    const Buffer src = REQUIRE_VALUE(t.device.create_buffer(shape.input_bytes));
    const Buffer dst = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes));
    auto check = [&](const NormalizeParams& p, ferry::ErrorCode code, const char* what,
                     std::uint64_t src_offset = 0, std::uint64_t dst_offset = 0,
                     const Buffer* dst_buffer = nullptr) {
      INFO(what);
      CommandList commands;
      const ferry::Status status =
          ferry::normalize(commands, src, src_offset, dst_buffer ? *dst_buffer : dst, dst_offset, p);
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK(!status.message().empty());
      CHECK(commands.empty());
    };
    using ferry::ErrorCode;
    {
      CommandList commands;
      CHECK_OK(ferry::normalize(commands, src, 0, dst, 0, good));  // the baseline is accepted
    }
    NormalizeParams p = good;
    p.std[1] = 0.0;
    check(p, ErrorCode::invalid_argument, "std zero");
    p = good;
    p.std[2] = std::numeric_limits<double>::quiet_NaN();
    check(p, ErrorCode::invalid_argument, "std NaN");
    p = good;
    p.std[0] = std::numeric_limits<double>::infinity();
    check(p, ErrorCode::invalid_argument, "std infinite");
    p = good;
    p.mean[0] = std::numeric_limits<double>::infinity();
    check(p, ErrorCode::invalid_argument, "mean infinite");
    p = good;
    p.std[0] = 1e-300;
    check(p, ErrorCode::invalid_argument, "1/std overflows float");
    p = good;
    p.input.channels = 5;
    check(p, ErrorCode::invalid_argument, "5 channels");
    p.input.channels = 0;
    check(p, ErrorCode::invalid_argument, "0 channels");
    p = good;
    p.input.width = 0;
    check(p, ErrorCode::invalid_argument, "zero width");
    p = good;
    p.crop = {8, 0, 3, 0};
    check(p, ErrorCode::out_of_range, "crop past the right edge");
    p.crop = {0, 8, 0, 0};
    check(p, ErrorCode::out_of_range, "crop starting below the image");
    p.crop = {0, 2, 0, 7};
    check(p, ErrorCode::out_of_range, "crop past the bottom");
    p = good;
    p.input.row_pitch = 29;
    check(p, ErrorCode::invalid_argument, "row pitch smaller than a row");
    p = good;
    p.input.plane_pitch = 100;
    check(p, ErrorCode::invalid_argument, "plane pitch on interleaved input");
    p = good;
    p.input.image_pitch = 100;
    check(p, ErrorCode::invalid_argument, "image pitch smaller than an image");
    p = good;
    p.output_type = static_cast<ElementType>(7);
    check(p, ErrorCode::invalid_argument, "unknown output type");
    check(good, ErrorCode::out_of_range, "output buffer too small", 0, 4);
    check(good, ErrorCode::out_of_range, "input past the end of the source", 1);
    p = good;
    p.output_type = ElementType::float16;
    check(p, ErrorCode::invalid_argument, "misaligned float16 destination", 0, 1);
    const Buffer small = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes - 1));
    check(good, ErrorCode::out_of_range, "destination one byte short", 0, 0, &small);
    {
      // Source and destination overlapping in one buffer.
      const Buffer both =
          REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes + shape.input_bytes));
      CommandList commands;
      CHECK_ERROR(ferry::normalize(commands, both, 0, both, 100, good), ErrorCode::invalid_argument);
      CHECK(commands.empty());
      CHECK_OK(ferry::normalize(commands, both, shape.output_bytes, both, 0, good));  // disjoint: fine
    }
  });
}
