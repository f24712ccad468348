// `ferry search`: the k nearest database vectors of each query vector, both read from files
// (.fvecs / .bvecs / .npy, tools/vector_files.hpp), searched on one device by
// ferry::BinaryIndex; the results written as .ivecs / .npy files or JSON.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "ferry/binary_index.hpp"
#include "ferry/device.hpp"
#include "ferry/ops/binary_quantize.hpp"
#include "ferry/ops/hamming_topk.hpp"
#include "ferry/version.hpp"
#include "options.hpp"
#include "report.hpp"
#include "vector_files.hpp"

namespace ferry::cli {

namespace {

namespace fs = std::filesystem;
using vector_files::VectorElement;
using vector_files::VectorFormat;
using vector_files::VectorMatrix;

constexpr OptionSpec kOptions[] = {
    {.name = "--db", .kind = OptionKind::text, .metavar = "PATH",
     .help = "the database: .fvecs or .npy float32 / float16 vectors, or .bvecs or .npy uint8 "
             "packed binary codes (required)"},
    {.name = "--queries", .kind = OptionKind::text, .metavar = "PATH",
     .help = "the queries, of the same element type and width as the database (required)"},
    {.name = "--k", .kind = OptionKind::count, .metavar = "N",
     .help = "results per query", .fallback = "10", .min = 1, .max = kHammingMaxK},
    {.name = "--out", .kind = OptionKind::text, .metavar = "PATH",
     .help = "where the results go: .ivecs or .npy (ids, int32, -1 past the database's rows) or "
             ".json; without it, JSON on stdout"},
    {.name = "--distances", .kind = OptionKind::text, .metavar = "PATH",
     .help = "also write each result's distance: Hamming distances as int32 (.ivecs or .npy, -1 "
             "as padding), with --rescore scores as float32 (.fvecs or .npy, NaN as padding)"},
    {.name = "--json", .help = "JSON (per query its ids and distances or scores) on stdout, or "
                               "to --out whatever its extension"},
    {.name = "--rescore",
     .help = "float vectors: re-rank k * oversample Hamming candidates by the exact --metric "
             "against the float vectors (rescore op)"},
    {.name = "--oversample", .kind = OptionKind::count, .metavar = "N",
     .help = "with --rescore: candidates per result (k * N, lowered to at most 1024)",
     .fallback = "4", .min = 1, .max = kHammingMaxK},
    {.name = "--metric", .kind = OptionKind::choice, .metavar = "NAME",
     .help = "with --rescore: inner_product (larger is better) or l2 (squared, smaller is better)",
     .fallback = "inner_product", .choices = "inner_product,l2"},
    {.name = "--threshold", .kind = OptionKind::choice, .metavar = "NAME",
     .help = "float vectors: bit j of a code is x_j > t_j with t_j = 0 (zero) or the mean of "
             "dimension j over the database (mean)",
     .fallback = "zero", .choices = "zero,mean"},
    kBackendOption,
    kDeviceOption,
};

constexpr std::uint64_t kMaxIds = 0x7FFFFFFFull;   // ids written as int32

// ---- The inputs ----

// A database or query file, and how the index takes its rows.
struct Input {
  fs::path path;
  VectorMatrix matrix;
  bool codes = false;       // uint8 rows: packed codes, used as they are
  std::uint32_t dims = 0;   // the index's: float dimensions, or code bits
  ElementType type = ElementType::float32;  // float rows'

