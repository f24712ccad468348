// `ferry search` end to end: random vector files of awkward sizes written here, the program run on
// them (on the backend FERRY_SEARCH_BACKEND names, cpu by default), its output files or JSON read
// back and compared with a brute-force search computed here from the definitions (codes by
// comparing with the threshold, Hamming distances by popcount, ties by lower row, rescoring by an
// std::fma chain, padding -1 / NaN past the database's rows); bad files give an error naming the
// file and what is wrong, never a crash.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_program.hpp"
#include "common/temp_dir.hpp"
#include "vector_files.hpp"

namespace {

namespace fs = std::filesystem;
using ferry::vector_files::VectorElement;
using ferry::vector_files::VectorMatrix;
using ferry::vector_files::VectorView;

std::string backend() {
  const char* name = std::getenv("FERRY_SEARCH_BACKEND");
  return name != nullptr && name[0] != '\0' ? name : "cpu";
}

using ferry::test::Ran;
using ferry::test::slurp;

// Runs `ferry search ARGS --backend <backend>`, stdout and stderr captured.
Ran ferry_search(const ferry::test::TempDir& dir, const std::vector<std::string>& args) {
  const Ran ran = ferry::test::run_program(dir, "'" FERRY_PROGRAM "' search", args,
                                           " --backend " + backend());
  INFO("ferry search: stdout: ", ran.out, "\nstderr: ", ran.err);
  return ran;
}

// ---- Data ----

struct Floats {
  std::uint64_t rows = 0, dims = 0;
  std::vector<float> values;  // as float32 (the float16 files' values, converted exactly)
  std::vector<std::uint16_t> halves;  // the float16 file's bits, when float16
  const float* row(std::uint64_t r) const { return values.data() + r * dims; }
};

// Values in [-1, 1) with a few repeats of earlier rows (equal codes and scores: ties).
Floats random_floats(std::mt19937_64& rng, std::uint64_t rows, std::uint64_t dims) {
  Floats f{rows, dims, std::vector<float>(rows * dims), {}};
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& x : f.values) x = value(rng);
  for (std::uint64_t r = 3; r < rows; r += 5)
    std::copy_n(f.row(rng() % r), dims, f.values.begin() + static_cast<std::ptrdiff_t>(r * dims));
  return f;
}

// float16 from its bits, by the definition (normal, subnormal, zero; no inf/NaN made here).
float half_to_float(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                                        : std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
  return h & 0x8000 ? -magnitude : magnitude;
}

Floats random_halves(std::mt19937_64& rng, std::uint64_t rows, std::uint64_t dims) {
  Floats f{rows, dims, std::vector<float>(rows * dims), std::vector<std::uint16_t>(rows * dims)};
  for (std::uint64_t i = 0; i < rows * dims; ++i) {
    // Exponents 0 (subnormals, zeros) to 16 (values up to 4).
    const auto bits = static_cast<std::uint16_t>(rng());
    f.halves[i] = static_cast<std::uint16_t>((bits & 0x83FF) | ((rng() % 17) << 10));
    f.values[i] = half_to_float(f.halves[i]);
  }
  return f;
}

struct Codes {
  std::uint64_t rows = 0, bytes = 0;
  std::vector<std::uint8_t> data;
  const std::uint8_t* row(std::uint64_t r) const { return data.data() + r * bytes; }
};

// Random codes whose bits past the first `live` bytes are zero (many equal distances), with a
// few repeated rows.
Codes random_codes(std::mt19937_64& rng, std::uint64_t rows, std::uint64_t bytes,
                   std::uint64_t live) {
  Codes c{rows, bytes, std::vector<std::uint8_t>(rows * bytes, 0)};
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t b = 0; b < live; ++b)
      c.data[r * bytes + b] = static_cast<std::uint8_t>(rng());
  for (std::uint64_t r = 2; r < rows; r += 7)
    std::memcpy(c.data.data() + r * bytes, c.row(rng() % r), bytes);
  return c;
}

