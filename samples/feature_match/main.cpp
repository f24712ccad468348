// feature_match: ORB features of two images matched on a ferry device, drawn as match lines.
//
// OpenCV finds ORB keypoints and their 256-bit descriptors (32 bytes, already in hamming_topk's
// bit layout: matching.hpp). hamming_topk (k = 2) finds, on the device, the two nearest
// descriptors of the second image for every descriptor of the first; Lowe's ratio test keeps the
// matches whose nearest is clearly nearer than the runner-up. The device's lists are checked
// against a brute-force search on the host, and feature_match.png shows the two images side by
// side with a line per match.
//
// With no image, the first is a photo of samples/image_ingest/images and the second a copy of it
// warped here (rotated, scaled, in perspective) by a known homography; with one image, that image
// and its warped copy. A match then agrees with the transform when the homography maps its first
// keypoint to within --tolerance pixels of its second: the share that agree (the inlier rate)
// says whether the matching is right; the picture draws every match that does not agree (red)
// and an even choice of those that do (green). With two images there is no known transform.
//
//   feature_match [--backend auto|cpu|vulkan|cuda] [--out DIR] [--features N] [--ratio R]
//                 [--tolerance PX] [--min-inlier-rate F] [--lines N] [--trace FILE]
//                 [FIRST [SECOND]]
//
// Exit status: 0 success, 1 error, a device list that differs from the host's or an inlier rate
// below --min-inlier-rate, 2 bad usage.
#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "ferry/ferry.hpp"
#include "matching.hpp"

namespace {

namespace fs = std::filesystem;
using feature_match::Codes;
using feature_match::Homography;
using feature_match::Match;
using feature_match::Point;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr std::uint32_t kNeighbours = 2;  // the nearest and the runner-up, for the ratio test
constexpr const char* kPicture = "feature_match.png";

constexpr const char* kUsage =
    "Usage: feature_match [--backend auto|cpu|vulkan|cuda] [--out DIR] [--features N]\n"
    "                     [--ratio R] [--tolerance PX] [--min-inlier-rate F] [--lines N]\n"
    "                     [--trace FILE] [FIRST [SECOND]]\n"
    "\n"
    "  FIRST, SECOND      images (PNG, JPEG, ...); without SECOND, a warped copy of FIRST with a\n"
    "                     known homography; without either, FIRST is the sample photo\n"
    "  --backend          device to run on (default auto: cuda, then vulkan, then cpu)\n"
    "  --trace            write a trace of the device's work to FILE (ui.perfetto.dev opens it)\n"
    "  --out              folder for feature_match.png (default: the current folder)\n"
    "  --features         ORB keypoints kept per image (default 1500)\n"
    "  --ratio            Lowe's ratio: keep a match when nearest < R x second nearest\n"
    "                     (default 0.8)\n"
    "  --tolerance        pixels within which a match agrees with the known homography\n"
    "                     (default 4)\n"
    "  --min-inlier-rate  fail (exit 1) when fewer matches agree with it (default 0: report)\n"
    "  --lines            matches drawn, evenly chosen, besides every one that disagrees with\n"
    "                     the known homography (default 150)\n"
    "\n"
    "Exit status: 0 success, 1 error, a device result that differs from the host's brute force\n"
    "or an inlier rate below --min-inlier-rate, 2 bad usage.\n";

struct Options {
  std::string backend = "auto";
  std::string trace;  // --trace: where to write a trace of the device's work; empty: none
  fs::path first = fs::path(FERRY_SAMPLE_IMAGES_DIR) / "coffee.png";
  std::optional<fs::path> second;  // none: a warped copy of the first
  fs::path out = ".";
  std::uint32_t features = 1500;
  double ratio = 0.8;
  double tolerance = 4.0;
  double min_inlier_rate = 0.0;
  std::uint32_t lines = 150;
};

int fail(const ferry::Status& status) {
  std::fprintf(stderr, "feature_match: %s\n", status.to_string().c_str());
  return kExitFailure;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "feature_match: %s\n\n%s", message.c_str(), kUsage);
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

std::optional<double> parse_number(std::string_view text, double min, double max) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value >= min && value <= max)) {
    return std::nullopt;
  }
  return value;
}

