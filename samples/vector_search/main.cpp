// vector_search: binary-quantized retrieval with ferry::BinaryIndex, and what it costs in recall.
//
// Generates clustered embeddings (a Gaussian mixture with anisotropic clusters: each cluster
// varies mostly along 16 directions of its own, as embeddings of one topic do, plus a small
// per-dimension spread of its own; all around a common offset, so that the sign of a raw
// coordinate says little until the data's mean is subtracted), builds a
// cosine BinaryIndex that keeps the vectors for rescoring (mean thresholds from the first add),
// searches held-out queries from the same mixture, and prints recall@10 against an exact float
// search on the host for the binary search alone and with rescoring of 2x, 4x and 10x
// oversampled lists, with the time of each search.
//
//   vector_search [--backend auto|cpu|vulkan|cuda] [--rows N] [--queries Q] [--dims D[,D...]]
//                 [--clusters C] [--keep float32|int8] [--device-mib M] [--seed S]
//                 [--trace FILE]
//
// Exit status: 0 success, 1 error, 2 bad usage.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr std::uint32_t kRecallAt = 10;
constexpr std::uint32_t kStrongDirections = 16;  // per cluster

constexpr const char* kUsage =
    "Usage: vector_search [--backend auto|cpu|vulkan|cuda] [--rows N] [--queries Q]\n"
    "                     [--dims D[,D...]] [--clusters C] [--keep float32|int8]\n"
    "                     [--device-mib M] [--seed S] [--trace FILE]\n"
    "\n"
    "  --backend     device to run on (default auto: cuda, then vulkan, then cpu)\n"
    "  --trace       write a trace of the device's work to FILE (ui.perfetto.dev opens it)\n"
    "  --rows        database vectors (default 100000)\n"
    "  --queries     query vectors, one search batch (default 1000)\n"
    "  --dims        embedding sizes, each its own run (default 384,1024)\n"
    "  --clusters    mixture components (default 64)\n"
    "  --keep        vectors kept for rescoring (default float32)\n"
    "  --device-mib  device memory for codes and for vectors, each; the rest stays in host\n"
    "                memory and is streamed (codes) or read in place (vectors) (default: all)\n"
    "  --seed        random seed (default 1)\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 bad usage.\n";

struct Options {
  std::string backend = "auto";
  std::string trace;  // --trace: where to write a trace of the device's work; empty: none
  std::uint32_t rows = 100'000;
  std::uint32_t queries = 1000;
  std::vector<std::uint32_t> dims = {384, 1024};
  std::uint32_t clusters = 64;
  ferry::KeptVectors keep = ferry::KeptVectors::float32;
  std::optional<std::uint32_t> device_mib;
  std::uint32_t seed = 1;
};

int fail(const ferry::Status& status) {
  std::fprintf(stderr, "vector_search: %s\n", status.to_string().c_str());
  return kExitFailure;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "vector_search: %s\n\n%s", message.c_str(), kUsage);
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
    auto count = [&](std::uint32_t min, std::uint32_t max) -> std::optional<std::uint32_t> {
      return parse_count(value, min, max);
    };
    auto bad = [&](const std::string& range) {
      return usage_error(std::string(arg) + " must be " + range + ", got '" + std::string(value) + "'");
    };
    if (arg == "--backend") {
      options.backend = value;
    } else if (arg == "--trace") {
      options.trace = value;
    } else if (arg == "--rows") {
      const auto n = count(kRecallAt, 100'000'000);
      if (!n) return bad("10 to 100000000");
      options.rows = *n;
    } else if (arg == "--queries") {
      const auto n = count(1, 100'000);
      if (!n) return bad("1 to 100000");
      options.queries = *n;
    } else if (arg == "--clusters") {
      const auto n = count(1, 100'000);
      if (!n) return bad("1 to 100000");
      options.clusters = *n;
    } else if (arg == "--seed") {
      const auto n = count(0, 0xFFFFFFFFu);
      if (!n) return bad("a 32-bit number");
      options.seed = *n;
    } else if (arg == "--device-mib") {
      const auto n = count(0, 1u << 20);
      if (!n) return bad("0 to 1048576");
      options.device_mib = *n;
    } else if (arg == "--keep") {
      if (value == "float32") {
        options.keep = ferry::KeptVectors::float32;
      } else if (value == "int8") {
        options.keep = ferry::KeptVectors::int8;
      } else {
        return bad("float32 or int8");
      }
    } else if (arg == "--dims") {
      options.dims.clear();
      for (std::size_t at = 0; at <= value.size();) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        const auto d = parse_count(value.substr(at, comma - at), 1, ferry::kBinaryIndexMaxDims);
        if (!d) return bad("a list of 1 to " + std::to_string(ferry::kBinaryIndexMaxDims));
        options.dims.push_back(*d);
        at = comma + 1;
      }
    } else {
      return usage_error("unknown option " + std::string(arg));
    }
  }
  return options;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- data ----------------------------------------------------------------------------------

