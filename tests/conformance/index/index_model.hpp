// What the index conformance tests share: random rows and codes of awkward sizes with ties, and
// the index computed here by brute force from the definitions in ferry/binary_index.hpp (never
// with the library's code), for BinaryIndex (binary_index.cpp) and ShardedIndex
// (sharded_index.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "harness.hpp"

namespace index_test {

using ferry::BinaryIndex;
using ferry::BinaryIndexMemory;
using ferry::BinaryIndexOptions;
using ferry::ElementType;
using ferry::IndexMetric;
using ferry::IndexThreshold;
using ferry::KeptVectors;
using ferry::SearchParams;
using ferry::SearchResults;
using ferry_test::BackendUnderTest;

// ---- inputs -------------------------------------------------------------------------------

// Rows of `type` as the index takes them (bytes) and as float32 values (what those bytes are).
struct Rows {
  std::vector<std::byte> bytes;
  std::vector<float> values;
  std::uint64_t count = 0;
};

// Random rows: normal values, some exact zeros, and some rows copies of earlier ones (ties).
inline Rows make_rows(std::mt19937_64& rng, std::uint64_t count, std::uint32_t dims, ElementType type) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Rows rows;
  rows.count = count;
  rows.values.resize(count * dims);
  for (std::uint64_t r = 0; r < count; ++r) {
    if (r > 0 && rng() % 8 == 0) {  // a duplicate of an earlier row
      const std::uint64_t from = rng() % r;
      std::copy_n(rows.values.begin() + static_cast<std::ptrdiff_t>(from * dims), dims,
                  rows.values.begin() + static_cast<std::ptrdiff_t>(r * dims));
      continue;
    }
    for (std::uint32_t j = 0; j < dims; ++j) {
      rows.values[r * dims + j] = rng() % 16 == 0 ? 0.0f : normal(rng) + 0.25f * (j % 3);
    }
  }
  const std::size_t element = ferry::element_size(type);
  rows.bytes.resize(rows.values.size() * element);
  for (std::size_t i = 0; i < rows.values.size(); ++i) {
    if (type == ElementType::float32) {
      std::memcpy(rows.bytes.data() + i * 4, &rows.values[i], 4);
      continue;
    }
    std::uint16_t raw = 0;
    if (type == ElementType::float16) {
      const auto half = static_cast<_Float16>(rows.values[i]);
      raw = std::bit_cast<std::uint16_t>(half);
      rows.values[i] = static_cast<float>(half);  // what the bytes hold
    } else {
      raw = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(rows.values[i]) >> 16);
      rows.values[i] = std::bit_cast<float>(std::uint32_t{raw} << 16);
    }
    std::memcpy(rows.bytes.data() + i * 2, &raw, 2);
  }
  return rows;
}

// ---- the model ------------------------------------------------------------------------------

// The index as the header defines it, computed on the host from the rows added.
class Model {
 public:
  explicit Model(const BinaryIndexOptions& options) : o_(options) {
    if (o_.threshold == IndexThreshold::zero) thresholds_.assign(o_.dims, 0.0f);
    if (o_.threshold == IndexThreshold::given) thresholds_ = o_.thresholds;
    scale_ = o_.int8_scale;
  }

  void add(const Rows& rows) {
    std::vector<float> values = rows.values;
    for (std::uint64_t r = 0; r < rows.count; ++r) normalize(row(values, r));
    if (thresholds_.empty()) {  // first_add_mean: the means of the first add, in double
      for (std::uint32_t j = 0; j < o_.dims; ++j) {
        double sum = 0.0;
        for (std::uint64_t r = 0; r < rows.count; ++r) sum += values[r * o_.dims + j];
        thresholds_.push_back(static_cast<float>(sum / static_cast<double>(rows.count)));
      }
    }
    if (o_.keep == KeptVectors::int8 && scale_ == 0.0f) {
      double max_abs = 0.0;
      for (const float x : values) {
        if (std::isfinite(x)) max_abs = std::max(max_abs, std::fabs(double{x}));
      }
      scale_ = max_abs > 0.0 ? static_cast<float>(127.0 / max_abs) : 1.0f;
    }
    vectors_.insert(vectors_.end(), values.begin(), values.end());
    rows_ += rows.count;
  }