// The options, or the exit status to return (help or a usage error).
std::variant<Options, int> parse_args(int argc, char** argv) {
  Options options;
  std::vector<fs::path> images;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (!arg.starts_with("--")) {
      images.emplace_back(arg);
      continue;
    }
    if (i + 1 >= argc) return usage_error("missing value after " + std::string(arg));
    const std::string_view value = argv[++i];
    const auto number = [&](double min, double max) -> std::optional<double> {
      return parse_number(value, min, max);
    };
    if (arg == "--backend") {
      options.backend = value;
    } else if (arg == "--trace") {
      options.trace = value;
    } else if (arg == "--out") {
      options.out = value;
    } else if (arg == "--features") {
      const auto features = parse_count(value, 2, 1'000'000);
      if (!features) return usage_error("--features must be 2 to 1000000, got '" + std::string(value) + "'");
      options.features = *features;
    } else if (arg == "--ratio") {
      const auto ratio = number(0.01, 1.0);
      if (!ratio) return usage_error("--ratio must be 0.01 to 1, got '" + std::string(value) + "'");
      options.ratio = *ratio;
    } else if (arg == "--tolerance") {
      const auto tolerance = number(0.1, 1000.0);
      if (!tolerance) return usage_error("--tolerance must be 0.1 to 1000 pixels, got '" + std::string(value) + "'");
      options.tolerance = *tolerance;
    } else if (arg == "--lines") {
      const auto lines = parse_count(value, 0, 1'000'000);
      if (!lines) return usage_error("--lines must be 0 to 1000000, got '" + std::string(value) + "'");
      options.lines = *lines;
    } else if (arg == "--min-inlier-rate") {
      const auto rate = number(0.0, 1.0);
      if (!rate) return usage_error("--min-inlier-rate must be 0 to 1, got '" + std::string(value) + "'");
      options.min_inlier_rate = *rate;
    } else {
      return usage_error("unknown option " + std::string(arg));
    }
  }
  if (images.size() > 2) return usage_error("at most two images, got " + std::to_string(images.size()));
  if (!images.empty()) options.first = images[0];
  if (images.size() == 2) options.second = images[1];
  return options;
}

ferry::Result<cv::Mat> load_image(const fs::path& path) {
  cv::Mat image = cv::imread(path.string(), cv::IMREAD_COLOR);
  if (image.empty()) {
    return ferry::Status(ferry::ErrorCode::invalid_argument,
                         path.string() + ": not an image OpenCV can read (cv::imread failed)");
  }
  return image;
}

// Where a width x height image lands under h: the corners' smallest and largest x and y.
struct Bounds {
  double min_x, min_y, max_x, max_y;
};

Bounds warped_bounds(const Homography& h, int width, int height) {
  Bounds b{1e300, 1e300, -1e300, -1e300};
  for (const Point corner : {Point{0, 0}, Point{double(width), 0}, Point{0, double(height)},
                             Point{double(width), double(height)}}) {
    const Point p = feature_match::apply(h, corner);
    b = {std::min(b.min_x, p.x), std::min(b.min_y, p.y), std::max(b.max_x, p.x),
         std::max(b.max_y, p.y)};
  }
  return b;
}

// The test transform: rotation by 30 degrees and scale 0.75 about the image centre, a
// perspective tilt, then a shift that brings the warped image's corners to x, y >= 0.
Homography test_homography(int width, int height) {
  const double cx = width / 2.0;
  const double cy = height / 2.0;
  const double angle = 30.0 * std::numbers::pi / 180.0;
  const double scale = 0.75;
  const double c = scale * std::cos(angle);
  const double s = scale * std::sin(angle);
  const Homography to_centre = {1, 0, -cx, 0, 1, -cy, 0, 0, 1};
  const Homography rotate_scale = {c, -s, 0, s, c, 0, 0, 0, 1};
  // The right side a little nearer than the left, the bottom a little farther than the top.
  const Homography tilt = {1, 0, 0, 0, 1, 0, 0.4 / width, -0.25 / height, 1};
  const Homography h =
      feature_match::multiply(tilt, feature_match::multiply(rotate_scale, to_centre));
  const Bounds b = warped_bounds(h, width, height);
  return feature_match::multiply({1, 0, -b.min_x, 0, 1, -b.min_y, 0, 0, 1}, h);
}

