// `ferry bench search`: ferry::hamming_topk over random binary codes resident on the device, every
// result checked, with the baselines of the same run: FAISS IndexBinaryFlat on the CPU (same
// threads as ferry's CPU backend) where FAISS was found at build time, and on CUDA devices a plain
// popcount kernel that computes every distance and selects nothing. Sweeps of k, code lengths,
// binary_quantize throughput and database scale.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "ferry/binary_index.hpp"

#include "baselines/cuda_popcount.hpp"
#include "baselines/faiss_search.hpp"
#include "baselines/python_search.hpp"
#include "bench_common.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--rows", .kind = OptionKind::count, .metavar = "N",
     .help = "database rows (codes) of the search tables and the k and bits sweeps",
     .fallback = "1000000", .quick = "20000", .min = 1, .max = kHammingMaxDatabaseRows - 1},
    {.name = "--queries", .kind = OptionKind::count, .metavar = "N",
     .help = "queries per batch (one hamming_topk command)", .fallback = "1000", .quick = "100",
     .min = 1, .max = 1'000'000},
    {.name = "--k", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "k values of the search table", .fallback = "10"},
    {.name = "--bits", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "code lengths of the search table (multiples of 64, 64 to 4096)", .fallback = "256"},
    {.name = "--sweeps", .kind = OptionKind::choices, .metavar = "LIST",
     .help = "more tables: k (1, 10, 100, 1000 at 256 bits), bits (64, 256, 1024 at k = 10), "
             "quantize (binary_quantize of --rows x BITS float32 against a device-to-device "
             "copy), scale (--scale-rows x 256-bit, k = 10), stream (a BinaryIndex whose codes "
             "all stay in host memory, --stream-rows x 256-bit, against an upload of the same "
             "bytes), rescore (BinaryIndex::search with rescoring against the binary search "
             "alone, float32 vectors resident), or all",
     .fallback = "", .quick = "all", .choices = "k,bits,quantize,scale,stream,rescore,all"},
    {.name = "--scale-rows", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "database rows of the scale sweep (rows that do not fit in memory are skipped)",
     .fallback = "10000000,100000000", .quick = "50000"},
    {.name = "--stream-rows", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "database rows of the stream sweep", .fallback = "8000000", .quick = "40000"},
    {.name = "--stream-queries", .kind = OptionKind::count, .metavar = "N",
     .help = "queries per search of the stream sweep (few: the upload, not the search, is "
             "measured)",
     .fallback = "16", .quick = "8", .min = 1, .max = 1'000'000},
    {.name = "--index-rows", .kind = OptionKind::count, .metavar = "N",
     .help = "rows of the rescore sweep's index", .fallback = "1000000", .quick = "4000",
     .min = 1, .max = kHammingMaxDatabaseRows - 1},
    {.name = "--index-dims", .kind = OptionKind::count, .metavar = "N",
     .help = "dimensions of the rescore sweep's float32 vectors (a multiple of 64)",
     .fallback = "768", .quick = "64", .min = 64, .max = kBinaryIndexMaxDims},
    {.name = "--index-queries", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "query batches of the rescore sweep", .fallback = "1,16,1000", .quick = "1,9"},
    {.name = "--check-queries", .kind = OptionKind::count, .metavar = "N",
     .help = "queries per search whose top-k is checked against a brute-force search (spread "
             "over the batch; --queries checks every one)",
     .fallback = "32", .quick = "8", .min = 1, .max = 1'000'000},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "time measured per search and baseline, after a warm-up", .fallback = "500",
     .quick = "20", .max = 3'600'000},
};

constexpr std::uint32_t kSweepK[] = {1, 10, 100, 1000};
constexpr std::uint32_t kSweepBits[] = {64, 256, 1024};
constexpr std::uint32_t kScaleBits = 256, kDefaultK = 10;

// ---- Brute force on the host: the truth every search is checked against ----

// popcount(a ^ b) over `words` 64-bit words; the popcnt instruction where the CPU has it.
[[gnu::always_inline]] inline std::uint32_t code_distance_body(const std::byte* a,
                                                               const std::byte* b,
                                                               std::uint32_t words) {
  std::uint32_t d = 0;
  for (std::uint32_t w = 0; w < words; ++w) {
    std::uint64_t x = 0, y = 0;
    std::memcpy(&x, a + 8 * w, 8);
    std::memcpy(&y, b + 8 * w, 8);
    d += static_cast<std::uint32_t>(__builtin_popcountll(x ^ y));
  }
  return d;
}
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("popcnt")]] std::uint32_t code_distance_popcnt(const std::byte* a,
                                                             const std::byte* b,
                                                             std::uint32_t words) {
  return code_distance_body(a, b, words);
}
#endif
std::uint32_t code_distance(const std::byte* a, const std::byte* b, std::uint32_t words) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool popcnt = __builtin_cpu_supports("popcnt");
  if (popcnt) return code_distance_popcnt(a, b, words);
#endif
  return code_distance_body(a, b, words);
}

struct Codes {  // a database and its queries, on the host and resident on the device
  std::uint32_t bits = 0;
  std::uint64_t rows = 0;
  std::uint32_t queries = 0;
  std::vector<std::byte> host_database, host_queries;
  Buffer database, query_codes;

  std::uint64_t code_bytes() const { return bits / 8; }
};

// The top-k of each sampled query as (distance, index) pairs: every distance, a histogram, the
// threshold distance, then the rows below it and the first rows at it (ascending index).
using Entries = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
Entries brute_force_top_k(const Codes& codes, std::uint32_t query, std::uint32_t k) {
  const std::uint32_t words = codes.bits / 64;
  const std::byte* q = codes.host_queries.data() + query * codes.code_bytes();
  std::vector<std::uint16_t> distance(codes.rows);
  std::vector<std::uint64_t> histogram(codes.bits + 1, 0);
  for (std::uint64_t r = 0; r < codes.rows; ++r) {
    distance[r] = static_cast<std::uint16_t>(
        code_distance(q, codes.host_database.data() + r * codes.code_bytes(), words));
    ++histogram[distance[r]];
  }
  const std::uint64_t keep = std::min<std::uint64_t>(k, codes.rows);
  std::uint32_t threshold = 0;
  std::uint64_t below = 0;  // rows nearer than the threshold
  while (below + histogram[threshold] < keep) below += histogram[threshold++];
  std::uint64_t at_threshold = keep - below;
  Entries top;
  for (std::uint64_t r = 0; r < codes.rows; ++r) {
    if (distance[r] > threshold || (distance[r] == threshold && at_threshold == 0)) continue;
    if (distance[r] == threshold) --at_threshold;
    top.emplace_back(distance[r], static_cast<std::uint32_t>(r));
  }
  std::sort(top.begin(), top.end());
  return top;
}

// `count` queries spread over the batch, the first and the last included.
std::vector<std::uint32_t> sample_queries(std::uint32_t queries, std::uint64_t count) {
  const std::uint32_t n = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, queries));
  std::vector<std::uint32_t> sample;
  for (std::uint32_t i = 0; i < n; ++i)
    sample.push_back(n == 1 ? 0 : static_cast<std::uint32_t>(std::uint64_t{i} * (queries - 1) / (n - 1)));
  return sample;
}