  std::uint64_t rows() const { return rows_; }

  // The expected results of searching `queries`.
  SearchResults search(const Rows& queries, const SearchParams& params) const {
    SearchResults out;
    out.queries = static_cast<std::uint32_t>(queries.count);
    out.k = params.k;
    out.ids.assign(queries.count * params.k, ferry::kBinaryIndexNoId);
    out.scores.assign(out.ids.size(), std::numeric_limits<float>::quiet_NaN());
    const std::uint32_t candidates = params.rescore ? params.k * params.oversample : params.k;
    std::vector<float> query_values = queries.values;
    for (std::uint64_t q = 0; q < queries.count; ++q) {
      std::span<float> query = row(query_values, q);
      normalize(query);
      // Every row's Hamming distance, sorted by (distance, id).
      std::vector<std::pair<std::uint32_t, std::uint64_t>> all;
      for (std::uint64_t r = 0; r < rows_; ++r) {
        std::uint32_t distance = 0;
        for (std::uint32_t j = 0; j < o_.dims; ++j) {
          distance += (query[j] > thresholds_[j]) != (vectors_[r * o_.dims + j] > thresholds_[j]);
        }
        all.emplace_back(distance, r);
      }
      std::sort(all.begin(), all.end());
      all.resize(std::min<std::size_t>(all.size(), candidates));
      const std::uint64_t at = q * params.k;
      if (!params.rescore) {
        for (std::size_t i = 0; i < all.size(); ++i) {
          out.ids[at + i] = all[i].second;
          out.scores[at + i] = static_cast<float>(all[i].first);
        }
        continue;
      }
      // Rescored: (score, id), better first.
      std::vector<std::pair<double, std::uint64_t>> scored;
      for (const auto& [distance, id] : all) scored.emplace_back(score(query, id), id);
      const bool larger_first = o_.metric != IndexMetric::l2;
      std::sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return larger_first ? a.first > b.first : a.first < b.first;
        return a.second < b.second;
      });
      for (std::size_t i = 0; i < std::min<std::size_t>(scored.size(), params.k); ++i) {
        out.ids[at + i] = scored[i].second;
        out.scores[at + i] =
            o_.keep == KeptVectors::int8
                ? static_cast<float>(scored[i].first / (double{scale_} * double{scale_}))
                : static_cast<float>(scored[i].first);
      }
    }
    return out;
  }

 private:
  std::span<float> row(std::vector<float>& values, std::uint64_t r) const {
    return std::span(values).subspan(r * o_.dims, o_.dims);
  }

  void normalize(std::span<float> x) const {
    if (o_.metric != IndexMetric::cosine) return;
    double sum = 0.0;
    for (const float v : x) sum += double{v} * double{v};
    const double norm = std::sqrt(sum);
    if (norm == 0.0 || !std::isfinite(norm)) return;
    for (float& v : x) v = static_cast<float>(double{v} / norm);
  }

  std::int32_t to_int8(float x) const {
    const double q = std::round(double{x} * double{scale_});
    return static_cast<std::int32_t>(std::clamp(q, -127.0, 127.0));
  }

  // The exact score of `query` against row `id`: a float32 fma chain, or an exact int8 sum.
  double score(std::span<const float> query, std::uint64_t id) const {
    const float* x = vectors_.data() + id * o_.dims;
    const bool l2 = o_.metric == IndexMetric::l2;
    if (o_.keep == KeptVectors::int8) {
      std::int64_t s = 0;
      for (std::uint32_t j = 0; j < o_.dims; ++j) {
        const std::int32_t a = to_int8(query[j]), b = to_int8(x[j]);
        s += l2 ? (a - b) * (a - b) : a * b;
      }
      return static_cast<double>(s);
    }
    float s = 0.0f;
    for (std::uint32_t j = 0; j < o_.dims; ++j) {
      if (l2) {
        const float e = query[j] - x[j];
        s = std::fma(e, e, s);
      } else {
        s = std::fma(query[j], x[j], s);
      }
    }
    return s;
  }

  BinaryIndexOptions o_;
  std::vector<float> thresholds_;
  float scale_ = 0.0f;
  std::vector<float> vectors_;  // normalized for cosine
  std::uint64_t rows_ = 0;
};

