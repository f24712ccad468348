// rescore against a truth computed here from the definition (std::fma chains or int32 sums in
// dimension order, a full sort by the tie rules): both element types and metrics, awkward sizes,
// padded pitches and odd offsets, candidates with duplicates, out-of-range entries and
// kRescoreNoIndex, k above the valid candidates, exact ties between rows, +0 against -0, NaN and
// infinite inputs, subnormal products and sums, vectors in host memory the device reads in place;
// every bad parameter.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::BufferRef;
using ferry::CommandList;
using ferry::QueueKind;
using ferry::RescoreBuffers;
using ferry::RescoreElement;
using ferry::RescoreMetric;
using ferry::RescoreParams;
using ferry_test::BackendUnderTest;

namespace {

// What the vectors hold.
enum class Values {
  random,        // float32: uniform in [-1, 1); int8: any byte
  ties,          // a few small values: many rows score exactly alike
  signed_zeros,  // float32: products far below the subnormals: scores +0.0 and -0.0
  tiny,          // float32: products and sums in the subnormal range
  special,       // float32: NaNs, infinities, zeros, subnormals and huge values among the rest
  extreme,       // int8: -128 and 127 only (the largest sums)
};

// What the candidate lists hold.
enum class Candidates {
  valid,  // random rows
  mixed,  // random rows, repeats of earlier entries, rows past the database, kRescoreNoIndex
};

struct Case {
  RescoreElement element = RescoreElement::float32;
  RescoreMetric metric = RescoreMetric::inner_product;
  std::uint32_t dims = 1;
  std::uint32_t queries = 1;
  std::uint32_t rows = 1;
  std::uint32_t candidates = 1;
  std::uint32_t k = 1;
  Values values = Values::random;
  Candidates lists = Candidates::mixed;
  std::uint32_t query_pad = 0;     // elements of padding after each query (pitch)
  std::uint32_t database_pad = 0;  // elements of padding after each database row
};

std::uint32_t element_size(RescoreElement element) {
  return element == RescoreElement::float32 ? 4 : 1;
}

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::string hex(std::uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", bits);
  return text;
}
std::uint32_t to_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

// One element's bytes for `values`.
void random_element(std::mt19937_64& rng, const Case& c, std::byte* at) {
  if (c.element == RescoreElement::int8) {
    std::int8_t v = static_cast<std::int8_t>(rng());
    if (c.values == Values::ties) v = static_cast<std::int8_t>(static_cast<int>(rng() % 3) - 1);
    if (c.values == Values::extreme) v = rng() % 2 == 0 ? -128 : 127;
    std::memcpy(at, &v, 1);
    return;
  }
  const auto sign = [&] { return rng() % 2 == 0 ? 1.0f : -1.0f; };
  float v = 0;
  switch (c.values) {
    case Values::random:
    case Values::extreme:
      v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
      break;
    case Values::ties: {
      const float pool[] = {-1.0f, -0.5f, 0.0f, -0.0f, 0.25f, 0.5f, 1.0f};
      v = pool[rng() % std::size(pool)];
      break;
    }
    case Values::signed_zeros:
      v = sign() * std::ldexp(1.0f, -80 - static_cast<int>(rng() % 4));  // products < 2^-160
      break;
    case Values::tiny:
      v = sign() * std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                              -60 - static_cast<int>(rng() % 20));
      break;
    case Values::special: {
      switch (rng() % 16) {
        case 0: v = std::numeric_limits<float>::quiet_NaN(); break;
        case 1: v = from_bits(0xFF800001u); break;  // a signalling NaN with a payload
        case 2: v = sign() * std::numeric_limits<float>::infinity(); break;
        case 3: v = sign() * 0.0f; break;
        case 4: v = sign() * std::numeric_limits<float>::denorm_min() * 12345; break;
        case 5: v = sign() * 3e38f; break;
        default: v = std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng); break;
      }
      break;
    }
  }
  std::memcpy(at, &v, 4);
}

// [count x dims] vectors at `pitch` bytes; the padding holds bytes the op must not read (NaNs).
std::vector<std::byte> make_vectors(std::mt19937_64& rng, const Case& c, std::uint32_t count,
                                    std::uint64_t pitch) {
  const std::uint32_t size = element_size(c.element);
  std::vector<std::byte> bytes((count - 1) * pitch + std::uint64_t{c.dims} * size,
                               std::byte{0xFF});
  for (std::uint32_t r = 0; r < count; ++r) {
    for (std::uint32_t j = 0; j < c.dims; ++j)
      random_element(rng, c, bytes.data() + r * pitch + j * size);
  }
  return bytes;
}