struct Cluster {
  std::vector<float> center;
  std::vector<float> spread;                   // per-dimension standard deviation
  std::vector<std::vector<float>> directions;  // strong directions (unit vectors)
  std::vector<float> direction_scale;
};

// A Gaussian mixture with anisotropic clusters around a common offset.
class Mixture {
 public:
  Mixture(std::uint32_t dims, std::uint32_t clusters, std::mt19937_64& rng) : dims_(dims) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> log_spread(std::log(0.02f), std::log(0.2f));
    offset_.resize(dims);
    for (float& x : offset_) x = 0.8f * normal(rng);
    for (std::uint32_t c = 0; c < clusters; ++c) {
      Cluster cluster;
      for (std::uint32_t j = 0; j < dims; ++j) {
        cluster.center.push_back(normal(rng));
        cluster.spread.push_back(std::exp(log_spread(rng)));
      }
      for (std::uint32_t r = 0; r < kStrongDirections; ++r) {
        std::vector<float> u(dims);
        double norm = 0.0;
        for (float& x : u) {
          x = normal(rng);
          norm += double{x} * x;
        }
        for (float& x : u) x = static_cast<float>(x / std::sqrt(norm));
        cluster.directions.push_back(std::move(u));
        cluster.direction_scale.push_back(3.0f / std::sqrt(static_cast<float>(r + 1)));
      }
      clusters_.push_back(std::move(cluster));
    }
  }

  // `rows` samples, row-major.
  std::vector<float> sample(std::uint64_t rows, std::mt19937_64& rng) const {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> out(rows * dims_);
    for (std::uint64_t r = 0; r < rows; ++r) {
      const Cluster& c = clusters_[rng() % clusters_.size()];
      float* x = out.data() + r * dims_;
      for (std::uint32_t j = 0; j < dims_; ++j) {
        x[j] = offset_[j] + c.center[j] + c.spread[j] * normal(rng);
      }
      for (std::size_t d = 0; d < c.directions.size(); ++d) {
        const float g = c.direction_scale[d] * normal(rng);
        for (std::uint32_t j = 0; j < dims_; ++j) x[j] += g * c.directions[d][j];
      }
    }
    return out;
  }

 private:
  std::uint32_t dims_;
  std::vector<float> offset_;
  std::vector<Cluster> clusters_;
};

// ---- exact search on the host ----------------------------------------------------------------

std::vector<float> normalized(std::vector<float> rows, std::uint32_t dims) {
  for (std::size_t r = 0; r < rows.size() / dims; ++r) {
    float* x = rows.data() + r * dims;
    double sum = 0.0;
    for (std::uint32_t j = 0; j < dims; ++j) sum += double{x[j]} * x[j];
    const double norm = std::sqrt(sum);
    if (norm > 0.0) {
      for (std::uint32_t j = 0; j < dims; ++j) x[j] = static_cast<float>(x[j] / norm);
    }
  }
  return rows;
}

// Each query's kRecallAt nearest rows by cosine similarity, split over the host's threads.
std::vector<std::vector<std::uint64_t>> exact_top(const std::vector<float>& database,
                                                  const std::vector<float>& queries,
                                                  std::uint32_t dims) {
  const std::vector<float> db = normalized(database, dims);
  const std::vector<float> q = normalized(queries, dims);
  const std::size_t rows = db.size() / dims, count = q.size() / dims;
  std::vector<std::vector<std::uint64_t>> top(count);
  auto work = [&](std::size_t first, std::size_t end) {
    std::vector<std::pair<float, std::uint64_t>> scored(rows);
    for (std::size_t i = first; i < end; ++i) {
      const float* query = q.data() + i * dims;
      for (std::size_t r = 0; r < rows; ++r) {
        // Eight partial sums, which the compiler can keep in one vector register.
        const float* row = db.data() + r * dims;
        float lanes[8] = {};
        std::uint32_t j = 0;
        for (; j + 8 <= dims; j += 8) {
          for (std::uint32_t l = 0; l < 8; ++l) lanes[l] += query[j + l] * row[j + l];
        }
        for (; j < dims; ++j) lanes[0] += query[j] * row[j];
        const float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                        ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        scored[r] = {-s, r};
      }
      std::partial_sort(scored.begin(), scored.begin() + kRecallAt, scored.end());
      for (std::uint32_t k = 0; k < kRecallAt; ++k) top[i].push_back(scored[k].second);
    }
  };
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(count, 1));
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back(work, count * t / threads, count * (t + 1) / threads);
  }
  for (std::thread& thread : pool) thread.join();
  return top;
}