// bit j = x_j > t_j, bit j of byte j / 8 at j % 8; padded to whole 64-bit words.
Codes quantize(const Floats& f, const std::vector<float>& thresholds) {
  const std::uint64_t bytes = (f.dims + 63) / 64 * 8;
  Codes c{f.rows, bytes, std::vector<std::uint8_t>(f.rows * bytes, 0)};
  for (std::uint64_t r = 0; r < f.rows; ++r)
    for (std::uint64_t j = 0; j < f.dims; ++j)
      if (f.row(r)[j] > thresholds[j])
        c.data[r * bytes + j / 8] |= static_cast<std::uint8_t>(1u << (j % 8));
  return c;
}

std::vector<float> zero_thresholds(const Floats& f) { return std::vector<float>(f.dims, 0.0f); }
std::vector<float> mean_thresholds(const Floats& f) {
  std::vector<float> t(f.dims);
  for (std::uint64_t j = 0; j < f.dims; ++j) {
    double sum = 0;
    for (std::uint64_t r = 0; r < f.rows; ++r) sum += static_cast<double>(f.row(r)[j]);
    t[j] = static_cast<float>(sum / static_cast<double>(f.rows));
  }
  return t;
}

// ---- Truth ----

struct Result {
  std::vector<std::int32_t> ids;  // queries x k, -1 past the database
  std::vector<float> values;      // Hamming distances or scores; -1 / NaN past the database
};

// The k nearest by Hamming distance, equal distances by lower row.
Result hamming_truth(const Codes& db, const Codes& queries, std::uint32_t k) {
  Result truth;
  for (std::uint64_t q = 0; q < queries.rows; ++q) {
    std::vector<std::pair<int, std::int32_t>> all;
    for (std::uint64_t r = 0; r < db.rows; ++r) {
      int d = 0;
      for (std::uint64_t b = 0; b < db.bytes; b += 8) {  // code rows are whole 64-bit words
        std::uint64_t x = 0, y = 0;
        std::memcpy(&x, db.row(r) + b, 8);
        std::memcpy(&y, queries.row(q) + b, 8);
        d += std::popcount(x ^ y);
      }
      all.emplace_back(d, static_cast<std::int32_t>(r));
    }
    std::sort(all.begin(), all.end());
    for (std::uint32_t i = 0; i < k; ++i) {
      truth.ids.push_back(i < all.size() ? all[i].second : -1);
      truth.values.push_back(i < all.size() ? static_cast<float>(all[i].first) : -1.0f);
    }
  }
  return truth;
}

// The best k of each query's Hamming candidates by the exact score (an fma chain in dimension
// order), equal scores by lower row.
Result rescore_truth(const Floats& db, const Floats& queries, const Result& candidates,
                     std::uint32_t candidates_per_query, std::uint32_t k, bool l2) {
  Result truth;
  for (std::uint64_t q = 0; q < queries.rows; ++q) {
    std::vector<std::pair<float, std::int32_t>> scored;
    for (std::uint32_t c = 0; c < candidates_per_query; ++c) {
      const std::int32_t id = candidates.ids[q * candidates_per_query + c];
      if (id < 0) continue;
      float s = 0.0f;
      for (std::uint64_t j = 0; j < db.dims; ++j) {
        const float x = db.row(static_cast<std::uint64_t>(id))[j], y = queries.row(q)[j];
        if (l2) {
          const float e = y - x;
          s = std::fma(e, e, s);
        } else {
          s = std::fma(y, x, s);
        }
      }
      scored.emplace_back(s, id);
    }
    std::sort(scored.begin(), scored.end(), [l2](const auto& a, const auto& b) {
      if (a.first != b.first) return l2 ? a.first < b.first : a.first > b.first;
      return a.second < b.second;
    });
    for (std::uint32_t i = 0; i < k; ++i) {
      truth.ids.push_back(i < scored.size() ? scored[i].second : -1);
      truth.values.push_back(i < scored.size() ? scored[i].first : std::nanf(""));
    }
  }
  return truth;
}

// ---- Files ----