std::vector<std::uint32_t> make_candidates(std::mt19937_64& rng, const Case& c) {
  std::vector<std::uint32_t> lists(std::uint64_t{c.queries} * c.candidates);
  for (std::uint32_t q = 0; q < c.queries; ++q) {
    std::uint32_t* list = lists.data() + std::uint64_t{q} * c.candidates;
    for (std::uint32_t i = 0; i < c.candidates; ++i) {
      std::uint32_t row = static_cast<std::uint32_t>(rng() % c.rows);
      if (c.lists == Candidates::mixed) {
        switch (rng() % 10) {
          case 0: row = ferry::kRescoreNoIndex; break;
          case 1: row = c.rows + static_cast<std::uint32_t>(rng() % 1000); break;
          case 2: row = static_cast<std::uint32_t>(ferry::kRescoreNoIndex - 1 - rng() % 3); break;
          case 3:
          case 4: row = i > 0 ? list[rng() % i] : row; break;  // a repeat
          default: break;
        }
      }
      list[i] = row;
    }
  }
  return lists;
}

struct Ranked {
  std::vector<std::uint32_t> scores, indices;  // [queries x k]
};

// The truth: each distinct valid candidate scored by the definition, sorted by the tie rules
// (better score first, +0 == -0, NaN after every number, equal scores by row index), the first
// k, padded.
Ranked truth(const Case& c, std::span<const std::byte> queries, std::uint64_t query_pitch,
             std::span<const std::byte> database, std::uint64_t database_pitch,
             std::span<const std::uint32_t> lists) {
  const bool l2 = c.metric == RescoreMetric::l2;
  const bool is_float = c.element == RescoreElement::float32;
  Ranked ranked;
  for (std::uint32_t q = 0; q < c.queries; ++q) {
    const std::byte* query = queries.data() + q * query_pitch;
    struct Entry {
      std::uint32_t score, row;
    };
    std::vector<Entry> entries;
    std::set<std::uint32_t> seen;
    for (std::uint32_t i = 0; i < c.candidates; ++i) {
      const std::uint32_t row = lists[std::uint64_t{q} * c.candidates + i];
      if (row >= c.rows || !seen.insert(row).second) continue;
      const std::byte* x = database.data() + row * database_pitch;
      std::uint32_t score = 0;
      if (is_float) {
        float s = 0.0f;
        for (std::uint32_t j = 0; j < c.dims; ++j) {
          float a, b;
          std::memcpy(&a, query + 4 * j, 4);
          std::memcpy(&b, x + 4 * j, 4);
          if (l2) {
            const float e = a - b;
            s = std::fma(e, e, s);
          } else {
            s = std::fma(a, b, s);
          }
        }
        score = std::isnan(s) ? ferry::kRescoreNaNScoreBits : to_bits(s);
      } else {
        std::int64_t s = 0;  // wide: the test checks that int32 holds it
        for (std::uint32_t j = 0; j < c.dims; ++j) {
          const auto a = static_cast<std::int8_t>(query[j]), b = static_cast<std::int8_t>(x[j]);
          s += l2 ? (a - b) * (a - b) : a * b;
        }
        REQUIRE((s >= INT32_MIN && s <= INT32_MAX));
        score = static_cast<std::uint32_t>(static_cast<std::int32_t>(s));
      }
      entries.push_back({score, row});
    }
    std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
      if (is_float) {
        const float fa = from_bits(a.score), fb = from_bits(b.score);
        if (std::isnan(fa) != std::isnan(fb)) return std::isnan(fb);
        if (!std::isnan(fa) && fa != fb) return l2 ? fa < fb : fa > fb;
      } else {
        const auto ia = static_cast<std::int32_t>(a.score), ib = static_cast<std::int32_t>(b.score);
        if (ia != ib) return l2 ? ia < ib : ia > ib;
      }
      return a.row < b.row;
    });
    for (std::uint32_t i = 0; i < c.k; ++i) {
      const bool real = i < entries.size();
      ranked.scores.push_back(real ? entries[i].score : ferry::kRescoreNoScoreBits);
      ranked.indices.push_back(real ? entries[i].row : ferry::kRescoreNoIndex);
    }
  }
  return ranked;
}

