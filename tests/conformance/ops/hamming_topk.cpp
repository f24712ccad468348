// hamming_topk against a brute-force truth computed here (every distance, a full sort by
// (distance, index)): random codes and codes drawn from a few distinct values (ties everywhere),
// queries equal to database rows, k above the rows, sizes that are no multiple of any tile, every
// merge level and query slicing; bad parameters.
#include <algorithm>
#include <bit>
#include <cstring>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::HammingTopkBuffers;
using ferry::HammingTopkParams;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

struct TopK {
  std::vector<std::uint32_t> distances, indices;  // [queries x k]
};

// The truth: every pair's popcount(a ^ b), sorted by (distance, index), the first k, padded.
TopK brute_force(std::span<const std::byte> queries, std::span<const std::byte> database,
                 std::uint32_t bits, std::uint32_t k) {
  const std::size_t code = bits / 8;
  const std::size_t q = queries.size() / code, n = database.size() / code;
  TopK truth;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> all(n);
  for (std::size_t i = 0; i < q; ++i) {
    for (std::size_t r = 0; r < n; ++r) {
      std::uint32_t d = 0;
      for (std::size_t b = 0; b < code; ++b) {
        d += std::popcount(static_cast<unsigned>(std::to_integer<std::uint8_t>(
            queries[i * code + b] ^ database[r * code + b])));
      }
      all[r] = {d, static_cast<std::uint32_t>(r)};
    }
    std::sort(all.begin(), all.end());
    for (std::uint32_t j = 0; j < k; ++j) {
      truth.distances.push_back(j < n ? all[j].first : ferry::kHammingNoDistance);
      truth.indices.push_back(j < n ? all[j].second : ferry::kHammingNoIndex);
    }
  }
  return truth;
}

// Codes: random bits, or (distinct > 0) each row one of `distinct` random codes.
std::vector<std::byte> make_codes(std::mt19937_64& rng, std::size_t rows, std::uint32_t bits,
                                  std::size_t distinct) {
  const std::size_t code = bits / 8;
  if (distinct == 0) return ferry_test::random_bytes(rng, rows * code);
  const std::vector<std::byte> pool = ferry_test::random_bytes(rng, distinct * code);
  std::vector<std::byte> codes(rows * code);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t pick = rng() % distinct;
    std::memcpy(codes.data() + r * code, pool.data() + pick * code, code);
  }
  return codes;
}

struct SearchCase {
  std::uint32_t bits = 256;
  std::uint32_t queries = 1;
  std::uint32_t rows = 1;
  std::uint32_t k = 1;
  std::size_t distinct = 0;       // 0: random codes
  bool queries_from_rows = false;  // each query a copy of a database row (distance 0 present)
  bool nearing = false;  // rows ever nearer to the queries: row r has bits - r * bits / rows
                         // random bits set, the queries few (a running threshold keeps falling)
  std::uint32_t near_rows = 0;  // rows of the second half made near a query (copies of query
                                // i % queries with up to 8 bits flipped), spread evenly
};

// The second half's near rows (SearchCase::near_rows): a bound taken from the first rows (a
// sample) is loose for them, so they all pass it.
void make_near_rows(std::mt19937_64& rng, const SearchCase& c, std::vector<std::byte>& database,
                    const std::vector<std::byte>& queries) {
  const std::size_t code = c.bits / 8, half = c.rows / 2;
  for (std::uint32_t i = 0; i < c.near_rows; ++i) {
    const std::size_t row = half + std::uint64_t{i} * (c.rows - half) / c.near_rows;
    std::byte* at = database.data() + row * code;
    std::memcpy(at, queries.data() + (i % c.queries) * code, code);
    for (std::uint64_t flips = rng() % 9; flips > 0; --flips) {
      const std::uint64_t bit = rng() % c.bits;
      at[bit / 8] ^= std::byte{1} << (bit % 8);
    }
  }
}

// Row r: (bits - r * bits / rows) random bits set; a query: up to 3 random bits set.
void make_nearing(std::mt19937_64& rng, const SearchCase& c, std::vector<std::byte>& database,
                  std::vector<std::byte>& queries) {
  const std::size_t code = c.bits / 8;
  std::vector<std::uint32_t> order(c.bits);
  for (std::uint32_t b = 0; b < c.bits; ++b) order[b] = b;
  auto set_bits = [&](std::byte* row, std::uint64_t count) {
    std::memset(row, 0, code);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::uint64_t b = 0; b < count; ++b) row[order[b] / 8] |= std::byte{1} << (order[b] % 8);
  };
  for (std::size_t r = 0; r < c.rows; ++r)
    set_bits(database.data() + r * code, c.bits - std::uint64_t{r} * c.bits / c.rows);
  for (std::size_t i = 0; i < c.queries; ++i) set_bits(queries.data() + i * code, rng() % 4);
}