  std::string describe() const {
    return codes ? std::to_string(dims) + "-bit codes"
                 : std::to_string(dims) + "-dimensional " +
                       std::string(vector_files::to_string(matrix.element())) + " vectors";
  }
};

Status bad_file(const fs::path& path, const std::string& what) {
  return Status(ErrorCode::invalid_argument, path.string() + ": " + what);
}

Result<Input> read_input(const fs::path& path) {
  Input input{path, {}};
  FERRY_ASSIGN_OR_RETURN(input.matrix, vector_files::read_vectors(path));
  const VectorMatrix& m = input.matrix;
  if (m.rows() == 0) return bad_file(path, "no rows (shape (0, " + std::to_string(m.dims()) + "))");
  switch (m.element()) {
    case VectorElement::float32:
    case VectorElement::float16:
      if (m.dims() > kBinaryIndexMaxDims) {
        return bad_file(path, std::to_string(m.dims()) + " dimensions; at most " +
                                  std::to_string(kBinaryIndexMaxDims) + " are searched");
      }
      input.type = m.element() == VectorElement::float16 ? ElementType::float16
                                                         : ElementType::float32;
      input.dims = static_cast<std::uint32_t>(m.dims());
      return input;
    case VectorElement::uint8:
      if (m.dims() % 8 != 0 || m.dims() * 8 > kHammingMaxCodeBits) {
        return bad_file(path, "rows of " + std::to_string(m.dims()) +
                                  " bytes: uint8 rows are packed binary codes, a row of B bytes "
                                  "a B * 8-bit code, B a multiple of 8 from 8 to " +
                                  std::to_string(kHammingMaxCodeBits / 8));
      }
      input.codes = true;
      input.dims = static_cast<std::uint32_t>(m.dims() * 8);
      return input;
    default:
      return bad_file(path, std::string(vector_files::to_string(m.element())) +
                                " elements; searched are float32 or float16 vectors (.fvecs, "
                                ".npy) and uint8 packed codes (.bvecs, .npy)");
  }
}

// Queries searchable in the database's index, or what differs.
Status check_match(const Input& db, const Input& queries) {
  if (db.codes != queries.codes || db.matrix.element() != queries.matrix.element() ||
      db.dims != queries.dims) {
    return bad_file(queries.path, queries.describe() + ", the database " + db.path.string() +
                                      " holds " + db.describe());
  }
  return ok_status();
}

// ---- The search ----

struct Found {
  SearchResults results;  // all queries
  std::uint32_t oversample = 1;
  double add_seconds = 0, search_seconds = 0;
};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Result<Found> search(const Device& device, const Input& db, const Input& queries,
                     const Options& options) {
  const bool rescore = options.flag("--rescore");
  BinaryIndexOptions index_options;
  index_options.dims = db.dims;
  index_options.metric = options.text("--metric") == "l2" ? IndexMetric::l2
                                                          : IndexMetric::inner_product;
  index_options.input_type = db.codes ? ElementType::float32 : db.type;  // codes: unused
  index_options.threshold = !db.codes && options.text("--threshold") == "mean"
                                ? IndexThreshold::first_add_mean
                                : IndexThreshold::zero;
  index_options.keep = rescore ? KeptVectors::float32 : KeptVectors::none;
  // Codes past half the device memory (kept vectors past a quarter) stay in host memory and
  // are streamed: a database larger than the device is still searched (placement never changes
  // results).
  const std::uint64_t device_memory = device.info().device_memory_bytes;
  index_options.memory.code_budget_bytes = device_memory / 2;
  index_options.memory.vector_budget_bytes = device_memory / 4;
  FERRY_ASSIGN_OR_RETURN(BinaryIndex index, BinaryIndex::create(device, index_options));

  Found found;
  const std::uint32_t k = static_cast<std::uint32_t>(options.number("--k"));
  // k * oversample candidates, at most hamming_topk's largest k.
  found.oversample = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(options.number("--oversample"), kHammingMaxK / k));
  const SearchParams params{.k = k, .oversample = found.oversample, .rescore = rescore};

  const auto added = Clock::now();
  if (db.codes) {
    // Packed codes as they are: a row of B bytes (B a multiple of 8) is the index's code row.
    FERRY_RETURN_IF_ERROR(index.add_codes(db.matrix.bytes(), db.matrix.rows())
                              .status()
                              .with_context("adding the database's codes"));
  } else {
    // One add: the mean threshold is that of the whole database.
    FERRY_RETURN_IF_ERROR(index.add(db.matrix.bytes(), db.matrix.rows())
                              .status()
                              .with_context("adding the database"));
  }
  found.add_seconds = since(added);