// ---- checks ---------------------------------------------------------------------------------

inline bool same_score(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

inline void check_results(const SearchResults& got, const SearchResults& expected, const char* what) {
  INFO(what);
  REQUIRE(got.queries == expected.queries);
  REQUIRE(got.k == expected.k);
  REQUIRE(got.ids.size() == expected.ids.size());
  REQUIRE(got.scores.size() == expected.scores.size());
  for (std::size_t i = 0; i < expected.ids.size(); ++i) {
    if (got.ids[i] == expected.ids[i] && same_score(got.scores[i], expected.scores[i])) continue;
    FAIL_CHECK("query " << i / expected.k << " rank " << i % expected.k << ": got (" << got.ids[i]
                        << ", " << got.scores[i] << "), expected (" << expected.ids[i] << ", "
                        << expected.scores[i] << ")");
    return;
  }
}

// A device budget small enough that most codes stream from the host and most kept vectors are
// read in place, in many small segments and steps.
inline BinaryIndexMemory tiny_memory() {
  BinaryIndexMemory memory;
  memory.code_budget_bytes = 1 << 10;
  memory.vector_budget_bytes = 2 << 10;
  memory.device_segment_bytes = 2 << 10;
  memory.segment_bytes = 2 << 10;
  memory.staging_slab_bytes = 1 << 10;  // below a segment: host segments stream in chunks
  memory.staging_slabs = 2;
  return memory;
}

inline BinaryIndexOptions options_for(std::uint32_t dims, IndexMetric metric, IndexThreshold threshold,
                               KeptVectors keep, ElementType type, std::mt19937_64& rng) {
  BinaryIndexOptions o;
  o.dims = dims;
  o.metric = metric;
  o.threshold = threshold;
  o.keep = keep;
  o.input_type = type;
  if (threshold == IndexThreshold::given) {
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (std::uint32_t j = 0; j < dims; ++j) o.thresholds.push_back(normal(rng));
  }
  return o;
}

struct Case {
  std::uint32_t dims;
  IndexMetric metric;
  IndexThreshold threshold;
  KeptVectors keep;
  ElementType type;
  std::vector<std::uint64_t> adds;  // rows per add()
};

// Cases of a Hamming search without kept vectors: every metric and threshold kind, 16-bit
// inputs, one or several adds of awkward sizes.
inline std::vector<Case> hamming_cases() {
  return {
      {37, IndexMetric::inner_product, IndexThreshold::zero, KeptVectors::none,
       ElementType::float32, {1, 130, 4}},
      {64, IndexMetric::l2, IndexThreshold::first_add_mean, KeptVectors::none,
       ElementType::float32, {97, 300}},
      {200, IndexMetric::cosine, IndexThreshold::given, KeptVectors::none, ElementType::float16,
       {250, 3, 61}},
      {129, IndexMetric::cosine, IndexThreshold::first_add_mean, KeptVectors::none,
       ElementType::bfloat16, {333}},
  };
}

inline std::string describe(const Case& c) {
  return "dims " + std::to_string(c.dims) + ", metric " + std::string(ferry::to_string(c.metric)) +
         ", threshold " + std::string(ferry::to_string(c.threshold)) + ", keep " +
         std::string(ferry::to_string(c.keep)) + ", input " + std::string(ferry::to_string(c.type));
}

// Builds the index (a BinaryIndex or a ShardedIndex) and a model from the case's adds.
template <typename Index>
void build(BackendUnderTest& t, const Case& c, Index& index, Model& model) {
  for (const std::uint64_t count : c.adds) {
    const Rows rows = make_rows(t.rng, count, c.dims, c.type);
    const std::uint64_t first = REQUIRE_VALUE(index.add(rows.bytes, count));
    CHECK(first == model.rows());
    model.add(rows);
  }
  CHECK(index.size() == model.rows());
}

template <typename Index>
void check_searches(BackendUnderTest& t, const Case& c, const Index& index,
                    const Model& model, bool rescore) {
  const Rows queries = make_rows(t.rng, 7, c.dims, c.type);
  std::vector<SearchParams> all = {{1, 1, false}, {10, 1, false}, {model.rows() < 1024 ? 1000u : 3u, 1, false}};
  if (rescore) all.insert(all.end(), {{1, 1, true}, {5, 4, true}, {10, 10, true}});
  for (const SearchParams& params : all) {
    INFO("k " << params.k << ", oversample " << params.oversample << ", rescore " << params.rescore);
    const SearchResults got = REQUIRE_VALUE(index.search(queries.bytes, 7, params));
    check_results(got, model.search(queries, params), "index against the model");
  }
  // A batch the index merges in several ranges of queries at once (32 a range).
  const Rows batch = make_rows(t.rng, 77, c.dims, c.type);
  const SearchParams params{10, rescore ? 4u : 1u, rescore};
  INFO("77 queries, rescore " << rescore);
  check_results(REQUIRE_VALUE(index.search(batch.bytes, 77, params)), model.search(batch, params),
                "a batch of 77 queries against the model");
}

// ---- packed codes ---------------------------------------------------------------------------

// Random packed codes of `dims` bits (padding bits 0), some rows copies of earlier ones (ties).
inline std::vector<std::byte> make_codes(std::mt19937_64& rng, std::uint64_t count, std::uint32_t dims) {
  const std::uint64_t row_bytes = ferry::binary_code_bytes(dims);
  std::vector<std::byte> codes(count * row_bytes, std::byte{0});
  for (std::uint64_t r = 0; r < count; ++r) {
    std::byte* row = codes.data() + r * row_bytes;
    if (r > 0 && rng() % 8 == 0) {
      std::memcpy(row, codes.data() + (rng() % r) * row_bytes, row_bytes);
      continue;
    }
    for (std::uint32_t j = 0; j < dims; ++j) {
      if (rng() % 2 != 0) row[j / 8] |= std::byte{1} << (j % 8);
    }
  }
  return codes;
}

// The codes of float rows with threshold zero, from the definition: bit j = x_j > 0.
inline std::vector<std::byte> sign_codes(const Rows& rows, std::uint32_t dims) {
  const std::uint64_t row_bytes = ferry::binary_code_bytes(dims);
  std::vector<std::byte> codes(rows.count * row_bytes, std::byte{0});
  for (std::uint64_t r = 0; r < rows.count; ++r) {
    for (std::uint32_t j = 0; j < dims; ++j) {
      if (rows.values[r * dims + j] > 0.0f) codes[r * row_bytes + j / 8] |= std::byte{1} << (j % 8);
    }
  }
  return codes;
}

// Every query code's Hamming distance to every database code, sorted by (distance, id), the
// first k kept; padded with kBinaryIndexNoId and NaN past the database's rows.
inline SearchResults code_truth(const std::vector<std::byte>& db, const std::vector<std::byte>& queries,
                         std::uint32_t dims, std::uint32_t k) {
  const std::uint64_t row_bytes = ferry::binary_code_bytes(dims);
  const std::uint64_t rows = db.size() / row_bytes;
  SearchResults out;
  out.queries = static_cast<std::uint32_t>(queries.size() / row_bytes);
  out.k = k;
  out.ids.assign(std::uint64_t{out.queries} * k, ferry::kBinaryIndexNoId);
  out.scores.assign(out.ids.size(), std::numeric_limits<float>::quiet_NaN());
  for (std::uint32_t q = 0; q < out.queries; ++q) {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> all;
    for (std::uint64_t r = 0; r < rows; ++r) {
      std::uint32_t distance = 0;
      for (std::uint64_t b = 0; b < row_bytes; ++b) {
        distance += static_cast<std::uint32_t>(std::popcount(
            std::to_integer<unsigned>(queries[q * row_bytes + b] ^ db[r * row_bytes + b])));
      }
      all.emplace_back(distance, r);
    }
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < std::min<std::size_t>(all.size(), k); ++i) {
      out.ids[std::uint64_t{q} * k + i] = all[i].second;
      out.scores[std::uint64_t{q} * k + i] = static_cast<float>(all[i].first);
    }
  }
  return out;
}

inline BinaryIndexOptions codes_options(std::uint32_t dims, BinaryIndexMemory memory) {
  BinaryIndexOptions o;
  o.dims = dims;
  o.memory = memory;
  return o;
}

// A whole file's bytes (empty when it cannot be read), and a file written with `bytes`.
inline std::vector<char> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace index_test