// Where a case's vectors live.
enum class Memory { device, lease, registered };

// Page-aligned host memory, for register_host_memory.
struct FreeAligned {
  void operator()(std::byte* p) const { std::free(p); }
};

// Runs one case on t.device: every binding at an odd offset, the outputs in one buffer between
// poisoned bytes that must survive. Returns the outputs, or nothing (with a message) when the
// backend cannot register host memory.
std::optional<Ranked> run_case(BackendUnderTest& t, const Case& c, Memory memory,
                               std::span<const std::byte> queries, std::uint64_t query_pitch,
                               std::span<const std::byte> database, std::uint64_t database_pitch,
                               std::span<const std::uint32_t> lists) {
  const ferry::Device& device = t.device;
  const std::uint64_t size = element_size(c.element);
  const std::uint64_t query_offset = 3 * size;     // no multiple of 8 or 16
  const std::uint64_t database_offset = 5 * size;
  const std::uint64_t candidates_offset = 12;
  constexpr std::uint64_t kPad = 12;
  const std::uint64_t out_bytes = std::uint64_t{c.queries} * c.k * 4;
  std::vector<std::byte> query_bytes(query_offset, std::byte{0x7F});
  query_bytes.insert(query_bytes.end(), queries.begin(), queries.end());
  std::vector<std::byte> database_bytes(database_offset, std::byte{0x7F});
  database_bytes.insert(database_bytes.end(), database.begin(), database.end());
  std::vector<std::byte> list_bytes(candidates_offset + lists.size_bytes());
  std::memcpy(list_bytes.data() + candidates_offset, lists.data(), lists.size_bytes());

  std::optional<Buffer> query_buffer, database_buffer;
  std::optional<ferry::StagingPool> pool;
  std::optional<ferry::Lease> query_lease, database_lease;
  std::unique_ptr<std::byte, FreeAligned> host_memory;
  switch (memory) {
    case Memory::device:
      query_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(device, query_bytes));
      database_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(device, database_bytes));
      break;
    case Memory::lease: {
      pool = REQUIRE_VALUE(device.create_staging_pool(ferry_test::small_pool(
          ferry::MemoryKind::host_upload, 4 << 20)));
      query_lease = REQUIRE_VALUE(pool->acquire(query_bytes.size()));
      database_lease = REQUIRE_VALUE(pool->acquire(database_bytes.size()));
      std::memcpy(query_lease->data().data(), query_bytes.data(), query_bytes.size());
      std::memcpy(database_lease->data().data(), database_bytes.data(), database_bytes.size());
      break;
    }
    case Memory::registered: {
      // The database in registered host memory, the queries in a host buffer.
      constexpr std::uint64_t kPage = 4096;
      const std::uint64_t bytes = (database_bytes.size() + kPage - 1) / kPage * kPage;
      host_memory.reset(static_cast<std::byte*>(std::aligned_alloc(kPage, bytes)));
      REQUIRE(host_memory);
      std::memcpy(host_memory.get(), database_bytes.data(), database_bytes.size());
      ferry::Result<Buffer> registered =
          device.register_host_memory({host_memory.get(), bytes}, ferry::MemoryKind::host_upload);
      if (!registered.ok() && registered.status().code() == ferry::ErrorCode::unavailable) {
        MESSAGE("register_host_memory is unavailable: " << registered.status().to_string());
        return std::nullopt;
      }
      database_buffer = REQUIRE_VALUE(std::move(registered));
      query_buffer = REQUIRE_VALUE(
          device.create_buffer(query_bytes.size(), ferry::MemoryKind::host_upload));
      const std::span<std::byte> host = REQUIRE_VALUE(query_buffer->host_span());
      std::memcpy(host.data(), query_bytes.data(), query_bytes.size());
      break;
    }
  }
  const BufferRef query_ref = query_lease ? BufferRef(*query_lease) : BufferRef(*query_buffer);
  const BufferRef database_ref =
      database_lease ? BufferRef(*database_lease) : BufferRef(*database_buffer);
  const Buffer list_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(device, list_bytes));
  const std::vector<std::byte> poison = ferry_test::poison_bytes(3 * kPad + 2 * out_bytes, 9);
  const Buffer outputs = REQUIRE_VALUE(ferry_test::device_buffer_with(device, poison));

  RescoreParams params;
  params.element = c.element;
  params.metric = c.metric;
  params.dims = c.dims;
  params.queries = c.queries;
  params.database_rows = c.rows;
  params.candidates = c.candidates;
  params.k = c.k;
  params.query_pitch = c.query_pad == 0 ? 0 : query_pitch;  // 0: tight
  params.database_pitch = c.database_pad == 0 ? 0 : database_pitch;
  const RescoreBuffers buffers{query_ref,   query_offset,     database_ref,
                               database_offset, list_buffer,  candidates_offset,
                               outputs,     kPad,             outputs,
                               2 * kPad + out_bytes};
  CommandList commands;
  REQUIRE_OK(ferry::rescore(commands, buffers, params));
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  const std::vector<std::byte> bytes =
      REQUIRE_VALUE(ferry_test::read_bytes(device, outputs, 0, poison.size()));
  auto same = [&](std::uint64_t at, std::uint64_t n) {
    return std::equal(bytes.begin() + at, bytes.begin() + at + n, poison.begin() + at);
  };
  CHECK_MESSAGE(same(0, kPad), "bytes before the scores changed");
  CHECK_MESSAGE(same(kPad + out_bytes, kPad), "bytes between the outputs changed");
  CHECK_MESSAGE(same(2 * kPad + 2 * out_bytes, kPad), "bytes after the indices changed");
  Ranked result;
  result.scores.resize(std::uint64_t{c.queries} * c.k);
  result.indices.resize(result.scores.size());
  std::memcpy(result.scores.data(), bytes.data() + kPad, out_bytes);
  std::memcpy(result.indices.data(), bytes.data() + 2 * kPad + out_bytes, out_bytes);
  return result;
}