  const auto count = static_cast<std::uint32_t>(queries.matrix.rows());  // checked by run()
  const auto searched = Clock::now();
  FERRY_ASSIGN_OR_RETURN(found.results,
                         queries.codes ? index.search_codes(queries.matrix.bytes(), count, params)
                                       : index.search(queries.matrix.bytes(), count, params));
  found.search_seconds = since(searched);
  return found;
}

// ---- The outputs ----

enum class OutputKind : std::uint8_t { ids, json };

bool is_json_path(const std::string& path) {
  std::string extension = fs::path(path).extension().string();
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension == ".json";
}

// --out's and --distances's formats, or a usage error's message.
std::string check_outputs(const Options& options) {
  const bool rescore = options.flag("--rescore");
  if (options.given("--out") && !options.flag("--json") && !is_json_path(options.text("--out"))) {
    const std::string path = options.text("--out");
    Result<VectorFormat> format = vector_files::format_of(path);
    if (!format.ok() || (*format != VectorFormat::ivecs && *format != VectorFormat::npy))
      return "--out " + path + ": ids are written as .ivecs or .npy (int32), JSON as .json";
  }
  if (options.given("--distances")) {
    const std::string path = options.text("--distances");
    if (options.flag("--json") || !options.given("--out") || is_json_path(options.text("--out")))
      return "--distances " + path + ": goes with ids in a file (--out .ivecs or .npy); JSON "
             "holds the distances already";
    Result<VectorFormat> format = vector_files::format_of(path);
    const VectorFormat want = rescore ? VectorFormat::fvecs : VectorFormat::ivecs;
    if (!format.ok() || (*format != want && *format != VectorFormat::npy)) {
      return "--distances " + path + (rescore ? ": scores are float32, written as .fvecs or .npy"
                                              : ": Hamming distances are int32, written as .ivecs "
                                                "or .npy");
    }
  }
  for (const char* name : {"--out", "--distances"}) {
    if (!options.given(name)) continue;
    const std::string path = options.text(name);
    if (const std::string why = unwritable(path); !why.empty())
      return std::string(name) + " " + path + ": " + why;
  }
  return {};
}

std::int32_t id32(std::uint64_t id) {
  return id == kBinaryIndexNoId ? -1 : static_cast<std::int32_t>(id);
}

Status write_files(const Options& options, const SearchResults& results, bool rescore) {
  const std::uint64_t count = std::uint64_t{results.queries} * results.k;
  std::vector<std::int32_t> ids(count);
  std::transform(results.ids.begin(), results.ids.end(), ids.begin(), id32);
  FERRY_RETURN_IF_ERROR(vector_files::write_vectors(
      options.text("--out"), {VectorElement::int32, results.queries, results.k,
                              std::as_bytes(std::span(ids))}));
  if (!options.given("--distances")) return ok_status();
  const std::string path = options.text("--distances");
  if (rescore) {
    return vector_files::write_vectors(path, {VectorElement::float32, results.queries, results.k,
                                              std::as_bytes(std::span(results.scores))});
  }
  // Hamming distances (0 to 4096, exact as float), -1 where the id is padding.
  std::vector<std::int32_t> distances(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    distances[i] = results.ids[i] == kBinaryIndexNoId
                       ? -1
                       : static_cast<std::int32_t>(results.scores[i]);
  }
  return vector_files::write_vectors(path, {VectorElement::int32, results.queries, results.k,
                                            std::as_bytes(std::span(distances))});
}

// The shortest text that reads back as the same float; null for NaN (JSON has no NaN).
std::string json_number(float value) {
  if (value != value) return "null";
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : "null";
}

struct RunInfo {
  std::string command_line;
  std::string device;
  const Input* db = nullptr;
  const Input* queries = nullptr;
  const Found* found = nullptr;
};

void input_json(std::ostream& out, const char* key, const Input& input) {
  out << "  " << json_quote(key) << ": {\"path\": " << json_quote(input.path.string())
      << ", \"rows\": " << input.matrix.rows() << ", \"dims\": " << input.matrix.dims()
      << ", \"element\": " << json_quote(vector_files::to_string(input.matrix.element()))
      << "},\n";
}

// Per query its results, best first (fewer than k when the database has fewer rows).
void write_json(std::ostream& out, const Options& options, const RunInfo& run) {
  const bool rescore = options.flag("--rescore");
  const SearchResults& results = run.found->results;
  out << "{\n  \"tool\": \"ferry search\",\n  \"ferry_version\": \"" FERRY_VERSION_STRING "\",\n"
      << "  \"command\": " << json_quote(run.command_line) << ",\n"
      << "  \"device\": " << json_quote(run.device) << ",\n";
  input_json(out, "database", *run.db);
  input_json(out, "queries", *run.queries);
  const std::uint64_t code_bits =
      run.db->codes ? run.db->dims : binary_code_bytes(run.db->dims) * 8;
  out << "  \"code_bits\": " << code_bits << ",\n  \"k\": " << results.k << ",\n";
  if (!run.db->codes)
    out << "  \"threshold\": " << json_quote(options.text("--threshold")) << ",\n";
  if (rescore) {
    out << "  \"rescore\": {\"metric\": " << json_quote(options.text("--metric"))
        << ", \"oversample\": " << run.found->oversample << "},\n";
  }
  out << "  \"add_seconds\": " << run.found->add_seconds
      << ",\n  \"search_seconds\": " << run.found->search_seconds << ",\n  \"results\": [";
  const char* values = rescore ? "scores" : "distances";
  for (std::uint32_t q = 0; q < results.queries; ++q) {
    std::string ids, scores;
    for (std::uint32_t i = 0; i < results.k; ++i) {
      const std::uint64_t at = std::uint64_t{q} * results.k + i;
      if (results.ids[at] == kBinaryIndexNoId) break;
      const char* comma = i == 0 ? "" : ", ";
      ids.append(comma).append(std::to_string(results.ids[at]));
      scores.append(comma).append(
          rescore ? json_number(results.scores[at])
                  : std::to_string(static_cast<std::uint32_t>(results.scores[at])));
    }
    out << (q == 0 ? "\n" : ",\n") << "    {\"ids\": [" << ids << "], \"" << values << "\": ["
        << scores << "]}";
  }
  out << "\n  ]\n}\n";
}

Status write_json_file(const std::string& path, const Options& options, const RunInfo& run) {
  std::ofstream file(path);
  if (file) write_json(file, options, run);
  errno = 0;
  file.close();
  if (!file) {
    const int error = errno;
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) std::remove(path.c_str());
    return Status(ErrorCode::failed_precondition,
                  path + ": cannot write: " + (error != 0 ? std::strerror(error) : "write failed"));
  }
  return ok_status();
}