// The brute-force top-k of every sampled query, on the host's threads.
std::vector<Entries> truth_of(const Codes& codes, const std::vector<std::uint32_t>& sample,
                              std::uint32_t k) {
  std::vector<Entries> truth(sample.size());
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> helpers;
  auto work = [&](unsigned first) {
    for (std::size_t i = first; i < sample.size(); i += threads)
      truth[i] = brute_force_top_k(codes, sample[i], k);
  };
  for (unsigned t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work, t);
    } catch (const std::system_error&) {  // no thread: this one does that share too
      work(t);
    }
  }
  work(0);
  for (std::thread& helper : helpers) helper.join();
  return truth;
}

// ---- The data ----

Result<Codes> make_codes(Bench& bench, std::uint32_t bits, std::uint64_t rows,
                         std::uint32_t queries, std::uint64_t seed) {
  Codes codes;
  codes.bits = bits;
  codes.rows = rows;
  codes.queries = queries;
  codes.host_database.resize(rows * codes.code_bytes());
  codes.host_queries.resize(std::uint64_t{queries} * codes.code_bytes());
  fill_random(codes.host_database, seed);
  fill_random(codes.host_queries, seed ^ 0x9E3779B97F4A7C15ull);
  // A few queries equal to database rows (distance 0 present).
  for (std::uint32_t q = 0; q < queries; q += 7) {
    const std::uint64_t row = mix64(seed + q) % rows;
    std::memcpy(codes.host_queries.data() + q * codes.code_bytes(),
                codes.host_database.data() + row * codes.code_bytes(), codes.code_bytes());
  }
  const Device& device = bench.device;
  FERRY_ASSIGN_OR_RETURN(codes.database, device.create_buffer(codes.host_database.size()));
  FERRY_ASSIGN_OR_RETURN(codes.query_codes, device.create_buffer(codes.host_queries.size()));
  FERRY_ASSIGN_OR_RETURN(StagingPool pool, device.create_staging_pool({}));
  const Queue upload_queue = device.queue(QueueKind::upload);
  for (const auto& [host, buffer] : {std::pair{&codes.host_database, &codes.database},
                                     std::pair{&codes.host_queries, &codes.query_codes}}) {
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, upload(upload_queue, pool, *host, *buffer, 0));
    FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
  }
  return codes;
}

// ---- One search configuration: ferry, checked, and the baselines ----

struct SearchResult {
  Timing ferry;
  std::vector<std::uint32_t> sample;  // the queries checked
  std::vector<Entries> truth;         // their brute-force top-k
  FaissSearchBaseline faiss;
};

// A baseline's distances of the sampled queries (k each) against the truth's. Only distances:
// a baseline may order rows at equal distances otherwise.
Status check_distances(std::string_view who, std::span<const std::int32_t> distances,
                       const SearchResult& result, std::uint32_t k) {
  for (std::size_t i = 0; i < result.sample.size(); ++i) {
    for (std::size_t j = 0; j < std::min<std::size_t>(k, result.truth[i].size()); ++j) {
      if (distances[i * k + j] == static_cast<std::int32_t>(result.truth[i][j].first)) continue;
      return Status(ErrorCode::internal, std::string(who) +
                                             " disagrees with the brute-force search: query " +
                                             std::to_string(result.sample[i]) + " rank " +
                                             std::to_string(j));
    }
  }
  return ok_status();
}

// A repetition's settings: one more run when the first one was long, else the usual.
RepeatSettings settings_after(double first_seconds, std::chrono::milliseconds min_time) {
  if (first_seconds > 2.0) return exactly(0, 1);
  return {.warmup = 0, .min_reps = 3, .max_reps = 100'000, .min_time = min_time};
}

Status check_search(std::uint32_t k, const std::vector<std::uint32_t>& sample,
                    const std::vector<Entries>& truth, std::span<const std::byte> distances,
                    std::span<const std::byte> indices) {
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const std::uint32_t q = sample[i];
    for (std::uint32_t j = 0; j < k; ++j) {
      std::uint32_t d = 0, index = 0;
      std::memcpy(&d, distances.data() + (std::uint64_t{q} * k + j) * 4, 4);
      std::memcpy(&index, indices.data() + (std::uint64_t{q} * k + j) * 4, 4);
      const bool real = j < truth[i].size();
      const std::uint32_t want_d = real ? truth[i][j].first : kHammingNoDistance;
      const std::uint32_t want_index = real ? truth[i][j].second : kHammingNoIndex;
      if (d != want_d || index != want_index) {
        return Status(ErrorCode::internal,
                      "wrong result: query " + std::to_string(q) + " rank " + std::to_string(j) +
                          ": got (distance " + std::to_string(d) + ", row " +
                          std::to_string(index) + "), the brute-force search has (" +
                          std::to_string(want_d) + ", " + std::to_string(want_index) + ")");
      }
    }
  }
  return ok_status();
}

Result<SearchResult> measure_search(Bench& bench, const Codes& codes, std::uint32_t k,
                                    bool with_faiss) {
  SearchResult result;
  const Device& device = bench.device;
  const std::uint64_t out_bytes = std::uint64_t{codes.queries} * k * 4;
  FERRY_ASSIGN_OR_RETURN(Buffer outputs, device.create_buffer(2 * out_bytes));
  const HammingTopkParams params{codes.bits, codes.queries, codes.rows, k};
  const HammingTopkBuffers buffers{codes.query_codes, 0, codes.database, 0,
                                   outputs,           0, outputs,        out_bytes};
  const Queue compute = device.queue(QueueKind::compute);
  auto search = [&]() -> Result<double> {
    CommandList list;
    FERRY_RETURN_IF_ERROR(hamming_topk(list, buffers, params));
    return wall_time([&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute.submit(std::move(list)));
      return done.wait(kWaitTimeout);
    });
  };
  // The first search (the warm-up): its results checked.
  FERRY_ASSIGN_OR_RETURN(const double first, search());
  {
    FERRY_ASSIGN_OR_RETURN(StagingPool readback,
                           device.create_staging_pool({.kind = MemoryKind::host_readback}));
    std::vector<std::byte> results(2 * out_bytes);
    FERRY_RETURN_IF_ERROR(download(device.queue(QueueKind::download), readback, outputs, 0, results));
    result.sample = sample_queries(codes.queries, bench.number("--check-queries"));
    result.truth = truth_of(codes, result.sample, k);
    FERRY_RETURN_IF_ERROR(check_search(k, result.sample, result.truth,
                                       std::span(results).first(out_bytes),
                                       std::span(results).subspan(out_bytes)));
  }
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  FERRY_ASSIGN_OR_RETURN(result.ferry, repeat(settings_after(first, min_time),
                                              [&](std::uint64_t) { return search(); }));
  if (with_faiss) {
    FERRY_RETURN_IF_ERROR(bench.progress("FAISS IndexBinaryFlat"));
    result.faiss = measure_faiss_search(codes.host_database, codes.host_queries, codes.bits, k,
                                        bench.reference.info().cpu_threads, result.sample,
                                        settings_after(first, min_time));
    if (result.faiss.available)
      FERRY_RETURN_IF_ERROR(check_distances("FAISS", result.faiss.sample_distances, result, k));
  }
  return result;
}