double recall(const ferry::SearchResults& results,
              const std::vector<std::vector<std::uint64_t>>& exact) {
  std::uint64_t found = 0;
  for (std::uint32_t q = 0; q < results.queries; ++q) {
    for (std::uint32_t i = 0; i < kRecallAt; ++i) {
      const std::uint64_t id = results.ids[std::uint64_t{q} * results.k + i];
      found += std::count(exact[q].begin(), exact[q].end(), id) != 0 ? 1 : 0;
    }
  }
  return static_cast<double>(found) / (static_cast<double>(results.queries) * kRecallAt);
}

// ---- one run -----------------------------------------------------------------------------------

int run(const ferry::Device& device, const Options& options, std::uint32_t dims) {
  std::mt19937_64 rng(options.seed * 1000003ull + dims);
  const Mixture mixture(dims, options.clusters, rng);
  const std::vector<float> database = mixture.sample(options.rows, rng);
  const std::vector<float> queries = mixture.sample(options.queries, rng);

  ferry::BinaryIndexOptions index_options;
  index_options.dims = dims;
  index_options.metric = ferry::IndexMetric::cosine;
  index_options.threshold = ferry::IndexThreshold::first_add_mean;
  index_options.keep = options.keep;
  if (options.device_mib) {
    index_options.memory.code_budget_bytes = std::uint64_t{*options.device_mib} << 20;
    index_options.memory.vector_budget_bytes = std::uint64_t{*options.device_mib} << 20;
  }
  auto made = ferry::BinaryIndex::create(device, index_options);
  if (!made.ok()) return fail(made.status());
  ferry::BinaryIndex& index = *made;

  const auto add_start = Clock::now();
  if (auto added = index.add(std::span(database), options.rows); !added.ok()) {
    return fail(added.status());
  }
  const double add_ms = ms_since(add_start);
  const ferry::BinaryIndexStats stats = index.stats();

  const auto exact_start = Clock::now();
  const auto exact = exact_top(database, queries, dims);
  const double exact_ms = ms_since(exact_start);

  std::printf("\n%u rows x %u dims (cosine, %s kept), %u queries, %u clusters\n", options.rows,
              dims, std::string(ferry::to_string(options.keep)).c_str(), options.queries,
              options.clusters);
  std::printf("  add: %.1f ms (%.0f rows/s); codes on the device for %llu of %llu rows, kept "
              "vectors for %llu\n",
              add_ms, options.rows / (add_ms / 1000.0),
              static_cast<unsigned long long>(stats.device_code_rows),
              static_cast<unsigned long long>(stats.rows),
              static_cast<unsigned long long>(stats.device_vector_rows));
  std::printf("  exact float search on the host (the truth): %.1f ms\n", exact_ms);
  std::printf("  %-24s %10s %14s\n", "search", "recall@10", "ms per batch");

  struct Mode {
    const char* name;
    ferry::SearchParams params;
  };
  const Mode modes[] = {{"binary", {kRecallAt, 1, false}},
                        {"binary + rescore 2x", {kRecallAt, 2, true}},
                        {"binary + rescore 4x", {kRecallAt, 4, true}},
                        {"binary + rescore 10x", {kRecallAt, 10, true}}};
  const ferry::Status rescore_support = device.supports("rescore");
  for (const Mode& mode : modes) {
    if (mode.params.rescore && !rescore_support.ok()) {
      std::printf("  %-24s unavailable: %s\n", mode.name, rescore_support.message().c_str());
      continue;
    }
    // Once untimed (the first search allocates the index's work buffers), then timed.
    auto results = index.search(std::span(queries), options.queries, mode.params);
    if (!results.ok()) return fail(results.status());
    const auto start = Clock::now();
    results = index.search(std::span(queries), options.queries, mode.params);
    const double ms = ms_since(start);
    if (!results.ok()) return fail(results.status());
    std::printf("  %-24s %10.4f %14.2f\n", mode.name, recall(*results, exact), ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse_args(argc, argv);
  if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const Options& options = std::get<Options>(parsed);

  ferry::DeviceOptions device_options;
  device_options.trace_path = options.trace;
  auto device = ferry::Device::open(options.backend, 0, device_options);
  if (!device.ok()) return fail(device.status());
  std::printf("vector_search on %s (%s)\n", device->info().name.c_str(),
              std::string(ferry::to_string(device->backend())).c_str());
  for (const std::uint32_t dims : options.dims) {
    if (const int status = run(*device, options, dims); status != 0) return status;
  }
  if (const std::uint64_t messages = device->validation_message_count(); messages != 0) {
    return fail(ferry::Status(ferry::ErrorCode::internal,
                              std::to_string(messages) + " validation messages (printed above)"));
  }
  return 0;
}