void write_floats(const fs::path& path, const Floats& f) {
  const bool half = !f.halves.empty();
  const VectorView view{half ? VectorElement::float16 : VectorElement::float32, f.rows, f.dims,
                        half ? std::as_bytes(std::span(f.halves))
                             : std::as_bytes(std::span(f.values))};
  REQUIRE(ferry::vector_files::write_vectors(path, view).ok());
}

void write_codes(const fs::path& path, const Codes& c) {
  REQUIRE(ferry::vector_files::write_vectors(
                  path, {VectorElement::uint8, c.rows, c.bytes, std::as_bytes(std::span(c.data))})
              .ok());
}

template <typename T>
std::vector<T> read_matrix(const fs::path& path, VectorElement element, std::uint64_t rows,
                           std::uint64_t cols) {
  auto matrix = ferry::vector_files::read_vectors(path);
  REQUIRE_MESSAGE(matrix.ok(), matrix.status().message());
  REQUIRE(matrix->element() == element);
  REQUIRE(matrix->rows() == rows);
  REQUIRE(matrix->dims() == cols);
  std::vector<T> values(rows * cols);
  std::memcpy(values.data(), matrix->bytes().data(), values.size() * sizeof(T));
  return values;
}

// Float values equal bit for bit (NaN padding included).
void check_scores(const std::vector<float>& actual, const std::vector<float>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO("entry ", i, ": ", actual[i], " expected ", expected[i]);
    CHECK(std::bit_cast<std::uint32_t>(actual[i]) == std::bit_cast<std::uint32_t>(expected[i]));
  }
}

// The results of `ferry search` JSON: per query "ids" and "distances" / "scores" lists, in order.
Result parse_json(const std::string& text, const char* values_key, std::uint32_t k) {
  Result parsed;
  const auto numbers = [&text](std::size_t at) {
    std::vector<std::string> items;
    const std::size_t end = text.find(']', at);
    std::stringstream list(text.substr(at, end - at));
    for (std::string item; std::getline(list, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      if (!item.empty()) items.push_back(item);
    }
    return items;
  };
  const std::string ids_key = "\"ids\": [", values = "\"" + std::string(values_key) + "\": [";
  for (std::size_t at = text.find(ids_key); at != std::string::npos;
       at = text.find(ids_key, at + 1)) {
    const std::vector<std::string> ids = numbers(at + ids_key.size());
    const std::size_t v = text.find(values, at);
    REQUIRE(v != std::string::npos);
    const std::vector<std::string> scores = numbers(v + values.size());
    REQUIRE(ids.size() == scores.size());
    REQUIRE(ids.size() <= k);
    for (std::uint32_t i = 0; i < k; ++i) {  // padded as the files are, to compare alike
      parsed.ids.push_back(i < ids.size() ? std::stoi(ids[i]) : -1);
      const float padding = std::string(values_key) == "scores" ? std::nanf("") : -1.0f;
      parsed.values.push_back(i >= ids.size()        ? padding
                              : scores[i] == "null" ? std::nanf("")
                                                    : std::strtof(scores[i].c_str(), nullptr));
    }
  }
  return parsed;
}

}  // namespace

TEST_CASE("search: packed codes (.bvecs), ids and distances as .ivecs") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Codes db = random_codes(rng, 1001, 32, 3), queries = random_codes(rng, 37, 32, 3);
  write_codes(dir / "base.bvecs", db);
  write_codes(dir / "q.bvecs", queries);
  const std::uint32_t k = 13;
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.bvecs").string(), "--queries",
                                     (dir / "q.bvecs").string(), "--k", "13", "--out",
                                     (dir / "ids.ivecs").string(), "--distances",
                                     (dir / "d.ivecs").string()});
  REQUIRE(ran.exit == 0);
  const Result truth = hamming_truth(db, queries, k);
  CHECK(read_matrix<std::int32_t>(dir / "ids.ivecs", VectorElement::int32, 37, k) == truth.ids);
  const auto distances = read_matrix<std::int32_t>(dir / "d.ivecs", VectorElement::int32, 37, k);
  CHECK(std::vector<float>(distances.begin(), distances.end()) == truth.values);
}