// The popcount kernel on CUDA devices, its per-row sums checked for a few rows.
Result<CudaPopcountBaseline> measure_popcount(Bench& bench, const Codes& codes) {
  std::vector<std::uint64_t> rows;
  for (std::uint64_t i = 0; i < 8; ++i) rows.push_back(i * (codes.rows - 1) / 7);
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  CudaPopcountBaseline popcount =
      measure_cuda_popcount(bench.device_index(), codes.host_database, codes.host_queries,
                            codes.bits, rows, {.warmup = 1, .min_reps = 3, .min_time = min_time});
  if (!popcount.available) return popcount;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::uint32_t sum = 0;  // wraps like the kernel's
    for (std::uint32_t q = 0; q < codes.queries; ++q) {
      sum += code_distance(codes.host_database.data() + rows[i] * codes.code_bytes(),
                           codes.host_queries.data() + q * codes.code_bytes(), codes.bits / 64);
    }
    if (popcount.sample_sums[i] != sum) {
      return Status(ErrorCode::internal, "the CUDA popcount baseline is wrong at row " +
                                             std::to_string(rows[i]));
    }
  }
  return popcount;
}

// ---- Tables ----

struct SearchConfig {
  std::uint32_t bits;
  std::uint64_t rows;
  std::uint32_t k;
};

// A baseline's cells: its ms and ferry's speedup over it (its time over ferry's), "-" when it did
// not run; why not, or what ran, as a note.
struct BaselineCells {
  Value ms = kNaN, ratio = kNaN;

  void set(double seconds, double ferry_seconds) {
    ms = seconds * 1e3;
    ratio = seconds / ferry_seconds;
  }
  bool measured() const { return std::holds_alternative<double>(ratio) && ratio == ratio; }
};

class SearchTables {
 public:
  explicit SearchTables(Bench& bench) : bench_(bench) {
    faiss_wheel_missing_ = python_missing("faiss, numpy");
    if (bench_.device.backend() == Backend::cuda) torch_missing_ = python_missing("torch, numpy");
  }
  ~SearchTables() { remove_codes_file(); }
  SearchTables(const SearchTables&) = delete;
  SearchTables& operator=(const SearchTables&) = delete;

  // One table of `configs`, printed once measured; with the FAISS baselines where `with_faiss`.
  Status table(const std::string& title, const std::string& key,
               const std::vector<SearchConfig>& configs, bool with_faiss) {
    const bool cuda = bench_.device.backend() == Backend::cuda;
    Section& table = bench_.report.add_section(title, key);
    // A table that gets no row (Ctrl-C, an error) is not shown.
    struct DropIfEmpty {
      Report& report;
      const Section* table;  // null once dealt with
      ~DropIfEmpty() {
        if (table != nullptr && table->rows.empty()) report.sections.pop_back();
      }
    } drop_if_empty{bench_.report, &table};
    table.columns = {{"bits", "bits", Unit::count},
                     {"rows", "rows", Unit::count},
                     {"k", "k", Unit::count},
                     {"ferry ms", "ferry_ms", Unit::ms},
                     {"Gcomp/s", "comparisons_per_second_g", Unit::number},
                     {"FAISS ms", "faiss_ms", Unit::ms, !with_faiss},
                     {"ferry/FAISS", "ferry_over_faiss", Unit::ratio, !with_faiss},
                     {"wheel ms", "faiss_wheel_ms", Unit::ms, !with_faiss},
                     {"ferry/wheel", "ferry_over_faiss_wheel", Unit::ratio, !with_faiss},
                     {"torch ms", "torch_ms", Unit::ms, !cuda},
                     {"ferry/torch", "ferry_over_torch", Unit::ratio, !cuda},
                     {"popcount ms", "cuda_popcount_ms", Unit::ms, !cuda},
                     {"ferry/popcount", "ferry_over_cuda_popcount", Unit::ratio, !cuda},
                     {"checked", "checked_queries", Unit::count},
                     {"ferry reps", "ferry_reps", Unit::count, true}};
    table.notes.push_back("ms: per batch of " + std::to_string(bench_.number("--queries")) +
                          " queries (ferry: one hamming_topk command, submitted and waited for); "
                          "Gcomp/s: query-row distances per second (1e9); ferry/X: X's time over "
                          "ferry's (above 1: ferry is faster).");
    bench_.skipped = {"Skipped searches", "skipped", {},
                      {{"bits", "bits", Unit::count}, {"rows", "rows", Unit::count},
                       {"k", "k", Unit::count}, {"reason", "reason"}}};
    std::map<std::string, std::string> notes;  // one per baseline
    for (const SearchConfig& config : configs) {
      const std::uint64_t queries = bench_.number("--queries");
      const std::uint64_t code_bytes = config.bits / 8;
      const std::uint64_t db_bytes = config.rows * code_bytes;
      const std::uint64_t out_bytes = queries * config.k * 8;
      const std::uint64_t device = db_bytes + queries * code_bytes + out_bytes + (64 << 20);
      // Host: the codes, the read-back, the truth's distances (per thread), a baseline's copy of
      // the codes.
      const std::uint64_t host = 2 * db_bytes + out_bytes +
                                 config.rows * 2 * std::max(1u, std::thread::hardware_concurrency());
      if (!bench_.fits({std::uint64_t{config.bits}, config.rows, std::uint64_t{config.k}}, device,
                       host))
        continue;
      const std::string what = std::to_string(config.rows) + " x " + std::to_string(config.bits) +
                               "-bit, k = " + std::to_string(config.k);
      FERRY_RETURN_IF_ERROR(bench_.progress("codes " + what));
      auto skip = [&](const Status& why) {
        bench_.skipped.add_row(
            {std::uint64_t{config.bits}, config.rows, std::uint64_t{config.k}, why.message()});
      };
      if (Status data = ensure_codes(config); !data.ok()) {
        if (data.code() != ErrorCode::resource_exhausted) return data.with_context(what);
        skip(data);
        continue;
      }
      FERRY_RETURN_IF_ERROR(bench_.progress("searching " + what));
      Result<SearchResult> result = measure_search(bench_, *codes_, config.k, with_faiss);
      if (!result.ok() && result.status().code() != ErrorCode::internal &&
          result.status().code() != ErrorCode::failed_precondition) {
        skip(result.status());  // what the device cannot do: a limit, its scratch memory
        continue;
      }
      if (!result.ok()) return result.status().with_context(what);
      const double ferry_s = result->ferry.median_seconds;
      const unsigned threads = bench_.reference.info().cpu_threads;

      BaselineCells faiss, wheel, torch, popcount;
      if (with_faiss && result->faiss.available) {
        faiss.set(result->faiss.timing.median_seconds, ferry_s);
        notes["faiss"] = "FAISS: " + result->faiss.version + ", IndexBinaryFlat on " +
                         std::to_string(threads) + " OpenMP threads (as many as ferry's CPU "
                         "backend); its distances checked on the sampled queries.";
      } else if (with_faiss) {
        notes["faiss"] = "FAISS: none: " + result->faiss.reason + ".";
      }
      if (with_faiss) {
        FERRY_ASSIGN_OR_RETURN(const PythonSearchBaseline python,
                               run_python("faiss", *result, config.k, faiss_wheel_missing_));
        if (python.available) {
          wheel.set(python.median_seconds, ferry_s);
          notes["wheel"] = "wheel: " + python.version + ", IndexBinaryFlat on " +
                           std::to_string(threads) + " threads (OMP_WAIT_POLICY=passive unless "
                           "set), through cli/baselines/search_python.py; its distances checked "
                           "too.";
        } else {
          notes["wheel"] = "wheel: none (the faiss-cpu wheel): " + python.reason + ".";
        }
      }
      if (cuda && config.bits <= 1024) {
        FERRY_ASSIGN_OR_RETURN(const PythonSearchBaseline python,
                               run_python("torch", *result, config.k, torch_missing_));
        if (python.available) {
          torch.set(python.median_seconds, ferry_s);
          notes["torch"] = "torch: " + python.version + " (cli/baselines/search_python.py); "
                           "its distances checked too.";
        } else {
          notes["torch"] = "torch: none: " + python.reason + ".";
        }
      }
      if (cuda) {
        FERRY_ASSIGN_OR_RETURN(const CudaPopcountBaseline baseline, popcount_of());
        if (baseline.available) {
          popcount.set(baseline.timing.median_seconds, ferry_s);
          notes["popcount"] = "popcount: a plain CUDA kernel computing every distance without "
                              "top-k (cli/baselines/cuda_popcount.cu), its per-row sums checked.";
        } else {
          notes["popcount"] = "popcount: none: " + baseline.reason + ".";
        }
      }
      const double comparisons = static_cast<double>(config.rows) * codes_->queries;
      table.add_row({std::uint64_t{config.bits}, config.rows, std::uint64_t{config.k},
                     ferry_s * 1e3, comparisons / ferry_s / 1e9, faiss.ms, faiss.ratio, wheel.ms,
                     wheel.ratio, torch.ms, torch.ratio, popcount.ms, popcount.ratio,
                     std::uint64_t{result->sample.size()}, result->ferry.reps});
      std::string summary = "ferry " + format_value(ferry_s * 1e3, Unit::ms) + " ms";
      for (const auto& [name, cells] : {std::pair{"FAISS", &faiss}, {"wheel", &wheel},
                                        {"torch", &torch}, {"popcount", &popcount}}) {
        if (cells->measured())
          summary += std::string(", ferry/") + name + " " + ratio_text(std::get<double>(cells->ratio));
      }
      bench_.report.summary.emplace_back("search " + what, summary);
    }
    for (const auto& [_, note] : notes) table.notes.push_back(note);
    table.notes.push_back("checked: the top-k of that many queries (spread over the batch) equal "
                          "a brute-force search's on the host, distances and indices.");
    if (table.rows.empty()) bench_.report.sections.pop_back();
    drop_if_empty.table = nullptr;
    if (!bench_.skipped.rows.empty()) bench_.report.sections.push_back(std::move(bench_.skipped));
    bench_.skipped = {};
    bench_.publish();
    return ok_status();
  }