const char* name(RescoreElement element) {
  return element == RescoreElement::float32 ? "float32" : "int8";
}
const char* name(RescoreMetric metric) {
  return metric == RescoreMetric::l2 ? "l2" : "inner_product";
}

void check_case(BackendUnderTest& t, const Case& c, Memory memory = Memory::device) {
  INFO(name(c.element) << " " << name(c.metric) << ", dims " << c.dims << ", queries "
                       << c.queries << ", rows " << c.rows << ", candidates " << c.candidates
                       << ", k " << c.k << ", values " << static_cast<int>(c.values)
                       << ", lists " << static_cast<int>(c.lists) << ", pads " << c.query_pad
                       << "/" << c.database_pad << ", memory " << static_cast<int>(memory));
  const std::uint64_t size = element_size(c.element);
  const std::uint64_t query_pitch = (c.dims + std::uint64_t{c.query_pad}) * size;
  const std::uint64_t database_pitch = (c.dims + std::uint64_t{c.database_pad}) * size;
  const std::vector<std::byte> queries = make_vectors(t.rng, c, c.queries, query_pitch);
  const std::vector<std::byte> database = make_vectors(t.rng, c, c.rows, database_pitch);
  const std::vector<std::uint32_t> lists = make_candidates(t.rng, c);
  const Ranked expected = truth(c, queries, query_pitch, database, database_pitch, lists);
  const std::optional<Ranked> result =
      run_case(t, c, memory, queries, query_pitch, database, database_pitch, lists);
  if (!result) return;
  for (std::size_t i = 0; i < expected.scores.size(); ++i) {
    if (result->scores[i] == expected.scores[i] && result->indices[i] == expected.indices[i])
      continue;
    FAIL_CHECK("query " << i / c.k << " rank " << i % c.k << ": got (score bits "
                        << hex(result->scores[i]) << ", row " << result->indices[i]
                        << "), expected (" << hex(expected.scores[i]) << ", row "
                        << expected.indices[i] << ")");
    break;
  }
}

constexpr RescoreElement kFloat = RescoreElement::float32;
constexpr RescoreElement kInt8 = RescoreElement::int8;
constexpr RescoreMetric kIp = RescoreMetric::inner_product;
constexpr RescoreMetric kL2 = RescoreMetric::l2;

}  // namespace