TEST_CASE("search: k above the database's rows, 64-bit codes from .npy, padding -1") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Codes db = random_codes(rng, 5, 8, 1), queries = random_codes(rng, 11, 8, 1);
  write_codes(dir / "base.npy", db);
  write_codes(dir / "q.npy", queries);
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.npy").string(), "--queries",
                                     (dir / "q.npy").string(), "--k", "7", "--out",
                                     (dir / "ids.npy").string(), "--distances",
                                     (dir / "d.npy").string()});
  REQUIRE(ran.exit == 0);
  const Result truth = hamming_truth(db, queries, 7);
  CHECK(read_matrix<std::int32_t>(dir / "ids.npy", VectorElement::int32, 11, 7) == truth.ids);
  const auto distances = read_matrix<std::int32_t>(dir / "d.npy", VectorElement::int32, 11, 7);
  CHECK(std::vector<float>(distances.begin(), distances.end()) == truth.values);
  CHECK(truth.ids[5] == -1);  // the test can see padding
}

TEST_CASE("search: float32 vectors quantized at zero, JSON on stdout") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Floats db = random_floats(rng, 777, 100), queries = random_floats(rng, 23, 100);
  write_floats(dir / "base.fvecs", db);
  write_floats(dir / "q.fvecs", queries);
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.fvecs").string(), "--queries",
                                     (dir / "q.fvecs").string(), "--k", "9"});
  REQUIRE(ran.exit == 0);
  const Result truth =
      hamming_truth(quantize(db, zero_thresholds(db)), quantize(queries, zero_thresholds(db)), 9);
  const Result parsed = parse_json(ran.out, "distances", 9);
  CHECK(parsed.ids == truth.ids);
  CHECK(parsed.values == truth.values);
  CHECK(ran.out.find("\"tool\": \"ferry search\"") != std::string::npos);
  CHECK(ran.out.find("\"device\": \"" + backend() + ":") != std::string::npos);  // ran there
}

TEST_CASE("search: float32 .npy with the database's mean as threshold") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  Floats db = random_floats(rng, 301, 37), queries = random_floats(rng, 19, 37);
  for (float& x : db.values) x += 0.25f;  // a mean away from zero
  write_floats(dir / "base.npy", db);
  write_floats(dir / "q.npy", queries);
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.npy").string(), "--queries",
                                     (dir / "q.npy").string(), "--k", "6", "--threshold", "mean",
                                     "--out", (dir / "ids.ivecs").string()});
  REQUIRE(ran.exit == 0);
  const std::vector<float> t = mean_thresholds(db);
  const Result truth = hamming_truth(quantize(db, t), quantize(queries, t), 6);
  CHECK(read_matrix<std::int32_t>(dir / "ids.ivecs", VectorElement::int32, 19, 6) == truth.ids);
}

TEST_CASE("search: --rescore inner_product, float32, scores as .fvecs") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Floats db = random_floats(rng, 333, 70), queries = random_floats(rng, 17, 70);
  write_floats(dir / "base.fvecs", db);
  write_floats(dir / "q.fvecs", queries);
  const std::uint32_t k = 5, oversample = 3;
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.fvecs").string(), "--queries",
                                     (dir / "q.fvecs").string(), "--k", "5", "--rescore",
                                     "--oversample", "3", "--out", (dir / "ids.ivecs").string(),
                                     "--distances", (dir / "s.fvecs").string()});
  REQUIRE(ran.exit == 0);
  const auto t = zero_thresholds(db);
  const Result candidates = hamming_truth(quantize(db, t), quantize(queries, t), k * oversample);
  const Result truth = rescore_truth(db, queries, candidates, k * oversample, k, false);
  CHECK(read_matrix<std::int32_t>(dir / "ids.ivecs", VectorElement::int32, 17, k) == truth.ids);
  check_scores(read_matrix<float>(dir / "s.fvecs", VectorElement::float32, 17, k), truth.values);
}