 private:
  Status ensure_codes(const SearchConfig& config) {
    if (codes_ && codes_->bits == config.bits && codes_->rows == config.rows) return ok_status();
    codes_.reset();  // the memory of the last codes first
    popcount_.reset();
    remove_codes_file();
    FERRY_ASSIGN_OR_RETURN(Codes codes,
                           make_codes(bench_, config.bits, config.rows,
                                      static_cast<std::uint32_t>(bench_.number("--queries")),
                                      0x5eed + config.bits * 31 + config.rows));
    codes_ = std::move(codes);
    return ok_status();
  }

  // The Python baseline `name` on the current codes (written to a file the first time), its
  // distances checked; `missing` says why it cannot run.
  Result<PythonSearchBaseline> run_python(std::string_view name, const SearchResult& result,
                                          std::uint32_t k, const std::string& missing) {
    if (!missing.empty()) return PythonSearchBaseline{.reason = missing};
    FERRY_RETURN_IF_ERROR(bench_.progress(std::string(name) + " through Python"));
    if (codes_file_.empty()) {
      std::error_code error;
      const std::filesystem::path path = std::filesystem::temp_directory_path(error) /
                                         ("ferry-bench-search-" + std::to_string(getpid()));
      std::FILE* file = error ? nullptr : std::fopen(path.c_str(), "wb");
      bool written = file != nullptr;
      for (const std::vector<std::byte>* part : {&codes_->host_database, &codes_->host_queries}) {
        written = written && std::fwrite(part->data(), 1, part->size(), file) == part->size();
      }
      if (file != nullptr) written = std::fclose(file) == 0 && written;
      if (!written) {
        std::filesystem::remove(path, error);
        return PythonSearchBaseline{.reason = "cannot write the codes to " + path.string()};
      }
      codes_file_ = path;
    }
    PythonSearchBaseline python = measure_python_search(
        name, codes_file_, codes_->bits, codes_->rows, codes_->queries, k,
        bench_.reference.info().cpu_threads, bench_.device_index(),
        bench_.number("--min-time-ms"), result.sample);
    FERRY_RETURN_IF_ERROR(check_interrupt());  // Ctrl-C reached the child too
    if (python.available)
      FERRY_RETURN_IF_ERROR(check_distances(name, python.sample_distances, result, k));
    return python;
  }

  void remove_codes_file() {
    if (codes_file_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove(codes_file_, ignored);
    codes_file_.clear();
  }

  // The popcount kernel over the current codes, measured once per codes.
  Result<CudaPopcountBaseline> popcount_of() {
    if (!popcount_) {
      FERRY_RETURN_IF_ERROR(bench_.progress("the CUDA popcount baseline"));
      FERRY_ASSIGN_OR_RETURN(CudaPopcountBaseline popcount, measure_popcount(bench_, *codes_));
      popcount_ = std::move(popcount);
    }
    return *popcount_;
  }

  Bench& bench_;
  std::optional<Codes> codes_;
  std::optional<CudaPopcountBaseline> popcount_;
  std::filesystem::path codes_file_;
  std::string faiss_wheel_missing_;          // why the faiss-cpu wheel cannot run; empty: it can
  std::string torch_missing_ = "not a CUDA device";
};

// ---- binary_quantize against a device-to-device copy ----

// Random float32 in [-1, 1), every 97th element exactly 0 (the bit is 0: not > 0).
std::vector<float> random_floats(std::uint64_t count, std::uint64_t seed) {
  std::vector<float> values(count);
  fill_random(std::as_writable_bytes(std::span(values)), seed);
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto raw = std::bit_cast<std::int32_t>(values[i]);
    values[i] = i % 97 == 0 ? 0.0f : static_cast<float>(raw) * 0x1p-31f;
  }
  return values;
}