TEST_CASE("rescore: both elements and metrics, awkward sizes, match the truth") {
  ferry_test::for_each_backend({"rescore"}, [](BackendUnderTest& t) {
    for (const RescoreElement element : {kFloat, kInt8}) {
      for (const RescoreMetric metric : {kIp, kL2}) {
        const Case cases[] = {
            {element, metric, 1, 1, 1, 1, 1},                      // the smallest
            {element, metric, 3, 5, 10, 7, 7},                     // k above the valid entries
            {element, metric, 7, 3, 50, 33, 20, Values::ties},     // equal scores everywhere
            {element, metric, 100, 4, 1000, 301, 100, Values::random, Candidates::valid, 3, 5},
            {element, metric, 1001, 2, 200, 129, 50, Values::random, Candidates::mixed, 0, 1},
            {element, metric, 16, 3, 20000, 4096, 1024},           // rounds, duplicates
            {element, metric, 5, 2, 300, 3001, 7, Values::ties},   // rows < candidates: repeats
            {element, metric, 2, 67, 90, 2049, 1000, Values::ties, Candidates::valid, 1, 0},
        };
        for (const Case& c : cases) check_case(t, c);
      }
    }
  });
}

TEST_CASE("rescore: signed zeros, subnormals, NaNs and infinities") {
  ferry_test::for_each_backend({"rescore"}, [](BackendUnderTest& t) {
    for (const RescoreMetric metric : {kIp, kL2}) {
      const Case cases[] = {
          {kFloat, metric, 3, 6, 40, 37, 30, Values::signed_zeros},  // +0 and -0 scores tie
          {kFloat, metric, 1, 4, 64, 64, 64, Values::signed_zeros},
          {kFloat, metric, 9, 5, 300, 200, 150, Values::tiny},       // subnormal sums
          {kFloat, metric, 4, 7, 100, 90, 90, Values::special},      // NaN, inf, huge
          {kFloat, metric, 33, 3, 100, 70, 41, Values::special, Candidates::valid, 2, 3},
      };
      for (const Case& c : cases) check_case(t, c);
    }
    // int8 sums at their largest: 255^2 * 32768 < 2^31, and 128 * 128 * 65536 = 2^30.
    check_case(t, {kInt8, kL2, ferry::kRescoreMaxInt8L2Dims, 2, 6, 5, 5, Values::extreme});
    check_case(t, {kInt8, kIp, ferry::kRescoreMaxDims, 2, 6, 5, 5, Values::extreme});
  });
}

TEST_CASE("rescore: vectors in host memory the device reads in place") {
  ferry_test::for_each_backend({"rescore"}, [](BackendUnderTest& t) {
    for (const Memory memory : {Memory::lease, Memory::registered}) {
      check_case(t, {kFloat, kIp, 37, 5, 700, 211, 64, Values::random, Candidates::mixed, 1, 2},
                 memory);
      check_case(t, {kInt8, kL2, 45, 3, 500, 100, 99, Values::random, Candidates::mixed, 3, 1},
                 memory);
    }
  });
}