int run(const Options& options, const std::string& command_line) {
  for (const char* required : {"--db", "--queries"}) {
    if (!options.given(required))
      return usage_error(std::string("search: ") + required + " PATH is required");
  }
  if (const std::string why = check_outputs(options); !why.empty())
    return usage_error("search: " + why);
  const bool rescore = options.flag("--rescore");

  Result<Input> db = read_input(options.text("--db"));
  if (!db.ok()) return library_error(db.status(), "search: reading the database");
  Result<Input> queries = read_input(options.text("--queries"));
  if (!queries.ok()) return library_error(queries.status(), "search: reading the queries");
  if (Status match = check_match(*db, *queries); !match.ok())
    return library_error(match, "search: the queries do not match the database");
  if (queries->matrix.rows() > std::numeric_limits<std::uint32_t>::max()) {
    return library_error(bad_file(queries->path, std::to_string(queries->matrix.rows()) +
                                                     " rows; at most 2^32 - 1 queries"),
                         "search");
  }
  if (db->matrix.rows() > kMaxIds) {
    return library_error(bad_file(db->path, std::to_string(db->matrix.rows()) +
                                                " rows; ids are int32, so at most 2^31 - 1 rows"),
                         "search");
  }
  if (db->codes && rescore) {
    return library_error(bad_file(db->path, "packed codes; --rescore needs float vectors to "
                                            "rescore against"),
                         "search");
  }
  if (db->codes && options.given("--threshold")) {
    return library_error(bad_file(db->path, "packed codes; --threshold applies to float vectors"),
                         "search");
  }

  const std::string backend = options.text("--backend");
  const auto index = static_cast<int>(options.number("--device"));
  Result<Device> device = Device::open(backend, index, device_options());
  if (!device.ok())
    return library_error(device.status(),
                         "opening " + backend + " device " + std::to_string(index));
  const DeviceInfo& info = device->info();
  const std::string device_name = std::string(to_string(info.backend)) + ":" +
                                  std::to_string(info.index) + " " + info.name;

  Result<Found> found = search(*device, *db, *queries, options);
  if (!found.ok()) return library_error(found.status(), "search");
  const std::uint64_t validation_messages = device->validation_message_count();
  if (Status closed = device->close(std::chrono::seconds(60)); !closed.ok())
    return library_error(closed, "closing the device");

  const RunInfo run{command_line, device_name, &*db, &*queries, &*found};
  const bool to_file = options.given("--out");
  if (to_file && (options.flag("--json") || is_json_path(options.text("--out")))) {
    if (Status written = write_json_file(options.text("--out"), options, run); !written.ok())
      return library_error(written, "search");
  } else if (to_file) {
    if (Status written = write_files(options, found->results, rescore); !written.ok())
      return library_error(written, "search");
  } else {
    write_json(std::cout, options, run);
  }
  if (to_file) {
    std::printf("ferry search: %llu queries, k %u, over %llu rows of %s on %s: add %.3f s, "
                "search %.3f s; results in %s\n",
                static_cast<unsigned long long>(queries->matrix.rows()), found->results.k,
                static_cast<unsigned long long>(db->matrix.rows()), db->describe().c_str(),
                device_name.c_str(), found->add_seconds, found->search_seconds,
                options.text("--out").c_str());
  }
  if (validation_messages != 0) {
    std::cerr << "ferry: error: " << validation_messages
              << " validation messages during the search\n";
    return kExitFailure;
  }
  return kExitOk;
}