// Sign codes of `rows` rows of `dims` values, as binary_quantize writes them with threshold
// zero: bit j of a row is x_j > 0, rows binary_code_bytes(dims) apart.
std::vector<std::byte> sign_codes(std::span<const float> values, std::uint64_t rows,
                                  std::uint32_t dims) {
  const std::uint64_t code_bytes = binary_code_bytes(dims);
  std::vector<std::byte> codes(rows * code_bytes, std::byte{0});
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint32_t j = 0; j < dims; ++j) {
      if (values[r * dims + j] > 0.0f) codes[r * code_bytes + j / 8] |= std::byte{1} << (j % 8);
    }
  }
  return codes;
}

Status quantize_table(Bench& bench) {
  const auto rows = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(bench.number("--rows"), UINT32_MAX));
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  Section& table = bench.report.add_section(
      "binary_quantize (float32, threshold 0) against a device-to-device copy of the same bytes",
      "quantize");
  table.columns = {{"rows x dims", "shape", Unit::text},
                   {"input", "input_bytes", Unit::bytes},
                   {"quantize ms", "quantize_ms", Unit::ms},
                   {"quantize GB/s", "quantize_gbps", Unit::gbps},
                   {"copy GB/s", "copy_gbps", Unit::gbps},
                   {"quantize/copy", "quantize_over_copy", Unit::ratio},
                   {"checked rows", "checked_rows", Unit::count}};
  table.notes = {"GB/s: float input bytes per second (1e9); the copy: CommandList::copy of the "
                 "input bytes between device buffers, timed the same way (one command per list, "
                 "submitted and waited for). Checked: the codes of that many rows (spread) "
                 "against x > 0 on the host, bit for bit."};
  bench.skipped = {"Skipped quantize sizes", "skipped_quantize", {},
                   {{"rows x dims", "shape"}, {"reason", "reason"}}};
  for (std::uint64_t bits : bench.options.sizes("--bits")) {
    const auto dims = static_cast<std::uint32_t>(bits);
    const std::string shape = to_string(MatrixShape{rows, dims});
    BinaryQuantizeParams params;
    params.rows = rows;
    params.dims = dims;
    FERRY_ASSIGN_OR_RETURN(const BinaryQuantizeShape resolved, resolve_binary_quantize(params));
    const std::uint64_t in = resolved.input_bytes, out = resolved.output_bytes;
    if (!bench.fits({shape}, 2 * in + out, 2 * in + out)) continue;
    FERRY_RETURN_IF_ERROR(bench.progress("binary_quantize " + shape));
    const std::vector<float> values = random_floats(std::uint64_t{rows} * dims, 0xF10A7 + dims);
    const std::span<const std::byte> input = std::as_bytes(std::span(values));
    const Device& device = bench.device;
    FERRY_ASSIGN_OR_RETURN(Buffer source, device.create_buffer(in));
    FERRY_ASSIGN_OR_RETURN(Buffer copy_target, device.create_buffer(in));
    FERRY_ASSIGN_OR_RETURN(Buffer codes, device.create_buffer(out));
    {
      FERRY_ASSIGN_OR_RETURN(StagingPool pool, device.create_staging_pool({}));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint done,
                             upload(device.queue(QueueKind::upload), pool, input, source, 0));
      FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
    }
    const ListSettings settings{.commands = 1, .min_time = min_time};
    const Queue compute = device.queue(QueueKind::compute);
    FERRY_ASSIGN_OR_RETURN(const ListTiming quantize,
                           time_lists(compute, [&]() -> Result<CommandList> {
                             CommandList list;
                             FERRY_RETURN_IF_ERROR(
                                 binary_quantize(list, source, 0, codes, 0, params));
                             return list;
                           }, settings));
    FERRY_ASSIGN_OR_RETURN(const ListTiming copy,
                           time_lists(compute, [&]() -> Result<CommandList> {
                             CommandList list;
                             FERRY_RETURN_IF_ERROR(list.copy(source, 0, copy_target, 0, in));
                             return list;
                           }, settings));
    // The codes of the last run, checked on a sample of rows.
    FERRY_ASSIGN_OR_RETURN(StagingPool readback,
                           device.create_staging_pool({.kind = MemoryKind::host_readback}));
    std::vector<std::byte> result(out);
    FERRY_RETURN_IF_ERROR(download(device.queue(QueueKind::download), readback, codes, 0, result));
    const std::uint64_t code_bytes = binary_code_bytes(dims);
    const std::vector<std::uint32_t> sample = sample_queries(rows, 1000);
    for (std::uint32_t row : sample) {
      const std::vector<std::byte> want =
          sign_codes(std::span(values).subspan(std::uint64_t{row} * dims, dims), 1, dims);
      FERRY_RETURN_IF_ERROR(compare_bytes(std::span(result).subspan(row * code_bytes, code_bytes),
                                          want, "binary_quantize row " + std::to_string(row)));
    }
    const double seconds = quantize.lists.median_seconds, copy_seconds = copy.lists.median_seconds;
    const double gbps = static_cast<double>(in) / seconds / 1e9;
    const double copy_gbps = static_cast<double>(in) / copy_seconds / 1e9;
    table.add_row({shape, in, seconds * 1e3, gbps, copy_gbps, gbps / copy_gbps,
                   std::uint64_t{sample.size()}});
    bench.report.summary.emplace_back("binary_quantize " + shape,
                                      "quantize/copy " + ratio_text(gbps / copy_gbps) + " (" +
                                          format_value(gbps, Unit::gbps) + " GB/s of input)");
  }
  if (table.rows.empty()) bench.report.sections.pop_back();
  if (!bench.skipped.rows.empty()) bench.report.sections.push_back(std::move(bench.skipped));
  bench.skipped = {};
  bench.publish();
  return ok_status();
}

// ---- A database past the device budget, streamed from host memory ----

// Float rows whose sign bits are the codes' bits (x = +1 for a 1 bit, -1 for a 0): the queries
// of the stream sweep, which BinaryIndex::search quantizes back to exactly `codes`.
void expand_codes(std::span<const std::byte> codes, std::span<float> rows) {
  for (std::size_t j = 0; j < rows.size(); ++j)
    rows[j] = (std::to_integer<unsigned>(codes[j / 8]) >> (j % 8)) & 1u ? 1.0f : -1.0f;
}