TEST_CASE("search: --rescore l2, float16 .npy, k above the rows, JSON file") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Floats db = random_halves(rng, 6, 65), queries = random_halves(rng, 10, 65);
  write_floats(dir / "base.npy", db);
  write_floats(dir / "q.npy", queries);
  const std::uint32_t k = 9, oversample = 4;  // the default
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.npy").string(), "--queries",
                                     (dir / "q.npy").string(), "--k", "9", "--rescore", "--metric",
                                     "l2", "--out", (dir / "out.json").string()});
  REQUIRE(ran.exit == 0);
  const auto t = zero_thresholds(db);
  const Result candidates = hamming_truth(quantize(db, t), quantize(queries, t), k * oversample);
  const Result truth = rescore_truth(db, queries, candidates, k * oversample, k, true);
  const Result parsed = parse_json(slurp(dir / "out.json"), "scores", k);
  CHECK(parsed.ids == truth.ids);
  check_scores(parsed.values, truth.values);
  CHECK(ran.out.find("out.json") != std::string::npos);  // the summary line
}

TEST_CASE("search: 4096-bit codes (the longest), thousands of rows and queries") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Codes db = random_codes(rng, 4099, 512, 512), queries = random_codes(rng, 2050, 512, 2);
  write_codes(dir / "base.bvecs", db);
  write_codes(dir / "q.bvecs", queries);
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.bvecs").string(), "--queries",
                                     (dir / "q.bvecs").string(), "--k", "3", "--out",
                                     (dir / "ids.ivecs").string(), "--distances",
                                     (dir / "d.npy").string()});
  REQUIRE(ran.exit == 0);
  const Result truth = hamming_truth(db, queries, 3);
  CHECK(read_matrix<std::int32_t>(dir / "ids.ivecs", VectorElement::int32, 2050, 3) == truth.ids);
  const auto distances = read_matrix<std::int32_t>(dir / "d.npy", VectorElement::int32, 2050, 3);
  CHECK(std::vector<float>(distances.begin(), distances.end()) == truth.values);
}

TEST_CASE("search: --rescore with k * oversample above 1024 lowers the oversampling") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Floats db = random_floats(rng, 1100, 33), queries = random_floats(rng, 3, 33);
  write_floats(dir / "base.fvecs", db);
  write_floats(dir / "q.fvecs", queries);
  const std::uint32_t k = 300, oversample = 3;  // --oversample 4 lowered to floor(1024 / 300)
  const Ran ran = ferry_search(dir, {"--db", (dir / "base.fvecs").string(), "--queries",
                                     (dir / "q.fvecs").string(), "--k", "300", "--rescore",
                                     "--json"});
  REQUIRE(ran.exit == 0);
  const auto t = zero_thresholds(db);
  const Result candidates = hamming_truth(quantize(db, t), quantize(queries, t), k * oversample);
  const Result truth = rescore_truth(db, queries, candidates, k * oversample, k, false);
  const Result parsed = parse_json(ran.out, "scores", k);
  CHECK(parsed.ids == truth.ids);
  check_scores(parsed.values, truth.values);
  CHECK(ran.out.find("\"oversample\": 3") != std::string::npos);
}

// ---- Errors ----

// Exits with `exit`, and stderr holds every one of `expected`, never a crash.
void check_error(const Ran& ran, int exit, const std::vector<std::string>& expected) {
  INFO("stderr: ", ran.err);
  CHECK(ran.exit == exit);
  for (const std::string& text : expected) CHECK(ran.err.find(text) != std::string::npos);
  CHECK(ran.err.find("(at ") == std::string::npos);  // no source location
}