// Runs one search on `device` with every binding at offset `pad` (a multiple of 4) inside a larger,
// poisoned buffer; checks the bytes around the outputs survive and returns the outputs.
TopK run_search(const ferry::Device& device, std::span<const std::byte> queries,
                std::span<const std::byte> database, const SearchCase& c, std::uint64_t pad) {
  const std::uint64_t out_bytes = std::uint64_t{c.queries} * c.k * 4;
  std::vector<std::byte> query_bytes(pad), database_bytes(pad);
  query_bytes.insert(query_bytes.end(), queries.begin(), queries.end());
  database_bytes.insert(database_bytes.end(), database.begin(), database.end());
  const Buffer query_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(device, query_bytes));
  const Buffer database_buffer =
      REQUIRE_VALUE(ferry_test::device_buffer_with(device, database_bytes));
  // Both outputs in one buffer, between and around poisoned bytes.
  const std::vector<std::byte> poison = ferry_test::poison_bytes(3 * pad + 2 * out_bytes, 5);
  const Buffer outputs = REQUIRE_VALUE(ferry_test::device_buffer_with(device, poison));
  HammingTopkBuffers buffers{query_buffer, pad, database_buffer, pad,
                             outputs,      pad, outputs,         2 * pad + out_bytes};
  HammingTopkParams params{c.bits, c.queries, c.rows, c.k};
  CommandList commands;
  REQUIRE_OK(ferry::hamming_topk(commands, buffers, params));
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  const std::vector<std::byte> bytes =
      REQUIRE_VALUE(ferry_test::read_bytes(device, outputs, 0, poison.size()));
  auto same = [&](std::uint64_t at, std::uint64_t size) {
    return std::equal(bytes.begin() + at, bytes.begin() + at + size, poison.begin() + at);
  };
  CHECK_MESSAGE(same(0, pad), "bytes before the distances changed");
  CHECK_MESSAGE(same(pad + out_bytes, pad), "bytes between the outputs changed");
  CHECK_MESSAGE(same(2 * pad + 2 * out_bytes, pad), "bytes after the indices changed");
  TopK result;
  result.distances.resize(std::uint64_t{c.queries} * c.k);
  result.indices.resize(result.distances.size());
  std::memcpy(result.distances.data(), bytes.data() + pad, out_bytes);
  std::memcpy(result.indices.data(), bytes.data() + 2 * pad + out_bytes, out_bytes);
  return result;
}

// Bindings at offset 12 by default (rows aligned to 4 bytes, not 8 or 16); `pad` 16 aligns them to
// 16 (the faster copies of CUDA's scan).
void check_case(BackendUnderTest& t, const ferry::Device& device, const SearchCase& c,
                std::uint64_t pad = 12) {
  INFO("bits " << c.bits << ", queries " << c.queries << ", rows " << c.rows << ", k " << c.k
               << ", bindings at offset " << pad
               << ", distinct codes " << c.distinct
               << std::string(c.queries_from_rows ? ", queries = rows" : "")
               << std::string(c.nearing ? ", rows ever nearer" : ""));
  std::vector<std::byte> database = make_codes(t.rng, c.rows, c.bits, c.distinct);
  std::vector<std::byte> queries = make_codes(t.rng, c.queries, c.bits, 0);
  if (c.nearing) make_nearing(t.rng, c, database, queries);
  if (c.near_rows != 0) make_near_rows(t.rng, c, database, queries);
  if (c.queries_from_rows) {
    const std::size_t code = c.bits / 8;
    for (std::size_t i = 0; i < c.queries; ++i)
      std::memcpy(queries.data() + i * code, database.data() + (t.rng() % c.rows) * code, code);
  }
  const TopK truth = brute_force(queries, database, c.bits, c.k);
  const TopK result = run_search(device, queries, database, c, pad);
  for (std::size_t i = 0; i < truth.distances.size(); ++i) {
    if (result.distances[i] == truth.distances[i] && result.indices[i] == truth.indices[i])
      continue;
    FAIL_CHECK("query " << i / c.k << " rank " << i % c.k << ": got (" << result.distances[i]
                        << ", " << result.indices[i] << "), expected (" << truth.distances[i]
                        << ", " << truth.indices[i] << ")");
    break;
  }
}

}  // namespace