Status stream_table(Bench& bench) {
  constexpr std::uint32_t kBits = kScaleBits, kK = kDefaultK;
  const auto queries = static_cast<std::uint32_t>(bench.number("--stream-queries"));
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  Section& table = bench.report.add_section(
      "Streamed: a BinaryIndex with no device budget for codes (all in host memory), " +
          std::to_string(queries) + " queries, 256-bit codes, k = 10",
      "stream");
  table.columns = {{"rows", "rows", Unit::count},
                   {"codes", "code_bytes", Unit::bytes},
                   {"search ms", "search_ms", Unit::ms},
                   {"streamed GB/s", "stream_gbps", Unit::gbps},
                   {"upload GB/s", "upload_gbps", Unit::gbps},
                   {"stream/upload", "stream_over_upload", Unit::ratio},
                   {"checked", "checked_queries", Unit::count}};
  table.notes = {
      "search: BinaryIndex::search (binary codes only, no rescoring) with "
      "BinaryIndexMemory::code_budget_bytes = 0 and the default staging (4 slabs of 16 MiB): "
      "every search streams all the codes through the pool, chunk i + 1's upload overlapping "
      "chunk i's search; streamed GB/s: code bytes over the search's wall time. upload: "
      "ferry::upload of the same bytes from host memory to a device buffer through a pool of "
      "the same slabs, submitted and waited for. Checked: the sampled queries' ids and "
      "distances against a brute-force search on the host."};
  bench.skipped = {"Skipped stream sizes", "skipped_stream", {},
                   {{"rows", "rows"}, {"reason", "reason"}}};
  const Device& device = bench.device;
  for (std::uint64_t rows : bench.options.sizes("--stream-rows")) {
    rows = std::min<std::uint64_t>(rows, kHammingMaxDatabaseRows - 1);
    Codes codes;
    codes.bits = kBits;
    codes.rows = rows;
    codes.queries = queries;
    const std::uint64_t code_bytes = rows * codes.code_bytes();
    // Host: the codes and the index's copy of them; device: one copy (the upload baseline).
    if (!bench.fits({rows}, code_bytes + (64 << 20), 2 * code_bytes))
      continue;
    FERRY_RETURN_IF_ERROR(bench.progress("stream: building the index of " + std::to_string(rows) +
                                         " rows"));
    codes.host_database.resize(code_bytes);
    codes.host_queries.resize(std::uint64_t{queries} * codes.code_bytes());
    fill_random(codes.host_database, 0x57EA + rows);
    fill_random(codes.host_queries, 0x57EB + rows);
    for (std::uint32_t q = 0; q < queries; q += 7) {  // some queries at distance 0 from a row
      std::memcpy(codes.host_queries.data() + q * codes.code_bytes(),
                  codes.host_database.data() + (mix64(q) % rows) * codes.code_bytes(),
                  codes.code_bytes());
    }
    BinaryIndexOptions options;
    options.dims = kBits;
    options.memory.code_budget_bytes = 0;
    FERRY_ASSIGN_OR_RETURN(BinaryIndex index, BinaryIndex::create(device, options));
    FERRY_RETURN_IF_ERROR(index.add_codes(codes.host_database, rows).status());
    if (index.stats().device_code_rows != 0) {
      return Status(ErrorCode::internal, "bench search: the stream index keeps " +
                                             std::to_string(index.stats().device_code_rows) +
                                             " rows' codes on the device; expected none");
    }
    std::vector<float> query_floats(std::uint64_t{queries} * kBits);
    expand_codes(codes.host_queries, query_floats);
    const SearchParams params{.k = kK};
    Result<SearchResults> results = Status(ErrorCode::internal, "no search yet");
    auto search = [&]() -> Result<double> {
      return wall_time([&]() -> Status {
        results = index.search(std::span<const float>(query_floats), queries, params);
        return results.status();
      });
    };
    FERRY_RETURN_IF_ERROR(bench.progress("stream: searching " + std::to_string(rows) + " rows"));
    FERRY_ASSIGN_OR_RETURN(const double first, search());
    const std::vector<std::uint32_t> sample = sample_queries(queries, bench.number("--check-queries"));
    const std::vector<Entries> truth = truth_of(codes, sample, kK);
    for (std::size_t i = 0; i < sample.size(); ++i) {
      for (std::uint32_t j = 0; j < kK; ++j) {
        const std::uint64_t at = std::uint64_t{sample[i]} * kK + j;
        const bool real = j < truth[i].size();
        const std::uint64_t want_id = real ? truth[i][j].second : kBinaryIndexNoId;
        const bool same_score = real ? results->scores[at] == static_cast<float>(truth[i][j].first)
                                     : std::isnan(results->scores[at]);
        if (results->ids[at] != want_id || !same_score) {
          return Status(ErrorCode::internal,
                        "wrong streamed result: query " + std::to_string(sample[i]) + " rank " +
                            std::to_string(j) + ": got id " + std::to_string(results->ids[at]) +
                            ", the brute-force search has " + std::to_string(want_id));
        }
      }
    }
    FERRY_ASSIGN_OR_RETURN(const Timing streamed, repeat(settings_after(first, min_time),
                                                         [&](std::uint64_t) { return search(); }));
    // The baseline: the same bytes uploaded through a pool of the index's slabs.
    FERRY_ASSIGN_OR_RETURN(Buffer target, device.create_buffer(code_bytes));
    FERRY_ASSIGN_OR_RETURN(StagingPool pool,
                           reserved_pool(device, MemoryKind::host_upload,
                                         options.memory.staging_slab_bytes,
                                         options.memory.staging_slabs));
    const Queue upload_queue = device.queue(QueueKind::upload);
    FERRY_ASSIGN_OR_RETURN(const Timing uploaded,
                           time_each({.warmup = 1, .min_reps = 3, .min_time = min_time},
                                     [&]() -> Status {
                                       FERRY_ASSIGN_OR_RETURN(
                                           TimelinePoint done,
                                           upload(upload_queue, pool, codes.host_database, target, 0));
                                       return done.wait(kWaitTimeout);
                                     }));
    const double stream_gbps = static_cast<double>(code_bytes) / streamed.median_seconds / 1e9;
    const double upload_gbps = static_cast<double>(code_bytes) / uploaded.median_seconds / 1e9;
    table.add_row({rows, code_bytes, streamed.median_seconds * 1e3, stream_gbps, upload_gbps,
                   stream_gbps / upload_gbps, std::uint64_t{sample.size()}});
    bench.report.summary.emplace_back(
        "stream " + std::to_string(rows) + " x 256-bit",
        "streamed/upload " + ratio_text(stream_gbps / upload_gbps) + " (" +
            format_value(stream_gbps, Unit::gbps) + " of " + format_value(upload_gbps, Unit::gbps) +
            " GB/s)");
  }
  if (table.rows.empty()) bench.report.sections.pop_back();
  if (!bench.skipped.rows.empty()) bench.report.sections.push_back(std::move(bench.skipped));
  bench.skipped = {};
  bench.publish();
  return ok_status();
}

// ---- BinaryIndex search with rescoring, float vectors resident ----

// The rescore sweep's truth for one query: the Hamming top `candidates` (brute force), each
// scored exactly as rescore defines it (inner product, fma in dimension order), the best k by
// score, then id.
struct ScoredTruth {
  Entries hamming;                                      // (distance, row), best first
  std::vector<std::pair<float, std::uint32_t>> scored;  // (score, row), best first
};