TEST_CASE("rescore: bad parameters are clear errors and record nothing") {
  ferry_test::for_each_backend({"rescore"}, [](BackendUnderTest& t) {
    using ferry::ErrorCode;
    // 2 queries of 8 float32 (64 bytes), 10 rows (320 bytes), 3 candidates each (24 bytes),
    // k = 2 (16 bytes per output).
    const Buffer vectors = REQUIRE_VALUE(t.device.create_buffer(1024));
    const Buffer lists = REQUIRE_VALUE(t.device.create_buffer(256));
    const Buffer out = REQUIRE_VALUE(t.device.create_buffer(256));
    RescoreParams good;
    good.dims = 8;
    good.queries = 2;
    good.database_rows = 10;
    good.candidates = 3;
    good.k = 2;
    const RescoreBuffers buffers{vectors, 0, vectors, 64, lists, 0, out, 0, out, 64};
    {
      CommandList commands;
      CHECK_OK(ferry::rescore(commands, buffers, good));  // the baseline is accepted
    }
    auto check = [&](const RescoreBuffers& b, const RescoreParams& p, ErrorCode code,
                     const char* what, const char* mentions = nullptr) {
      INFO(what);
      CommandList commands;
      const ferry::Status status = ferry::rescore(commands, b, p);
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK(!status.message().empty());
      if (mentions != nullptr) {
        CHECK_MESSAGE(status.message().find(mentions) != std::string::npos, status.message());
      }
      CHECK(commands.empty());
    };
    RescoreParams p = good;
    p.element = static_cast<RescoreElement>(7);
    check(buffers, p, ErrorCode::invalid_argument, "unknown element", "element 7");
    p = good;
    p.metric = static_cast<RescoreMetric>(9);
    check(buffers, p, ErrorCode::invalid_argument, "unknown metric", "metric 9");
    p = good;
    p.dims = 0;
    check(buffers, p, ErrorCode::invalid_argument, "dims 0", "dims 0");
    p.dims = ferry::kRescoreMaxDims + 1;
    check(buffers, p, ErrorCode::invalid_argument, "dims above the maximum", "dims 65537");
    p.element = kInt8;
    p.metric = kL2;
    p.dims = ferry::kRescoreMaxInt8L2Dims + 1;
    check(buffers, p, ErrorCode::invalid_argument, "int8 l2 dims past exact int32 sums",
          "dims 32769");
    p = good;
    p.queries = 0;
    check(buffers, p, ErrorCode::invalid_argument, "no queries", "queries");
    p = good;
    p.database_rows = 0;
    check(buffers, p, ErrorCode::invalid_argument, "no rows", "database_rows 0");
    p.database_rows = ferry::kRescoreNoIndex;
    check(buffers, p, ErrorCode::invalid_argument, "rows past the index range", "database_rows");
    p = good;
    p.candidates = 0;
    check(buffers, p, ErrorCode::invalid_argument, "no candidates", "candidates 0");
    p.candidates = ferry::kRescoreMaxCandidates + 1;
    check(buffers, p, ErrorCode::invalid_argument, "candidates above the maximum",
          "candidates 4097");
    p = good;
    p.k = 0;
    check(buffers, p, ErrorCode::invalid_argument, "k 0", "k 0");
    p.k = 4;
    check(buffers, p, ErrorCode::invalid_argument, "k above the candidates", "k 4");
    p.candidates = 2000;
    p.k = ferry::kRescoreMaxK + 1;
    check(buffers, p, ErrorCode::invalid_argument, "k above the maximum", "k 1025");
    p = good;
    p.query_pitch = 28;
    check(buffers, p, ErrorCode::invalid_argument, "query pitch below a row", "query_pitch 28");
    p.query_pitch = 34;
    check(buffers, p, ErrorCode::invalid_argument, "query pitch not a multiple of 4",
          "query_pitch 34");
    p = good;
    p.database_pitch = 35;
    check(buffers, p, ErrorCode::invalid_argument, "database pitch not a multiple of 4",
          "database_pitch 35");
    p.database_pitch = std::uint64_t{1} << 62;
    check(buffers, p, ErrorCode::invalid_argument, "database size overflows", "overflow");
    RescoreBuffers b = buffers;
    b.queries_offset = 2;
    check(b, good, ErrorCode::invalid_argument, "a misaligned float32 query", "queries_offset 2");
    b = buffers;
    b.database_offset = 66;
    check(b, good, ErrorCode::invalid_argument, "a misaligned database", "database_offset 66");
    b = buffers;
    b.candidates_offset = 2;
    check(b, good, ErrorCode::invalid_argument, "misaligned candidates", "candidates_offset 2");
    b = buffers;
    b.scores_offset = 6;
    check(b, good, ErrorCode::invalid_argument, "misaligned scores", "scores_offset 6");
    b = buffers;
    b.indices_offset = 66;
    check(b, good, ErrorCode::invalid_argument, "misaligned indices", "indices_offset 66");
    {
      // int8 vectors may start anywhere; their outputs still need 4 bytes.
      p = good;
      p.element = kInt8;
      b = buffers;
      b.queries_offset = 3;
      b.database_offset = 67;
      CommandList commands;
      CHECK_OK(ferry::rescore(commands, b, p));
    }
    b = buffers;
    b.database_offset = 1024 - 316;
    check(b, good, ErrorCode::out_of_range, "the database past its buffer", "database");
    b = buffers;
    b.candidates_offset = 256 - 20;
    check(b, good, ErrorCode::out_of_range, "candidates past their buffer", "candidates");
    b = buffers;
    b.indices_offset = 256 - 12;
    check(b, good, ErrorCode::out_of_range, "indices past their buffer", "indices");
    b = buffers;
    b.indices_offset = 8;
    check(b, good, ErrorCode::invalid_argument, "outputs overlapping", "overlap");
    b = buffers;
    b.scores = lists;
    b.scores_offset = 16;
    check(b, good, ErrorCode::invalid_argument, "scores overlapping the candidates", "overlap");
    b = buffers;
    b.indices = vectors;
    b.indices_offset = 100;
    check(b, good, ErrorCode::invalid_argument, "indices overlapping the database", "overlap");
    {
      Buffer gone = REQUIRE_VALUE(t.device.create_buffer(1024));
      gone.release();
      b = buffers;
      b.database = gone;
      check(b, good, ErrorCode::released, "a released database");
      b = buffers;
      b.scores = gone;
      check(b, good, ErrorCode::released, "released scores");
    }
    {
      ferry::Device other = REQUIRE_VALUE(t.open_another());
      const Buffer foreign = REQUIRE_VALUE(other.create_buffer(256));
      b = buffers;
      b.candidates = foreign;
      check(b, good, ErrorCode::invalid_argument, "candidates of another device", "device");
    }
  });
}