TEST_CASE("search: bad files name the file and what is wrong") {
  ferry::test::TempDir dir("ferry-search");
  std::mt19937_64 rng(std::random_device{}());
  const Floats db = random_floats(rng, 50, 24), queries = random_floats(rng, 4, 24);
  write_floats(dir / "base.fvecs", db);
  write_floats(dir / "q.fvecs", queries);
  const std::string base = (dir / "base.fvecs").string(), q = (dir / "q.fvecs").string();
  const auto search = [&](const std::string& db_path, const std::string& q_path,
                          std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--db", db_path, "--queries", q_path};
    args.insert(args.end(), more.begin(), more.end());
    return ferry_search(dir, args);
  };

  SUBCASE("truncated") {
    const std::string cut = (dir / "cut.fvecs").string();
    fs::copy_file(base, cut);
    fs::resize_file(cut, fs::file_size(cut) - 7);
    check_error(search(cut, q), 1, {"reading the database", cut, "truncated: row 49"});
  }
  SUBCASE("queries of another dimension") {
    const std::string other = (dir / "q25.fvecs").string();
    write_floats(other, random_floats(rng, 4, 25));
    check_error(search(base, other), 1,
                {other, "25-dimensional float32 vectors", base, "24-dimensional"});
  }
  SUBCASE("float32 database, float16 queries") {
    const std::string half = (dir / "q.npy").string();
    write_floats(half, random_halves(rng, 3, 24));
    check_error(search(base, half), 1, {half, "float16", base});
  }
  SUBCASE("codes against float vectors") {
    const std::string codes = (dir / "q.bvecs").string();
    write_codes(codes, random_codes(rng, 3, 8, 8));
    check_error(search(base, codes), 1, {codes, "64-bit codes", base});
  }
  SUBCASE("wrong dtype") {
    const std::string ints = (dir / "base.npy").string();
    std::vector<std::int32_t> values(12, 7);
    REQUIRE(ferry::vector_files::write_vectors(
                ints, {VectorElement::int32, 3, 4, std::as_bytes(std::span(values))})
                .ok());
    check_error(search(ints, q), 1, {ints, "int32 elements"});
    const std::string ivecs = (dir / "base.ivecs").string();
    REQUIRE(ferry::vector_files::write_vectors(
                ivecs, {VectorElement::int32, 3, 4, std::as_bytes(std::span(values))})
                .ok());
    check_error(search(ivecs, q), 1, {ivecs, "int32 elements"});
    check_error(search((dir / "missing.fvecs").string(), q), 1, {"missing.fvecs", "not_found", "no such file"});
  }
  SUBCASE("code rows that are not whole 64-bit words") {
    const std::string odd = (dir / "odd.bvecs").string();
    write_codes(odd, random_codes(rng, 9, 20, 20));
    check_error(search(odd, odd), 1, {odd, "rows of 20 bytes"});
  }
  SUBCASE("empty files") {
    const std::string empty = (dir / "empty.bvecs").string();
    std::ofstream(empty).close();
    check_error(search(empty, q), 1, {empty, "empty"});
    const std::string none = (dir / "none.npy").string();
    REQUIRE(ferry::vector_files::write_vectors(none, {VectorElement::float32, 0, 24, {}}).ok());
    check_error(search(base, none), 1, {"reading the queries", none, "no rows"});
  }
  SUBCASE("not a vector file") {
    const std::string text = (dir / "base.txt").string();
    std::ofstream(text) << "1 2 3\n";
    check_error(search(text, q), 1, {text, "unknown extension '.txt'"});
  }
  SUBCASE("rescoring packed codes") {
    const std::string codes = (dir / "c.bvecs").string();
    write_codes(codes, random_codes(rng, 3, 8, 8));
    check_error(search(codes, codes, {"--rescore"}), 1, {codes, "--rescore needs float vectors"});
  }
  SUBCASE("usage") {
    check_error(ferry_search(dir, {"--queries", q}), 2, {"--db PATH is required"});
    check_error(search(base, q, {"--out", (dir / "ids.fvecs").string()}), 2,
                {"ids.fvecs", "ivecs or .npy"});
    check_error(search(base, q, {"--out", (dir / "ids.ivecs").string(), "--distances",
                                 (dir / "s.fvecs").string()}),
                2, {"s.fvecs", "Hamming distances are int32"});
    check_error(search(base, q, {"--k", "1025"}), 2, {"--k", "1 to 1024"});
    check_error(search(base, q, {"--out", (dir / "no-such-folder" / "ids.ivecs").string()}), 2,
                {"no-such-folder", "No such file or directory"});
    CHECK_FALSE(fs::exists(dir / "ids.ivecs"));  // nothing written by a refused command
  }
}