constexpr const char* kAbout =
    "The k nearest database vectors of each query, by Hamming distance between binary codes\n"
    "(hamming_topk), optionally re-ranked by an exact metric (--rescore), on one device through\n"
    "ferry::BinaryIndex (docs/SEARCH.md). Results are the same on every backend.\n"
    "\n"
    "Inputs: float32 (.fvecs, .npy '<f4') or float16 (.npy '<f2') vectors are quantized on the\n"
    "device to one bit per dimension (binary_quantize: bit j = x_j > t_j, --threshold).\n"
    "uint8 rows (.bvecs, .npy '|u1') are packed codes used as they are: a row of B bytes is a\n"
    "B * 8-bit code (B a multiple of 8, up to 512), bit j being bit j % 8 of byte j / 8.\n"
    "\n"
    "Results: per query the k nearest rows in ascending Hamming distance, equal distances by\n"
    "ascending row; with --rescore the best k of the k * oversample nearest by the metric\n"
    "(equal scores by ascending row). Ids are database row numbers. Files: --out .ivecs or .npy\n"
    "holds a queries x k int32 matrix of ids; rows past the database (k above its rows) are -1.\n"
    "--distances adds the distances (int32) or scores (float32) in the same layout. JSON lists\n"
    "per query only the results there are.\n"
    "\n"
    "Example: ferry search --db base.bvecs --queries q.bvecs --k 10 --out result.ivecs\n";

}  // namespace

const Command kSearchCommand = {
    .name = "search",
    .summary = "the k nearest database vectors of each query, from .fvecs / .bvecs / .npy files, "
               "by binary codes (optionally rescored); results as .ivecs / .npy or JSON",
    .about = kAbout,
    .options = kOptions,
    .bench = false,
    .run = run,
};

}  // namespace ferry::cli