TEST_CASE("rescore: a database larger than a Vulkan storage-buffer window is refused") {
  ferry_test::for_each_backend({"rescore"}, [](BackendUnderTest& t) {
    // 129 MiB of database: above lavapipe's maxStorageBufferRange (128 MiB), the least Vulkan
    // allows; other devices may bind it.
    constexpr std::uint64_t kRowBytes = 1024 * 4;
    constexpr std::uint64_t kRows = (129ull << 20) / kRowBytes;
    const ferry::Result<Buffer> database = t.device.create_buffer(kRows * kRowBytes);
    if (!database.ok()) {
      MESSAGE("no 129 MiB buffer here: " << database.status().to_string());
      return;
    }
    const Buffer small = REQUIRE_VALUE(t.device.create_buffer(1 << 16));
    RescoreParams params;
    params.dims = 1024;
    params.queries = 1;
    params.database_rows = kRows;
    params.candidates = 16;
    params.k = 4;
    CommandList commands;
    const ferry::Status status = ferry::rescore(
        commands, {small, 0, *database, 0, small, 4096, small, 8192, small, 12288}, params);
    const bool lavapipe = t.backend == ferry::Backend::vulkan && t.device.info().is_cpu;
    if (lavapipe || !status.ok()) {
      CHECK_MESSAGE(status.code() == ferry::ErrorCode::unavailable, status.to_string());
      CHECK(status.message().find("maxStorageBufferRange") != std::string::npos);
      CHECK(status.message().find(std::to_string(kRows * kRowBytes)) != std::string::npos);
      CHECK(commands.empty());
    }
  });
}


TEST_CASE("rescore: long chains of many candidates; past lavapipe's loop budget, refused there") {
  ferry_test::for_each_backend({"rescore"}, [](BackendUnderTest& t) {
    check_case(t, {kFloat, kL2, 5001, 1, 5000, 4096, 1024, Values::random, Candidates::valid});
    // lavapipe silently ends a shader's loops after 65535 iterations: this one could need more.
    const Case c{kFloat, kIp, 5601, 1, 5000, 4096, 1024, Values::random, Candidates::valid};
    if (t.backend != ferry::Backend::vulkan || !t.device.info().is_cpu) return check_case(t, c);
    const Buffer vectors = REQUIRE_VALUE(t.device.create_buffer(5000ull * 5601 * 4 + 5601 * 4));
    const Buffer small = REQUIRE_VALUE(t.device.create_buffer(3 * 4096 * 4));
    RescoreParams params;
    params.dims = c.dims;
    params.queries = 1;
    params.database_rows = c.rows;
    params.candidates = c.candidates;
    params.k = c.k;
    CommandList commands;
    const ferry::Status status = ferry::rescore(
        commands, {vectors, 0, vectors, 5601 * 4, small, 0, small, 4096 * 4, small, 8192 * 4},
        params);
    CHECK_MESSAGE(status.code() == ferry::ErrorCode::unavailable, status.to_string());
    CHECK(status.message().find("lavapipe") != std::string::npos);
    CHECK(commands.empty());
  });
}