TEST_CASE("hamming_topk: random and tied codes of every length, any k and size, match the truth") {
  ferry_test::for_each_backend({"hamming_topk"}, [](BackendUnderTest& t) {
    const SearchCase cases[] = {
        {64, 1, 1, 1},                        // one row
        {64, 3, 7, 10},                       // k > rows: padded
        {128, 5, 2047, 1},                    // one short chunk
        {256, 9, 2048, 16, 0, true},          // a full chunk; distance 0 present
        {256, 6, 2049, 33},                   // a chunk and one row
        {512, 4, 5000, 100, 3},               // three distinct codes: ties everywhere
        {1024, 2, 4099, 1024, 0, true},       // k = the maximum, every row kept of small chunks
        {4096, 3, 300, 17},                   // the longest code
        {192, 7, 9001, 64, 40},               // 40 codes, ties across chunks
        {256, 2, 40000, 1024},                // level 0, then two merge levels
        {256, 41, 60000, 10, 500},            // enough work for the CPU backend's threads
        {256, 70, 300000, 10},                // query tiles, spans, many compactions
        {256, 33, 20000, 5, 2},               // two codes: ties in every buffer; a 1-query tile
        {4096, 17, 3000, 5},                  // the longest codes: tiles of 16, one partial
        {320, 9, 7000, 700, 0, true},         // a large k: tiles of 4, half a quad of code
        {256, 40, 30000, 10, 0, false, true},  // nearer rows keep coming: compaction after
        {512, 5, 20000, 200, 0, false, true},  // compaction, thresholds ever lower
        // Sizes where CUDA's pooled search runs (a bound from a sample of >= k groups of 256
        // rows): a large k from pools of 2048 and 8192 keys, and pools that overflow (ties at
        // the bound: 6000 rows of each of 10 codes), which take the exact pass.
        {256, 5, 80000, 300, 0, true},
        {256, 2, 262144, 1000},
        {256, 4, 60000, 200, 10},
        // Past 16 x 256 groups of 256 rows, the pools' sample grows with the database (a
        // sixteenth of it).
        {64, 3, 1300000, 10},
        // Pools of 4096 keys (k = 200, a sample of a quarter of the rows) that hold more than
        // Vulkan's selection sorts (2048: it sorts the rows at or within the k-th distance): a
        // loose bound, as about 1250 rows per query in the second half are near it.
        {64, 2, 819200, 200, 0, false, false, 2500},
        // Batches that fill the tiles of Vulkan's cooperative-matrix fill (64, 128, 256 queries,
        // codes of 2 to 8 words, and longer ones in chunks of 8 words): two tiles of 256, the
        // second partial; one of 256 mostly empty; one of 128 with ties (pools that overflow);
        // tiles of 64 with codes of one chunk, of a chunk and 2 words, of 3, 4 and 16 chunks.
        {128, 300, 50000, 7},
        {64, 130, 20011, 3},
        {192, 65, 70001, 20, 12},
        {256, 50, 40000, 10, 0, true},
        {320, 40, 10007, 17},
        {768, 70, 20000, 10, 0, true},
        {1024, 33, 9000, 33, 5},
        {4096, 36, 3001, 5},
    };
    for (std::size_t i = 0; i < std::size(cases); ++i)
      check_case(t, t.device, cases[i], i % 2 == 0 ? 12 : 16);
  });
}

TEST_CASE("hamming_topk: queries in slices when the scratch memory is small") {
  ferry_test::for_each_backend({"hamming_topk"}, [](BackendUnderTest& t) {
    // 3 chunks of k = 512 kept per query: 12 KiB of candidates; slabs of 64 KiB hold 5 queries'.
    t.options.scratch_slab_bytes = 64 << 10;
    const ferry::Device small = REQUIRE_VALUE(t.open_another());
    check_case(t, small, {256, 13, 5000, 512, 0, true});
    // One query's candidates do not fit: a clear error, nothing recorded.
    const Buffer codes = REQUIRE_VALUE(small.create_buffer(40000 * 32));
    const Buffer out = REQUIRE_VALUE(small.create_buffer(2 * 1024 * 4));
    CommandList commands;
    const ferry::Status status = ferry::hamming_topk(
        commands, {codes, 0, codes, 0, out, 0, out, 1024 * 4}, {256, 1, 40000, 1024});
    CHECK_MESSAGE(status.code() == ferry::ErrorCode::resource_exhausted, status.to_string());
    CHECK(status.message().find("scratch") != std::string::npos);
    CHECK(commands.empty());
  });
}