// The warped copy, large enough to hold the whole warped image.
cv::Mat warp(const cv::Mat& image, const Homography& h) {
  const Bounds b = warped_bounds(h, image.cols, image.rows);
  cv::Mat warped;
  cv::warpPerspective(image, warped, cv::Matx33d(h.data()),
                      cv::Size(static_cast<int>(std::ceil(b.max_x)),
                               static_cast<int>(std::ceil(b.max_y))),
                      cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
  return warped;
}

struct Features {
  std::vector<cv::KeyPoint> keypoints;
  Codes codes;
};

ferry::Result<Features> orb_features(const cv::Mat& image, std::uint32_t count,
                                     const std::string& name) {
  cv::Mat gray;
  cv::cvtColor(image, gray, cv::COLOR_BGR2GRAY);
  // WTA_K = 2 (the default): one bit per test, so the Hamming distance is ORB's distance.
  cv::Ptr<cv::ORB> orb = cv::ORB::create(static_cast<int>(count));
  Features features;
  cv::Mat descriptors;
  orb->detectAndCompute(gray, cv::noArray(), features.keypoints, descriptors);
  if (features.keypoints.empty()) {
    return ferry::Status(ferry::ErrorCode::invalid_argument,
                         name + ": ORB found no keypoints (a blank or tiny image?)");
  }
  if (descriptors.type() != CV_8UC1 || descriptors.cols != 32) {
    return ferry::Status(ferry::ErrorCode::internal,
                         name + ": ORB descriptors are not 32 bytes of CV_8U per keypoint");
  }
  auto codes = feature_match::pack_codes(descriptors.ptr<std::uint8_t>(), descriptors.rows,
                                         descriptors.step[0], 32);
  if (!codes.ok()) return codes.status();
  features.codes = std::move(codes).value();
  return features;
}

struct TopK {
  std::vector<std::uint32_t> distances, indices;  // [queries x kNeighbours]
};

// The device search: codes up through a staging pool, hamming_topk on the compute queue, the
// lists back. Returns the lists and the milliseconds from submitting the search to its end.
ferry::Result<std::pair<TopK, double>> search_on_device(const ferry::Device& device,
                                                        const Codes& queries,
                                                        const Codes& database) {
  using namespace ferry;
  const std::uint64_t out_bytes = queries.rows * kNeighbours * sizeof(std::uint32_t);
  auto upload_pool = device.create_staging_pool({.kind = MemoryKind::host_upload});
  auto readback_pool = device.create_staging_pool({.kind = MemoryKind::host_readback});
  auto query_buffer = device.create_buffer(queries.bytes.size());
  auto database_buffer = device.create_buffer(database.bytes.size());
  auto distance_buffer = device.create_buffer(out_bytes);
  auto index_buffer = device.create_buffer(out_bytes);
  auto steps = device.create_timeline();
  for (const Status* s : {&upload_pool.status(), &readback_pool.status(), &query_buffer.status(),
                          &database_buffer.status(), &distance_buffer.status(),
                          &index_buffer.status(), &steps.status()}) {
    if (!s->ok()) return *s;
  }
  const Queue uploads = device.queue(QueueKind::upload);
  auto queries_up = upload(uploads, *upload_pool, queries.bytes, *query_buffer, 0);
  if (!queries_up.ok()) return queries_up.status();
  auto database_up = upload(uploads, *upload_pool, database.bytes, *database_buffer, 0);
  if (!database_up.ok()) return database_up.status();

  CommandList search;
  const HammingTopkParams params{.code_bits = queries.code_bits,
                                 .queries = static_cast<std::uint32_t>(queries.rows),
                                 .database_rows = database.rows,
                                 .k = kNeighbours};
  FERRY_RETURN_IF_ERROR(hamming_topk(search,
                                     {.queries = *query_buffer,
                                      .database = *database_buffer,
                                      .distances = *distance_buffer,
                                      .indices = *index_buffer},
                                     params));
  // Both uploads are done before the clock starts: it times the search alone.
  FERRY_RETURN_IF_ERROR(queries_up->wait());
  FERRY_RETURN_IF_ERROR(database_up->wait());
  const auto start = std::chrono::steady_clock::now();
  auto searched = device.queue(QueueKind::compute)
                      .submit(std::move(search), {.wait = {}, .signal = {{*steps, 1}}});
  if (!searched.ok()) return searched.status();
  FERRY_RETURN_IF_ERROR(searched->wait());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  TopK result;
  result.distances.resize(queries.rows * kNeighbours);
  result.indices.resize(queries.rows * kNeighbours);
  const Queue downloads = device.queue(QueueKind::download);
  FERRY_RETURN_IF_ERROR(download(downloads, *readback_pool, *distance_buffer, 0,
                                 std::as_writable_bytes(std::span(result.distances))));
  FERRY_RETURN_IF_ERROR(download(downloads, *readback_pool, *index_buffer, 0,
                                 std::as_writable_bytes(std::span(result.indices))));
  return std::make_pair(std::move(result), ms);
}

// The same lists by brute force on the host: every distance, the k smallest (distance, index)
// pairs, padded as hamming_topk pads them.
TopK search_on_host(const Codes& queries, const Codes& database) {
  const std::size_t words = queries.code_bits / 64;
  TopK truth;
  for (std::uint64_t q = 0; q < queries.rows; ++q) {
    std::pair<std::uint32_t, std::uint32_t> best[kNeighbours];
    std::fill(std::begin(best), std::end(best),
              std::make_pair(ferry::kHammingNoDistance, ferry::kHammingNoIndex));
    for (std::uint64_t r = 0; r < database.rows; ++r) {
      std::uint32_t distance = 0;
      for (std::size_t w = 0; w < words; ++w) {
        std::uint64_t a = 0, b = 0;
        std::memcpy(&a, queries.bytes.data() + (q * words + w) * 8, 8);
        std::memcpy(&b, database.bytes.data() + (r * words + w) * 8, 8);
        distance += static_cast<std::uint32_t>(std::popcount(a ^ b));
      }
      const std::pair<std::uint32_t, std::uint32_t> candidate{distance, static_cast<std::uint32_t>(r)};
      if (candidate < best[kNeighbours - 1]) {
        best[kNeighbours - 1] = candidate;
        std::sort(std::begin(best), std::end(best));
      }
    }
    for (const auto& [distance, index] : best) {
      truth.distances.push_back(distance);
      truth.indices.push_back(index);
    }
  }
  return truth;
}

// Every n-th of the matches `keep` selects, at most `limit` of them: the lines a picture can show.
std::vector<bool> evenly_chosen(const std::vector<bool>& keep, std::size_t limit) {
  const auto count = static_cast<std::size_t>(std::count(keep.begin(), keep.end(), true));
  const std::size_t every = count <= limit ? 1 : (count + limit - 1) / limit;
  std::vector<bool> chosen(keep.size(), false);
  for (std::size_t i = 0, seen = 0; i < keep.size(); ++i) {
    if (keep[i]) chosen[i] = seen++ % every == 0;
  }
  return chosen;
}

// Both images side by side under a caption, a line per drawn match: green when it agrees with the
// known homography, red when not (on top, so that none hides), orange when there is no known
// homography; the first image's outline as the homography maps it, in yellow.
cv::Mat draw_matches(const cv::Mat& first, const cv::Mat& second, const Features& a,
                     const Features& b, const std::vector<Match>& matches,
                     const std::vector<bool>& agrees, const std::vector<bool>& drawn,
                     const std::optional<Homography>& h, const std::vector<std::string>& caption) {
  constexpr int kGap = 10;
  constexpr int kLine = 20;
  const int top = kLine * static_cast<int>(caption.size()) + 10;
  cv::Mat canvas(top + std::max(first.rows, second.rows), first.cols + kGap + second.cols, CV_8UC3,
                 cv::Scalar(40, 40, 40));
  first.copyTo(canvas(cv::Rect(0, top, first.cols, first.rows)));
  second.copyTo(canvas(cv::Rect(first.cols + kGap, top, second.cols, second.rows)));
  const cv::Point2f left(0, static_cast<float>(top));
  const cv::Point2f right(static_cast<float>(first.cols + kGap), static_cast<float>(top));
  for (std::size_t i = 0; i < caption.size(); ++i) {
    cv::putText(canvas, caption[i], cv::Point(8, kLine * static_cast<int>(i + 1)),
                cv::FONT_HERSHEY_SIMPLEX, 0.5, cv::Scalar(235, 235, 235), 1, cv::LINE_AA);
  }
  if (h) {
    std::vector<cv::Point> outline;
    for (const Point corner : {Point{0, 0}, Point{double(first.cols), 0},
                               Point{double(first.cols), double(first.rows)},
                               Point{0, double(first.rows)}}) {
      const Point p = feature_match::apply(*h, corner);
      outline.emplace_back(cvRound(p.x + right.x), cvRound(p.y + right.y));
    }
    cv::polylines(canvas, outline, true, cv::Scalar(0, 220, 255), 1, cv::LINE_AA);
  }
  for (const bool draw_agreeing : {true, false}) {
    for (std::size_t i = 0; i < matches.size(); ++i) {
      if (!drawn[i] || (h && agrees[i] != draw_agreeing)) continue;
      const cv::Scalar color = !h ? cv::Scalar(60, 160, 255)
                               : agrees[i] ? cv::Scalar(60, 220, 60)
                                           : cv::Scalar(40, 40, 255);
      const cv::Point2f p = a.keypoints[matches[i].query].pt + left;
      const cv::Point2f q = b.keypoints[matches[i].train].pt + right;
      cv::circle(canvas, p, 2, color, 1, cv::LINE_AA);
      cv::circle(canvas, q, 2, color, 1, cv::LINE_AA);
      cv::line(canvas, p, q, color, 1, cv::LINE_AA);
    }
    if (!h) break;
  }
  return canvas;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

int run(const Options& options) {
  using namespace ferry;
  DeviceOptions device_options;
  device_options.trace_path = options.trace;
  auto device = Device::open(options.backend, 0, device_options);
  if (!device.ok()) return fail(device.status());
  const std::string device_name =
      device->info().name + " (" + std::string(to_string(device->backend())) + ")";
  std::printf("device: %s\n", device_name.c_str());

  auto first = load_image(options.first);
  if (!first.ok()) return fail(first.status());
  std::optional<Homography> h;
  cv::Mat second;
  std::string second_name;
  if (options.second) {
    auto loaded = load_image(*options.second);
    if (!loaded.ok()) return fail(loaded.status());
    second = *loaded;
    second_name = options.second->filename().string();
  } else {
    h = test_homography(first->cols, first->rows);
    second = warp(*first, *h);
    second_name = "warped copy";
  }
  const std::string first_name = options.first.filename().string();
  std::printf("images: %s %dx%d, %s %dx%d\n", first_name.c_str(), first->cols, first->rows,
              second_name.c_str(), second.cols, second.rows);

  auto a = orb_features(*first, options.features, first_name);
  if (!a.ok()) return fail(a.status());
  auto b = orb_features(second, options.features, second_name);
  if (!b.ok()) return fail(b.status());
  std::printf("ORB: %zu and %zu keypoints, %u-bit descriptors\n", a->keypoints.size(),
              b->keypoints.size(), a->codes.code_bits);

  auto searched = search_on_device(*device, a->codes, b->codes);
  if (!searched.ok()) return fail(searched.status());
  const auto& [lists, search_ms] = *searched;
  std::printf("hamming_topk: %llu queries x %llu rows, k = %u, on the device in %.3f ms\n",
              static_cast<unsigned long long>(a->codes.rows),
              static_cast<unsigned long long>(b->codes.rows), kNeighbours, search_ms);

  const TopK truth = search_on_host(a->codes, b->codes);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < truth.distances.size(); ++i) {
    differing += truth.distances[i] != lists.distances[i] || truth.indices[i] != lists.indices[i];
  }
  std::printf("check: %zu of %zu (distance, index) entries equal a brute-force search on the "
              "host\n", truth.distances.size() - differing, truth.distances.size());

  const std::vector<Match> matches = feature_match::ratio_test(lists.distances, lists.indices, options.ratio);
  std::vector<bool> agrees(matches.size(), false);
  std::size_t inliers = 0;
  if (h) {
    for (std::size_t i = 0; i < matches.size(); ++i) {
      const cv::Point2f p = a->keypoints[matches[i].query].pt;
      const cv::Point2f q = b->keypoints[matches[i].train].pt;
      const Point mapped = feature_match::apply(*h, {p.x, p.y});
      agrees[i] = std::hypot(mapped.x - q.x, mapped.y - q.y) <= options.tolerance;
      inliers += agrees[i];
    }
  }
  const double inlier_rate = matches.empty() ? 0.0 : double(inliers) / double(matches.size());
  char ratio_text[16];
  std::snprintf(ratio_text, sizeof ratio_text, "%.2f", options.ratio);
  std::string summary = std::to_string(matches.size()) + " of " + std::to_string(a->codes.rows) +
                        " keypoints pass the ratio test (nearest < " + ratio_text + " x second)";
  std::printf("matches: %s\n", summary.c_str());
  std::string agreement;
  if (h) {
    char tolerance_text[16];
    std::snprintf(tolerance_text, sizeof tolerance_text, "%g", options.tolerance);
    agreement = std::to_string(inliers) + " agree with the known homography within " +
                tolerance_text + " px: inlier rate " + percent(inlier_rate);
    std::printf("transform: %s\n", agreement.c_str());
  }

  // Lines: every match that disagrees, and an even choice of the others, at most --lines.
  std::vector<bool> others(matches.size());
  for (std::size_t i = 0; i < matches.size(); ++i) others[i] = !h || agrees[i];
  std::vector<bool> drawn = evenly_chosen(others, options.lines);
  const auto drawn_others = static_cast<std::size_t>(std::count(drawn.begin(), drawn.end(), true));
  for (std::size_t i = 0; i < matches.size(); ++i) drawn[i] = drawn[i] || !others[i];
  std::vector<std::string> caption = {
      "ferry feature_match: ORB, hamming_topk k = 2 on " + device_name,
      first_name + " -> " + second_name + ": " + summary};
  if (h) {
    caption.push_back(agreement);
    caption.push_back("lines: " + std::to_string(drawn_others) + " of the " +
                      std::to_string(inliers) + " that agree (green), all " +
                      std::to_string(matches.size() - inliers) +
                      " that do not (red); yellow: the true outline");
  } else {
    caption.push_back("lines: " + std::to_string(drawn_others) + " of the " +
                      std::to_string(matches.size()) + " matches");
  }
  const cv::Mat picture =
      draw_matches(*first, second, *a, *b, matches, agrees, drawn, h, caption);
  std::error_code error;
  fs::create_directories(options.out, error);
  if (error) {
    return fail(Status(ErrorCode::failed_precondition,
                       "--out " + options.out.string() + ": " + error.message()));
  }
  const fs::path picture_path = options.out / kPicture;
  if (!cv::imwrite(picture_path.string(), picture)) {
    return fail(Status(ErrorCode::failed_precondition,
                       "cannot write " + picture_path.string() + " (cv::imwrite failed)"));
  }
  std::printf("wrote %s\n", fs::absolute(picture_path, error).string().c_str());

  if (const std::uint64_t messages = device->validation_message_count(); messages != 0) {
    return fail(Status(ErrorCode::internal,
                       std::to_string(messages) + " validation messages (printed above)"));
  }
  if (differing != 0) {
    std::fprintf(stderr, "feature_match: %zu device entries differ from the host's brute force\n",
                 differing);
    return kExitFailure;
  }
  if (h && inlier_rate < options.min_inlier_rate) {
    std::fprintf(stderr, "feature_match: inlier rate %s is below --min-inlier-rate %s\n",
                 percent(inlier_rate).c_str(), percent(options.min_inlier_rate).c_str());
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