ScoredTruth rescore_truth(const Codes& codes, std::uint32_t query, std::uint32_t candidates,
                          std::uint32_t k, std::span<const float> database,
                          std::span<const float> query_values, std::uint32_t dims) {
  ScoredTruth truth;
  truth.hamming = brute_force_top_k(codes, query, candidates);
  for (const auto& [distance, row] : truth.hamming) {
    float s = 0.0f;
    for (std::uint32_t j = 0; j < dims; ++j)
      s = std::fma(query_values[j], database[std::uint64_t{row} * dims + j], s);
    truth.scored.emplace_back(s, row);
  }
  std::sort(truth.scored.begin(), truth.scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (truth.scored.size() > k) truth.scored.resize(k);
  return truth;
}

Status rescore_table(Bench& bench) {
  constexpr std::uint32_t kK = kDefaultK;
  constexpr std::uint32_t kOversample[] = {4, 10};
  const std::uint64_t rows = bench.number("--index-rows");
  const auto dims = static_cast<std::uint32_t>(bench.number("--index-dims"));
  if (dims % 64 != 0) {
    return Status(ErrorCode::invalid_argument,
                  "bench search: --index-dims " + std::to_string(dims) + ": a multiple of 64");
  }
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  Section& table = bench.report.add_section(
      "Rescore: BinaryIndex::search of " + std::to_string(rows) + " x " + std::to_string(dims) +
          " float32 vectors (kept, resident), k = 10, binary alone and rescored from 4k and 10k "
          "candidates",
      "rescore");
  table.columns = {{"queries", "queries", Unit::count},
                   {"binary ms", "binary_ms", Unit::ms},
                   {"x4 ms", "rescore4_ms", Unit::ms},
                   {"x4/binary", "rescore4_over_binary", Unit::ratio},
                   {"x10 ms", "rescore10_ms", Unit::ms},
                   {"x10/binary", "rescore10_over_binary", Unit::ratio},
                   {"checked", "checked_queries", Unit::count}};
  table.notes = {
      "BinaryIndex (inner product, threshold zero, KeptVectors::float32, default memory: every "
      "code and vector on the device) of random values in [-1, 1); per batch the wall time of "
      "search() from float32 queries to ids and scores on the host: binary (SearchParams "
      "rescore off), x4 / x10 (rescore with oversample 4 / 10). Checked: the sampled queries' "
      "ids and scores against a brute-force Hamming search and exact fma scores on the host."};
  bench.skipped = {"Skipped rescore sizes", "skipped_rescore", {},
                   {{"rows or queries", "count"}, {"reason", "reason"}}};
  const std::uint64_t vector_bytes = rows * dims * 4;
  // Host: the vectors and their codes; device: the index's codes and vectors.
  if (!bench.fits({rows}, vector_bytes + rows * dims / 8 + (256 << 20),
                  vector_bytes + rows * dims / 8)) {
    bench.report.sections.pop_back();
    bench.report.sections.push_back(std::move(bench.skipped));
    bench.skipped = {};
    bench.publish();
    return ok_status();
  }
  FERRY_RETURN_IF_ERROR(bench.progress("rescore: building the index of " + std::to_string(rows) +
                                       " x " + std::to_string(dims)));
  const std::vector<float> database = random_floats(rows * dims, 0x2E5C + rows);
  Codes codes;  // the host's codes, for the brute-force truth
  codes.bits = dims;
  codes.rows = rows;
  codes.host_database = sign_codes(database, rows, dims);
  BinaryIndexOptions options;
  options.dims = dims;
  options.keep = KeptVectors::float32;
  FERRY_ASSIGN_OR_RETURN(BinaryIndex index, BinaryIndex::create(bench.device, options));
  FERRY_RETURN_IF_ERROR(index.add(std::span<const float>(database), rows).status());
  // Where the rows are says which way search() runs (docs/SEARCH.md).
  const BinaryIndexStats stats = index.stats();
  table.notes.push_back("The index: " + std::to_string(stats.code_segments) + " code and " +
                        std::to_string(stats.vector_segments) +
                        " vector segments (one of each on the device: searched as one chain "
                        "there, docs/SEARCH.md).");

  for (const std::uint64_t batch : bench.options.sizes("--index-queries")) {
    const auto queries = static_cast<std::uint32_t>(std::min<std::uint64_t>(batch, 1'000'000));
    // Host: the query values and codes, and the results.
    if (!bench.fits({std::uint64_t{queries}}, 0,
                    std::uint64_t{queries} * (std::uint64_t{dims} * 4 + dims / 8 + 12 * kK))) {
      continue;
    }
    std::vector<float> query_values = random_floats(std::uint64_t{queries} * dims, 0x2E5D + batch);
    for (std::uint32_t q = 0; q < queries; q += 7) {  // some queries equal to database rows
      std::memcpy(query_values.data() + std::uint64_t{q} * dims,
                  database.data() + (mix64(q) % rows) * dims, std::size_t{dims} * 4);
    }
    codes.queries = queries;
    codes.host_queries = sign_codes(query_values, queries, dims);
    const std::vector<std::uint32_t> sample =
        sample_queries(queries, std::min<std::uint64_t>(bench.number("--check-queries"), 8));
    std::vector<Value> row{std::uint64_t{queries}};
    double binary_ms = 0;
    for (const std::uint32_t oversample : {1u, kOversample[0], kOversample[1]}) {
      const bool rescore = oversample > 1;
      const SearchParams params{.k = kK, .oversample = oversample, .rescore = rescore};
      FERRY_RETURN_IF_ERROR(bench.progress("rescore: " + std::to_string(queries) +
                                           " queries, oversample " + std::to_string(oversample)));
      Result<SearchResults> results = Status(ErrorCode::internal, "no search yet");
      auto search = [&]() -> Result<double> {
        return wall_time([&]() -> Status {
          results = index.search(std::span<const float>(query_values), queries, params);
          return results.status();
        });
      };
      FERRY_ASSIGN_OR_RETURN(const double first, search());
      for (const std::uint32_t q : sample) {
        const ScoredTruth truth =
            rescore_truth(codes, q, kK * oversample, kK, database,
                          std::span(query_values).subspan(std::uint64_t{q} * dims, dims), dims);
        for (std::uint32_t j = 0; j < kK; ++j) {
          const std::uint64_t at = std::uint64_t{q} * kK + j;
          // Past the rows (fewer than k): padding, a NaN score.
          const bool real = j < truth.scored.size();
          const std::uint64_t want_id = !real    ? kBinaryIndexNoId
                                        : rescore ? truth.scored[j].second
                                                  : truth.hamming[j].second;
          const float want_score = !real    ? std::numeric_limits<float>::quiet_NaN()
                                   : rescore ? truth.scored[j].first
                                             : static_cast<float>(truth.hamming[j].first);
          const bool same_score = real ? std::bit_cast<std::uint32_t>(results->scores[at]) ==
                                             std::bit_cast<std::uint32_t>(want_score)
                                       : std::isnan(results->scores[at]);
          if (results->ids[at] != want_id || !same_score) {
            return Status(ErrorCode::internal,
                          "wrong rescore result: " + std::to_string(queries) + " queries, "
                          "oversample " + std::to_string(oversample) + ", query " +
                              std::to_string(q) + " rank " + std::to_string(j) + ": got id " +
                              std::to_string(results->ids[at]) + " (score " +
                              std::to_string(results->scores[at]) + "), the host has " +
                              std::to_string(want_id) + " (" + std::to_string(want_score) + ")");
          }
        }
      }
      FERRY_ASSIGN_OR_RETURN(const Timing timing, repeat(settings_after(first, min_time),
                                                         [&](std::uint64_t) { return search(); }));
      const double ms = timing.median_seconds * 1e3;
      row.emplace_back(ms);
      if (!rescore) {
        binary_ms = ms;
      } else {
        row.emplace_back(ms / binary_ms);
        bench.report.summary.emplace_back(
            "rescore x" + std::to_string(oversample) + ", " + std::to_string(queries) + " queries",
            "rescored/binary " + ratio_text(ms / binary_ms) + " (" + format_value(ms, Unit::ms) +
                " of " + format_value(binary_ms, Unit::ms) + " ms)");
      }
    }
    row.emplace_back(std::uint64_t{sample.size()});
    table.add_row(std::move(row));
  }
  if (!bench.skipped.rows.empty()) bench.report.sections.push_back(std::move(bench.skipped));
  bench.skipped = {};
  bench.publish();
  return ok_status();
}

// ---- The bench ----

Status measure(Bench& bench) {
  const Options& options = bench.options;
  std::vector<std::string> sweeps = options.list("--sweeps");
  const auto swept = [&](std::string_view name) {
    return std::find(sweeps.begin(), sweeps.end(), name) != sweeps.end() ||
           std::find(sweeps.begin(), sweeps.end(), "all") != sweeps.end();
  };
  const std::vector<std::uint64_t> ks = options.sizes("--k");
  const std::vector<std::uint64_t> bits = options.sizes("--bits");
  const std::uint64_t rows = bench.number("--rows");
  const auto queries = bench.number("--queries");
  bench.report.add_method(
      "random codes (splitmix64; every 7th query a copy of a database row) uploaded once and "
      "resident on the device; per configuration one hamming_topk command of every query per "
      "list, submitted and waited for: the median over >= " + options.text("--min-time-ms") +
          " ms after a warm-up, whose results are checked against a brute-force search on the "
          "host (the sampled queries' top-k, distances and indices); baselines in the same run, "
          "the CPU ones on as many threads as ferry's CPU backend has (CPU threads)",
      {{"rows", rows}, {"queries", queries},
       {"min_time_ms", bench.number("--min-time-ms")},
       {"check_queries", bench.number("--check-queries")}});
  bench.report.header.push_back({"CPU threads", "cpu_threads",
                                 std::uint64_t{bench.reference.info().cpu_threads}, Unit::count});
  bench.publish();

  SearchTables tables(bench);
  const std::string batch = std::to_string(queries) + " queries";
  std::vector<SearchConfig> main;
  for (std::uint64_t b : bits) {
    for (std::uint64_t k : ks)
      main.push_back({static_cast<std::uint32_t>(b), rows, static_cast<std::uint32_t>(k)});
  }
  FERRY_RETURN_IF_ERROR(tables.table("Search: " + batch + ", codes resident on the device",
                                     "search", main, true));
  if (swept("k")) {
    std::vector<SearchConfig> configs;
    for (std::uint32_t k : kSweepK) configs.push_back({kScaleBits, rows, k});
    FERRY_RETURN_IF_ERROR(tables.table("k sweep: " + batch + ", 256-bit codes", "k_sweep",
                                       configs, true));
  }
  if (swept("bits")) {
    std::vector<SearchConfig> configs;
    for (std::uint32_t b : kSweepBits) configs.push_back({b, rows, kDefaultK});
    FERRY_RETURN_IF_ERROR(tables.table("Code length sweep: " + batch + ", k = 10", "bits_sweep",
                                       configs, true));
  }
  if (swept("quantize")) FERRY_RETURN_IF_ERROR(quantize_table(bench));
  if (swept("scale")) {
    std::vector<SearchConfig> configs;
    for (std::uint64_t r : options.sizes("--scale-rows")) {
      configs.push_back({kScaleBits, std::min<std::uint64_t>(r, kHammingMaxDatabaseRows - 1),
                         kDefaultK});
    }
    FERRY_RETURN_IF_ERROR(tables.table("Scale: " + batch + ", 256-bit codes, k = 10 (no FAISS: "
                                       "it would take minutes here)",
                                       "scale", configs, false));
  }
  if (swept("stream")) FERRY_RETURN_IF_ERROR(stream_table(bench));
  if (swept("rescore")) FERRY_RETURN_IF_ERROR(rescore_table(bench));
  return ok_status();
}

int run(const Options& options, const std::string& command_line) {
  for (std::uint64_t b : options.sizes("--bits")) {
    if (b % 64 != 0 || b > kHammingMaxCodeBits) {
      return usage_error("bench search: --bits " + std::to_string(b) +
                         ": code lengths are multiples of 64 up to " +
                         std::to_string(kHammingMaxCodeBits));
    }
  }
  for (std::uint64_t k : options.sizes("--k")) {
    if (k > kHammingMaxK) {
      return usage_error("bench search: --k " + std::to_string(k) + ": at most " +
                         std::to_string(kHammingMaxK));
    }
  }
  return run_bench(options, command_line, "ferry bench search",
                   {QueueKind::compute, QueueKind::upload}, true, measure);
}

}  // namespace