TEST_CASE("hamming_topk: searches recorded in one list share the scratch, pools where it fits") {
  ferry_test::for_each_backend({"hamming_topk"}, [](BackendUnderTest& t) {
    // A GPU backend's pools for one search take about 200 KiB here, its candidates about 50:
    // two slabs of 256 KiB give two searches their pools, and the next ones only their
    // candidates (recording them failed when every search asked for its pools).
    t.options.scratch_slab_bytes = 256 << 10;
    t.options.scratch_max_slabs = 2;
    const ferry::Device small = REQUIRE_VALUE(t.open_another());
    const SearchCase c{256, 40, 30000, 10};
    const std::uint64_t out_bytes = std::uint64_t{c.queries} * c.k * 4;
    struct Search {
      std::vector<std::byte> queries;
      TopK truth;
      Buffer query_buffer, outputs;
    };
    const std::vector<std::byte> database = make_codes(t.rng, c.rows, c.bits, 0);
    const Buffer database_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(small, database));
    std::vector<Search> searches(4);
    CommandList commands;
    for (Search& search : searches) {
      search.queries = make_codes(t.rng, c.queries, c.bits, 0);
      search.truth = brute_force(search.queries, database, c.bits, c.k);
      search.query_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(small, search.queries));
      search.outputs = REQUIRE_VALUE(small.create_buffer(2 * out_bytes));
      const HammingTopkBuffers buffers{search.query_buffer, 0, database_buffer, 0,
                                       search.outputs,      0, search.outputs,  out_bytes};
      REQUIRE_OK(ferry::hamming_topk(commands, buffers, {c.bits, c.queries, c.rows, c.k}));
    }
    const ferry::TimelinePoint done =
        REQUIRE_VALUE(small.queue(QueueKind::compute).submit(std::move(commands)));
    REQUIRE_OK(done.wait(ferry_test::kLongWait));
    for (std::size_t n = 0; n < searches.size(); ++n) {
      INFO("search " << n);
      const std::vector<std::byte> bytes =
          REQUIRE_VALUE(ferry_test::read_bytes(small, searches[n].outputs, 0, 2 * out_bytes));
      std::vector<std::uint32_t> distances(out_bytes / 4), indices(out_bytes / 4);
      std::memcpy(distances.data(), bytes.data(), out_bytes);
      std::memcpy(indices.data(), bytes.data() + out_bytes, out_bytes);
      CHECK(distances == searches[n].truth.distances);
      CHECK(indices == searches[n].truth.indices);
    }
  });
}

TEST_CASE("hamming_topk: bad parameters are clear errors and record nothing") {
  ferry_test::for_each_backend({"hamming_topk"}, [](BackendUnderTest& t) {
    const Buffer codes = REQUIRE_VALUE(t.device.create_buffer(64 * 64));
    const Buffer out = REQUIRE_VALUE(t.device.create_buffer(4096));
    const HammingTopkParams good{256, 2, 8, 4};  // 64 + 256 bytes of codes, 32 bytes per output
    const HammingTopkBuffers buffers{codes, 0, codes, 64, out, 0, out, 64};
    {
      CommandList commands;
      CHECK_OK(ferry::hamming_topk(commands, buffers, good));  // the baseline is accepted
    }
    using ferry::ErrorCode;
    auto check = [&](const HammingTopkBuffers& b, const HammingTopkParams& p, ErrorCode code,
                     const char* what) {
      INFO(what);
      CommandList commands;
      const ferry::Status status = ferry::hamming_topk(commands, b, p);
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK(!status.message().empty());
      CHECK(commands.empty());
    };
    HammingTopkParams p = good;
    p.code_bits = 0;
    check(buffers, p, ErrorCode::invalid_argument, "code_bits 0");
    p.code_bits = 96;
    check(buffers, p, ErrorCode::invalid_argument, "code_bits not a multiple of 64");
    p.code_bits = 4160;
    check(buffers, p, ErrorCode::invalid_argument, "code_bits above 4096");
    p = good;
    p.k = 0;
    check(buffers, p, ErrorCode::invalid_argument, "k 0");
    p.k = 1025;
    check(buffers, p, ErrorCode::invalid_argument, "k above the maximum");
    p = good;
    p.queries = 0;
    check(buffers, p, ErrorCode::invalid_argument, "no queries");
    p = good;
    p.database_rows = 0;
    check(buffers, p, ErrorCode::invalid_argument, "no rows");
    p.database_rows = ferry::kHammingMaxDatabaseRows;
    check(buffers, p, ErrorCode::invalid_argument, "rows past the index range");
    HammingTopkBuffers b = buffers;
    b.database_offset = 66;
    check(b, good, ErrorCode::invalid_argument, "an offset not a multiple of 4");
    b = buffers;
    b.database_offset = 64 * 64 - 64;
    check(b, good, ErrorCode::out_of_range, "the database past its buffer");
    b = buffers;
    b.indices_offset = 4096 - 16;
    check(b, good, ErrorCode::out_of_range, "indices past their buffer");
    b = buffers;
    b.indices_offset = 16;
    check(b, good, ErrorCode::invalid_argument, "outputs overlapping");
  });
}