const Command kBenchSearch = {
    .name = "bench search",
    .summary = "Hamming top-k search (hamming_topk) of binary codes resident on the device, every "
               "result checked, against FAISS IndexBinaryFlat (CPU) and a plain CUDA popcount "
               "kernel; sweeps of k, code length, binary_quantize and scale.",
    .about =
        "Random binary codes (default 1,000,000 x 256-bit) uploaded once and resident on the\n"
        "device; batches of queries (default 1000, k = 10) searched with one hamming_topk\n"
        "command each: ms per batch and distance comparisons per second. The first search's\n"
        "results are checked against a brute-force search on the host (--check-queries of the\n"
        "queries, exact distances and indices; exit 1 on a mismatch). Baselines in the same\n"
        "run: FAISS IndexBinaryFlat on as many threads as ferry's CPU backend, when FAISS was\n"
        "found at build time (its distances checked too), and on CUDA devices a plain popcount\n"
        "kernel computing every distance without top-k. --sweeps adds k and code length\n"
        "sweeps, binary_quantize in GB/s of float input against a device-to-device copy, and\n"
        "10M / 100M-row databases where memory allows (else listed as skipped), a\n"
        "BinaryIndex whose codes stream from host memory at every search against an upload\n"
        "of the same bytes, and a BinaryIndex search with rescoring (float32 vectors resident,\n"
        "4k and 10k candidates) against its binary search alone.\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
