// BinaryIndex against a model computed here, by brute force from the definitions in
// ferry/binary_index.hpp (never with the library's code): codes by comparing each value with its
// threshold, every query's Hamming distance to every row sorted by (distance, id), rescoring by an
// std::fma chain (or exact int8 sums) over the Hamming candidates sorted by (score, id). Random
// data of awkward sizes with duplicated rows (ties), several adds, every metric and threshold
// kind, 16-bit inputs; a tiny device budget (codes streamed from the host, kept vectors read in
// place) against a resident index; save/load round trips; damaged files; bad input; an add that
// fails half way. Packed codes (add_codes, search_codes) against a brute-force Hamming truth on
// the codes themselves, and against add() of floats with the same sign bits.
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "harness.hpp"
#include "index/index_model.hpp"

using ferry::ErrorCode;
using namespace index_test;  // the index types, BackendUnderTest, the model and the checks

namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() /
         ("ferry_binary_index_" + std::to_string(ferry_test::base_seed()) + "_" + name);
}

}  // namespace

TEST_CASE("BinaryIndex: Hamming search over several adds matches the brute-force truth") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const std::vector<Case> cases = hamming_cases();
    for (const Case& c : cases) {
      INFO(describe(c));
      const BinaryIndexOptions o = options_for(c.dims, c.metric, c.threshold, c.keep, c.type, t.rng);
      BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      Model model(o);
      build(t, c, index, model);
      check_searches(t, c, index, model, false);
    }
  });
}

TEST_CASE("BinaryIndex: rescoring with float32 and int8 vectors matches the truth") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    const Case cases[] = {
        {48, IndexMetric::inner_product, IndexThreshold::zero, KeptVectors::float32,
         ElementType::float32, {150, 77}},
        {100, IndexMetric::l2, IndexThreshold::first_add_mean, KeptVectors::float32,
         ElementType::float16, {211}},
        {65, IndexMetric::cosine, IndexThreshold::zero, KeptVectors::float32,
         ElementType::bfloat16, {40, 150}},
        {96, IndexMetric::inner_product, IndexThreshold::given, KeptVectors::int8,
         ElementType::float32, {120, 90}},
        {70, IndexMetric::l2, IndexThreshold::zero, KeptVectors::int8, ElementType::float16, {230}},
        {33, IndexMetric::cosine, IndexThreshold::first_add_mean, KeptVectors::int8,
         ElementType::float32, {64, 64, 1}},
    };
    for (const Case& c : cases) {
      INFO(describe(c));
      const BinaryIndexOptions o = options_for(c.dims, c.metric, c.threshold, c.keep, c.type, t.rng);
      BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      Model model(o);
      build(t, c, index, model);
      check_searches(t, c, index, model, true);
    }
  });
}

TEST_CASE("BinaryIndex: a tiny device budget streams from the host with identical results") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    for (const KeptVectors keep : {KeptVectors::float32, KeptVectors::int8}) {
      const Case c{72, IndexMetric::inner_product, IndexThreshold::first_add_mean, keep,
                   ElementType::float32, {45, 260, 9}};
      INFO(describe(c));
      BinaryIndexOptions o = options_for(c.dims, c.metric, c.threshold, c.keep, c.type, t.rng);
      // Every row in one device segment (a search is one chain on the device), in many device
      // segments (merged on the host), and mostly in host memory.
      BinaryIndex resident = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      o.memory.device_segment_bytes = 1 << 10;
      BinaryIndex segmented = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      o.memory = tiny_memory();
      BinaryIndex streamed = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      Model model(o);
      for (const std::uint64_t count : c.adds) {
        const Rows rows = make_rows(t.rng, count, c.dims, c.type);
        REQUIRE_OK(resident.add(rows.bytes, count));
        REQUIRE_OK(segmented.add(rows.bytes, count));
        REQUIRE_OK(streamed.add(rows.bytes, count));
        model.add(rows);
      }
      CHECK(resident.stats().code_segments == 1);
      CHECK(resident.stats().vector_segments == 1);
      CHECK(segmented.stats().code_segments >= 3);
      CHECK(segmented.stats().vector_segments >= 3);
      CHECK(segmented.stats().device_vector_rows == 314);
      const ferry::BinaryIndexStats stats = streamed.stats();
      CHECK(stats.rows == 314);
      CHECK(stats.device_code_rows > 0);
      CHECK(stats.device_code_rows < stats.rows);  // the rest is streamed
      CHECK(stats.device_vector_rows > 0);
      CHECK(stats.device_vector_rows < stats.rows);  // the rest read in place
      CHECK(stats.code_segments >= 3);
      CHECK(resident.stats().device_code_rows == 314);
      const Rows queries = make_rows(t.rng, 11, c.dims, c.type);
      const SearchParams all[] = {{1, 1, false}, {17, 1, false}, {400, 1, false},
                                  {3, 7, true},  {10, 4, true},  {100, 10, true}};
      for (const SearchParams& params : all) {
        INFO("k " << params.k << ", oversample " << params.oversample << ", rescore " << params.rescore);
        const SearchResults expected = model.search(queries, params);
        check_results(REQUIRE_VALUE(resident.search(queries.bytes, 11, params)), expected, "resident");
        check_results(REQUIRE_VALUE(segmented.search(queries.bytes, 11, params)), expected,
                      "segmented");
        check_results(REQUIRE_VALUE(streamed.search(queries.bytes, 11, params)), expected, "streamed");
      }
      // Enough queries that the host routes and merges them in several ranges at once, over
      // many segments.
      const Rows batch = make_rows(t.rng, 101, c.dims, c.type);
      const SearchParams params{10, 10, true};
      const SearchResults expected = model.search(batch, params);
      check_results(REQUIRE_VALUE(streamed.search(batch.bytes, 101, params)), expected,
                    "streamed, 101 queries");
      check_results(REQUIRE_VALUE(resident.search(batch.bytes, 101, params)), expected,
                    "resident, 101 queries");
    }
  });
}

TEST_CASE("BinaryIndex: save and load give the same index, in any placement") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    const Case c{150, IndexMetric::cosine, IndexThreshold::first_add_mean, KeptVectors::int8,
                 ElementType::float16, {70, 131}};
    const BinaryIndexOptions o = options_for(c.dims, c.metric, c.threshold, c.keep, c.type, t.rng);
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    Model model(o);
    build(t, c, index, model);
    const fs::path path = temp_file(std::string(ferry::to_string(t.backend)) + "_round_trip.bix");
    REQUIRE_OK(index.save(path));
    BinaryIndex loaded = REQUIRE_VALUE(BinaryIndex::load(t.device, path, tiny_memory()));
    CHECK(loaded.size() == index.size());
    CHECK(loaded.options().dims == o.dims);
    CHECK(loaded.options().metric == o.metric);
    CHECK(loaded.options().input_type == o.input_type);
    CHECK(loaded.thresholds() == index.thresholds());
    CHECK(loaded.int8_scale() == index.int8_scale());
    CHECK(loaded.stats().device_code_rows < loaded.size());
    const Rows queries = make_rows(t.rng, 6, c.dims, c.type);
    for (const SearchParams& params : {SearchParams{10, 1, false}, SearchParams{4, 5, true}}) {
      const SearchResults expected = model.search(queries, params);
      check_results(REQUIRE_VALUE(index.search(queries.bytes, 6, params)), expected, "saved");
      check_results(REQUIRE_VALUE(loaded.search(queries.bytes, 6, params)), expected, "loaded");
    }
    // The loaded index saves to the same bytes, and keeps growing like the original.
    const fs::path again = temp_file(std::string(ferry::to_string(t.backend)) + "_again.bix");
    REQUIRE_OK(loaded.save(again));
    CHECK(file_bytes(again) == file_bytes(path));
    const Rows more = make_rows(t.rng, 33, c.dims, c.type);
    CHECK(REQUIRE_VALUE(loaded.add(more.bytes, 33)) == model.rows());
    model.add(more);
    check_results(REQUIRE_VALUE(loaded.search(queries.bytes, 6, {12, 1, false})),
                  model.search(queries, {12, 1, false}), "loaded, then added to");
    // An empty index round-trips too (its mean thresholds still unknown).
    BinaryIndex empty = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    REQUIRE_OK(empty.save(again));
    BinaryIndex empty_loaded = REQUIRE_VALUE(BinaryIndex::load(t.device, again));
    CHECK(empty_loaded.size() == 0);
    CHECK(empty_loaded.thresholds().empty());
    fs::remove(path);
    fs::remove(again);
  });
}

TEST_CASE("BinaryIndex: truncated, corrupted and foreign files are refused, naming the problem") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const BinaryIndexOptions o = options_for(40, IndexMetric::l2, IndexThreshold::given,
                                             KeptVectors::float32, ElementType::float32, t.rng);
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    const Rows rows = make_rows(t.rng, 50, 40, ElementType::float32);
    REQUIRE_OK(index.add(rows.bytes, 50));
    const fs::path good = temp_file(std::string(ferry::to_string(t.backend)) + "_good.bix");
    const fs::path bad = temp_file(std::string(ferry::to_string(t.backend)) + "_bad.bix");
    REQUIRE_OK(index.save(good));
    const std::vector<char> bytes = file_bytes(good);
    REQUIRE(bytes.size() == 64 + 40 * 4 + 50 * (8 + 160));

    auto refused = [&](const std::vector<char>& content, const char* expected, const char* what) {
      INFO(what);
      write_file(bad, content);
      const auto loaded = BinaryIndex::load(t.device, bad);
      REQUIRE(!loaded.ok());
      CHECK(loaded.status().code() == ErrorCode::data_corrupt);  // whatever the damage
      const std::string message = loaded.status().message();
      CHECK_MESSAGE(message.find(bad.string()) != std::string::npos, message);
      CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
    };
    for (const std::size_t size : {std::size_t{0}, std::size_t{5}, std::size_t{40}, std::size_t{64},
                                   std::size_t{64 + 17}, bytes.size() / 2, bytes.size() - 1}) {
      INFO("truncated to " << size);
      refused(std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)),
              size < 8 ? "too short" : "truncated", "truncated");
    }
    std::vector<char> longer = bytes;
    longer.push_back('x');
    refused(longer, "unexpected bytes", "a byte appended");
    for (const std::size_t at : {std::size_t{64}, std::size_t{64 + 160 + 3}, bytes.size() - 1}) {
      std::vector<char> flipped = bytes;
      flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
      refused(flipped, "corrupted payload", "a payload bit flipped");
    }
    std::vector<char> header = bytes;
    header[30] = static_cast<char>(header[30] ^ 1);  // inside the row count
    refused(header, "corrupted header", "a header bit flipped");
    std::vector<char> version = bytes;
    version[8] = 2;
    refused(version, "format version 2", "another version");
    std::vector<char> magic = bytes;
    magic[0] = 'G';
    refused(magic, "not a BinaryIndex file", "another format");
    const auto missing = BinaryIndex::load(t.device, temp_file("does_not_exist.bix"));
    CHECK_ERROR(missing, ErrorCode::not_found);
    CHECK(missing.status().message().find("does_not_exist.bix") != std::string::npos);
    // Paths that are not regular files are refused at once, naming what they are: a FIFO is
    // never opened for a blocking read (nobody writes to this one).
    const fs::path folder = temp_file(std::string(ferry::to_string(t.backend)) + "_folder.bix");
    fs::create_directories(folder);
    const auto from_folder = BinaryIndex::load(t.device, folder);
    CHECK_ERROR(from_folder, ErrorCode::invalid_argument);
    CHECK(from_folder.status().message().find("is a directory") != std::string::npos);
    // The writer names the same faults with the same codes.
    CHECK_ERROR(index.save(folder), ErrorCode::invalid_argument);
    CHECK_ERROR(index.save(folder / "no_such_folder" / "x.bix"), ErrorCode::not_found);
    const fs::path fifo = temp_file(std::string(ferry::to_string(t.backend)) + "_fifo.bix");
    fs::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    {
      const ferry_test::Watchdog watchdog("BinaryIndex::load of a FIFO");
      const auto from_fifo = BinaryIndex::load(t.device, fifo);
      CHECK_ERROR(from_fifo, ErrorCode::invalid_argument);
      CHECK(from_fifo.status().message().find("FIFO") != std::string::npos);
    }
    fs::remove(folder);
    fs::remove(fifo);
    // The good file still loads.
    CHECK_OK(BinaryIndex::load(t.device, good));
    fs::remove(good);
    fs::remove(bad);
  });
}

TEST_CASE("BinaryIndex: bad input is a clear error and changes nothing") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    auto create_error = [&](BinaryIndexOptions o, const char* expected) {
      INFO(expected);
      const auto made = BinaryIndex::create(t.device, o);
      REQUIRE(!made.ok());
      CHECK(made.status().code() == ErrorCode::invalid_argument);
      CHECK_MESSAGE(made.status().message().find(expected) != std::string::npos,
                    made.status().message());
    };
    BinaryIndexOptions o;
    o.dims = 0;
    create_error(o, "dims 0");
    o.dims = 4097;
    create_error(o, "dims 4097");
    o.dims = 16;
    o.threshold = IndexThreshold::given;
    o.thresholds.assign(15, 0.0f);
    create_error(o, "15 thresholds");
    o.thresholds.assign(16, 0.0f);
    o.thresholds[3] = std::numeric_limits<float>::quiet_NaN();
    create_error(o, "thresholds[3]");
    o.threshold = IndexThreshold::zero;
    create_error(o, "only 'given' takes them");
    o.thresholds.clear();
    o.int8_scale = 2.0f;
    create_error(o, "int8_scale");
    o.keep = KeptVectors::int8;
    o.int8_scale = -1.0f;
    create_error(o, "int8_scale");
    o.int8_scale = 0.0f;
    o.memory.staging_slabs = 1;
    create_error(o, "staging_slabs");
    o.memory = {};
    o.memory.staging_slab_bytes = 32;
    create_error(o, "staging_slab_bytes");
    o.memory = {};

    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    const Rows rows = make_rows(t.rng, 20, 16, ElementType::float32);
    const std::span<const float> values(rows.values);
    CHECK_ERROR(index.search(values, 20, {}), ErrorCode::failed_precondition);  // empty
    CHECK_ERROR(index.add(values, 0), ErrorCode::invalid_argument);
    CHECK_ERROR(index.add(values, 21), ErrorCode::invalid_argument);  // dims mismatch
    CHECK_ERROR(index.add(values.first(16 * 19 + 3), 19), ErrorCode::invalid_argument);
    CHECK(index.size() == 0);
    REQUIRE_OK(index.add(values, 20));
    auto search_error = [&](std::uint32_t count, SearchParams params, ErrorCode code,
                            const char* expected) {
      INFO(expected);
      const auto found = index.search(values.first(std::min<std::size_t>(values.size(), count * 16ull)),
                                      count, params);
      REQUIRE(!found.ok());
      CHECK(found.status().code() == code);
      CHECK_MESSAGE(found.status().message().find(expected) != std::string::npos,
                    found.status().message());
    };
    search_error(0, {}, ErrorCode::invalid_argument, "queries_count");
    search_error(2, {0, 1, false}, ErrorCode::invalid_argument, "k 0");
    search_error(2, {1025, 1, false}, ErrorCode::invalid_argument, "k 1025");
    search_error(2, {10, 0, true}, ErrorCode::invalid_argument, "oversample");
    search_error(2, {100, 11, true}, ErrorCode::invalid_argument, "k * oversample");
    search_error(30, {10, 1, false}, ErrorCode::invalid_argument, "queries hold");
    CHECK_OK(index.search(values.first(32), 2, {10, 1, false}));

    BinaryIndexOptions plain;
    plain.dims = 16;
    plain.input_type = ElementType::float16;
    BinaryIndex half = REQUIRE_VALUE(BinaryIndex::create(t.device, plain));
    CHECK_ERROR(half.add(values, 20), ErrorCode::invalid_argument);  // float rows, float16 index
    const std::vector<std::byte> half_rows(20 * 16 * 2, std::byte{0x3c});
    REQUIRE_OK(half.add(half_rows, 20));
    const auto no_vectors = half.search(std::span(half_rows).first(64), 2, {5, 2, true});
    REQUIRE(!no_vectors.ok());
    CHECK(no_vectors.status().code() == ErrorCode::failed_precondition);
    CHECK(no_vectors.status().message().find("keeps no vectors") != std::string::npos);

    BinaryIndex moved = std::move(index);
    CHECK_ERROR(index.add(values, 20), ErrorCode::released);  // NOLINT: testing the moved-from
    CHECK(moved.size() == 20);
  });
}

TEST_CASE("BinaryIndex: an add that fails half way leaves the index as it was") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    BinaryIndexOptions o = options_for(56, IndexMetric::inner_product, IndexThreshold::first_add_mean,
                                       KeptVectors::float32, ElementType::float32, t.rng);
    o.memory = tiny_memory();
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    Model model(o);
    const Rows queries = make_rows(t.rng, 5, o.dims, o.input_type);
    for (const ferry::FaultSite site :
         {ferry::FaultSite::submit, ferry::FaultSite::allocation, ferry::FaultSite::wait}) {
      for (const std::uint64_t call : {1, 3, 8}) {
        INFO("failing " << ferry::to_string(site) << " call " << call << " after " << model.rows() << " rows");
        const Rows rows = make_rows(t.rng, 90, o.dims, o.input_type);
        const ferry::BinaryIndexStats before = index.stats();
        const std::vector<float> thresholds = index.thresholds();
        ferry::Status status;
        {
          const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(site, call));
          status = index.add(rows.bytes, 90).status();
        }
        if (status.ok()) {  // the add needed fewer calls than that: it counts
          model.add(rows);
        } else {
          CHECK_MESSAGE(status.message().find("nothing added") != std::string::npos, status.to_string());
          CHECK(index.stats().rows == before.rows);
          CHECK(index.stats().code_segments == before.code_segments);
          CHECK(index.stats().device_bytes == before.device_bytes);
          CHECK(index.thresholds() == thresholds);
        }
        // Rows added after a failure get the ids they would have had.
        const Rows next = make_rows(t.rng, 40, o.dims, o.input_type);
        CHECK(REQUIRE_VALUE(index.add(next.bytes, 40)) == model.rows());
        model.add(next);
        check_results(REQUIRE_VALUE(index.search(queries.bytes, 5, {20, 1, false})),
                      model.search(queries, {20, 1, false}), "after the fault");
      }
    }
  });
}

// ---- codes added and searched as they are (add_codes, search_codes) ---------------------------


TEST_CASE("BinaryIndex: a device segment grown ahead of the rows falls back to the rows alone") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    BinaryIndexOptions o = options_for(56, IndexMetric::l2, IndexThreshold::zero,
                                       KeptVectors::none, ElementType::float32, t.rng);
    o.memory.device_segment_bytes = 4 << 10;  // 512 codes of 8 bytes
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    Model model(o);
    const Rows first = make_rows(t.rng, 100, o.dims, o.input_type);
    REQUIRE_OK(index.add(first.bytes, 100));
    model.add(first);
    CHECK(index.stats().code_segments == 1);  // 512 rows: the first segment's least
    // 600 rows more: geometric growth asks for a second segment of 512 rows, more than the 188
    // rows that do not fit the first; that allocation fails, one of 188 rows is made instead.
    const Rows second = make_rows(t.rng, 600, o.dims, o.input_type);
    {
      const ferry_test::ScopedFaultPlan faults(
          ferry::FaultPlan{}.fail(ferry::FaultSite::allocation, 1));
      REQUIRE_OK(index.add(second.bytes, 600));
      CHECK(ferry::fault_counts().injected[static_cast<int>(ferry::FaultSite::allocation)] == 1);
    }
    model.add(second);
    CHECK(index.stats().code_segments == 2);
    CHECK(index.stats().device_bytes == 700 * 8);
    const Rows queries = make_rows(t.rng, 7, o.dims, o.input_type);
    for (const std::uint32_t k : {1u, 9u, 700u}) {
      const SearchParams params{k, 1, false};
      check_results(REQUIRE_VALUE(index.search(queries.bytes, 7, params)),
                    model.search(queries, params), "after the fallback");
    }
  });
}

TEST_CASE("BinaryIndex: a lone device segment regrows as one, and a failed add puts it back") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    // 2048 dims: codes of 256 bytes (the first device segment, 1 MiB, holds 4096), float32
    // vectors of 8 KiB (the first holds the first add's rows).
    const BinaryIndexOptions o = options_for(2048, IndexMetric::inner_product, IndexThreshold::zero,
                                             KeptVectors::float32, ElementType::float32, t.rng);
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    Model model(o);
    const Rows first = make_rows(t.rng, 1500, o.dims, o.input_type);
    REQUIRE_OK(index.add(first.bytes, 1500));
    model.add(first);
    const ferry::BinaryIndexStats before = index.stats();
    CHECK(before.code_segments == 1);
    CHECK(before.vector_segments == 1);
    // The next add must regrow the vectors' segment; its copy is the add's first submission.
    const Rows second = make_rows(t.rng, 1500, o.dims, o.input_type);
    {
      const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(ferry::FaultSite::submit, 1));
      CHECK_ERROR(index.add(second.bytes, 1500), ErrorCode::backend_error);
    }
    CHECK(index.stats().rows == 1500);
    CHECK(index.stats().device_bytes == before.device_bytes);
    CHECK(index.stats().vector_segments == 1);
    for (const Rows* rows : {&second, &first}) {  // 4500 rows: the codes regrow too
      REQUIRE_OK(index.add(rows->bytes, 1500));
      model.add(*rows);
    }
    const ferry::BinaryIndexStats after = index.stats();
    CHECK(after.rows == 4500);
    CHECK(after.code_segments == 1);
    CHECK(after.vector_segments == 1);
    CHECK(after.device_code_rows == 4500);
    CHECK(after.device_vector_rows == 4500);
    const Rows queries = make_rows(t.rng, 6, o.dims, o.input_type);
    for (const SearchParams& params : {SearchParams{7, 1, false}, SearchParams{5, 8, true}}) {
      check_results(REQUIRE_VALUE(index.search(queries.bytes, 6, params)),
                    model.search(queries, params), "regrown");
    }
  });
}

TEST_CASE("BinaryIndex: add_codes and search_codes match the brute-force truth, in any placement") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    for (const std::uint32_t dims : {5u, 37u, 64u, 200u, 256u}) {
      for (const bool tiny : {false, true}) {
        INFO("dims " << dims << ", tiny device budget " << tiny);
        BinaryIndex index =
            REQUIRE_VALUE(BinaryIndex::create(t.device, codes_options(dims, tiny ? tiny_memory()
                                                                                 : BinaryIndexMemory{})));
        std::vector<std::byte> all;
        for (const std::uint64_t count : {1u, 130u, 57u, 200u}) {
          const std::vector<std::byte> codes = make_codes(t.rng, count, dims);
          const std::uint64_t rows_before = all.size() / ferry::binary_code_bytes(dims);
          CHECK(REQUIRE_VALUE(index.add_codes(codes, count)) == rows_before);
          all.insert(all.end(), codes.begin(), codes.end());
        }
        const ferry::BinaryIndexStats stats = index.stats();
        CHECK(stats.rows == 388);
        if (tiny) {
          CHECK(stats.device_code_rows > 0);
          CHECK(stats.device_code_rows < stats.rows);  // the rest is streamed
          CHECK(stats.code_segments >= 3);
        } else {
          CHECK(stats.device_code_rows == stats.rows);
        }
        std::vector<std::byte> queries = make_codes(t.rng, 9, dims);
        // A query equal to a database row: distance 0, ties with its copies by id.
        std::memcpy(queries.data(), all.data() + 77 * ferry::binary_code_bytes(dims),
                    ferry::binary_code_bytes(dims));
        for (const std::uint32_t k : {1u, 10u, 1000u}) {  // 1000: past the rows, padded
          INFO("k " << k);
          check_results(REQUIRE_VALUE(index.search_codes(queries, 9, {k, 1, false})),
                        code_truth(all, queries, dims, k), "search_codes against the truth");
        }
      }
    }
  });
}

TEST_CASE("BinaryIndex: codes of the signs search like the float rows they come from") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    for (const ElementType type : {ElementType::float32, ElementType::float16}) {
      const std::uint32_t dims = 101;
      INFO("input " << ferry::to_string(type));
      BinaryIndexOptions o = codes_options(dims, tiny_memory());
      o.input_type = type;
      BinaryIndex floats = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      BinaryIndex codes = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      BinaryIndex mixed = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      std::vector<std::byte> all;
      std::size_t add = 0;
      for (const std::uint64_t count : {60u, 3u, 140u}) {
        const Rows rows = make_rows(t.rng, count, dims, type);
        const std::vector<std::byte> row_codes = sign_codes(rows, dims);
        REQUIRE_OK(floats.add(rows.bytes, count));
        REQUIRE_OK(codes.add_codes(row_codes, count));
        // Mixed: add() and add_codes() in turn continue the same ids.
        const std::uint64_t first = add++ % 2 == 0 ? REQUIRE_VALUE(mixed.add(rows.bytes, count))
                                                   : REQUIRE_VALUE(mixed.add_codes(row_codes, count));
        CHECK(first == all.size() / ferry::binary_code_bytes(dims));
        all.insert(all.end(), row_codes.begin(), row_codes.end());
      }
      const Rows queries = make_rows(t.rng, 8, dims, type);
      const std::vector<std::byte> query_codes = sign_codes(queries, dims);
      for (const std::uint32_t k : {1u, 25u, 300u}) {
        INFO("k " << k);
        const SearchResults expected = code_truth(all, query_codes, dims, k);
        const SearchParams params{k, 1, false};
        check_results(REQUIRE_VALUE(floats.search(queries.bytes, 8, params)), expected, "floats");
        check_results(REQUIRE_VALUE(floats.search_codes(query_codes, 8, params)), expected,
                      "floats, searched by codes");
        check_results(REQUIRE_VALUE(codes.search(queries.bytes, 8, params)), expected,
                      "codes, searched by floats");
        check_results(REQUIRE_VALUE(codes.search_codes(query_codes, 8, params)), expected, "codes");
        check_results(REQUIRE_VALUE(mixed.search_codes(query_codes, 8, params)), expected, "mixed");
      }
      // The same index either way: the saved files are the same bytes, and a loaded one searches
      // the same (placed otherwise).
      const std::string backend(ferry::to_string(t.backend));
      const fs::path from_floats = temp_file(backend + "_from_floats.bix");
      const fs::path from_codes = temp_file(backend + "_from_codes.bix");
      REQUIRE_OK(floats.save(from_floats));
      REQUIRE_OK(codes.save(from_codes));
      CHECK(file_bytes(from_codes) == file_bytes(from_floats));
      BinaryIndex loaded = REQUIRE_VALUE(BinaryIndex::load(t.device, from_codes));
      CHECK(loaded.size() == codes.size());
      check_results(REQUIRE_VALUE(loaded.search_codes(query_codes, 8, {30, 1, false})),
                    code_truth(all, query_codes, dims, 30), "loaded");
      fs::remove(from_floats);
      fs::remove(from_codes);
    }
  });
}

TEST_CASE("BinaryIndex: bad codes are a clear error and change nothing") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const std::uint32_t dims = 70;  // 16 bytes per code, bits 70..127 padding
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, codes_options(dims, {})));
    std::vector<std::byte> codes = make_codes(t.rng, 12, dims);
    auto error = [](const auto& result, ErrorCode code, const char* expected) {
      INFO(expected);
      REQUIRE(!result.ok());
      CHECK(result.status().code() == code);
      CHECK_MESSAGE(result.status().message().find(expected) != std::string::npos,
                    result.status().message());
    };
    error(index.search_codes(std::span(codes).first(32), 2, {}), ErrorCode::failed_precondition,
          "empty");
    error(index.add_codes(codes, 0), ErrorCode::invalid_argument, "rows must be > 0");
    error(index.add_codes(codes, 11), ErrorCode::invalid_argument,
          "codes hold 192 bytes, but 11 codes of dims 70 (16 bytes each) take 176");
    error(index.add_codes(std::span(codes).first(191), 12), ErrorCode::invalid_argument,
          "codes hold 191 bytes");
    std::vector<std::byte> padded = codes;
    padded[5 * 16 + 8] |= std::byte{0x40};  // bit 70 of code 5
    error(index.add_codes(padded, 12), ErrorCode::invalid_argument, "code 5 has bits set past dims 70");
    padded = codes;
    padded[11 * 16 + 15] = std::byte{0x80};  // bit 127 of code 11
    error(index.add_codes(padded, 12), ErrorCode::invalid_argument, "code 11 has bits set past dims 70");
    CHECK(index.size() == 0);
    REQUIRE_OK(index.add_codes(codes, 12));
    CHECK(index.size() == 12);

    error(index.search_codes(codes, 0, {}), ErrorCode::invalid_argument, "queries_count");
    error(index.search_codes(codes, 3, {}), ErrorCode::invalid_argument,
          "query_codes hold 192 bytes, but 3 codes of dims 70 (16 bytes each) take 48");
    error(index.search_codes(std::span(codes).first(48), 3, {0, 1, false}),
          ErrorCode::invalid_argument, "k 0");
    error(index.search_codes(std::span(codes).first(48), 3, {5, 2, true}),
          ErrorCode::invalid_argument, "rescoring needs the query vectors");
    error(index.search_codes(padded, 12, {}), ErrorCode::invalid_argument,
          "code 11 has bits set past dims 70");
    CHECK_OK(index.search_codes(std::span(codes).first(48), 3, {5, 1, false}));

    // Kept vectors: codes have none.
    for (const KeptVectors keep : {KeptVectors::float32, KeptVectors::int8}) {
      BinaryIndexOptions o = codes_options(dims, {});
      o.keep = keep;
      BinaryIndex keeping = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
      error(keeping.add_codes(codes, 12), ErrorCode::invalid_argument,
            keep == KeptVectors::float32 ? "the index keeps float32 vectors"
                                         : "the index keeps int8 vectors");
      CHECK(keeping.size() == 0);
    }
    // Mean thresholds: fixed by the first add(), codes only after it.
    BinaryIndexOptions mean = codes_options(dims, {});
    mean.threshold = IndexThreshold::first_add_mean;
    BinaryIndex means = REQUIRE_VALUE(BinaryIndex::create(t.device, mean));
    error(means.add_codes(codes, 12), ErrorCode::failed_precondition, "first_add_mean");
    CHECK(means.size() == 0);
    const Rows rows = make_rows(t.rng, 30, dims, ElementType::float32);
    REQUIRE_OK(means.add(rows.bytes, 30));
    CHECK(REQUIRE_VALUE(means.add_codes(codes, 12)) == 30);

    BinaryIndex moved = std::move(index);
    CHECK_ERROR(index.add_codes(codes, 12), ErrorCode::released);  // NOLINT: the moved-from
    CHECK_ERROR(index.search_codes(codes, 12, {}), ErrorCode::released);  // NOLINT
    CHECK(moved.size() == 12);
  });
}

TEST_CASE("BinaryIndex: add_codes that fails half way leaves the index as it was") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const std::uint32_t dims = 96;
    BinaryIndex index = REQUIRE_VALUE(BinaryIndex::create(t.device, codes_options(dims, tiny_memory())));
    std::vector<std::byte> all;
    const std::vector<std::byte> queries = make_codes(t.rng, 5, dims);
    for (const ferry::FaultSite site :
         {ferry::FaultSite::submit, ferry::FaultSite::allocation, ferry::FaultSite::wait}) {
      for (const std::uint64_t call : {1, 2, 5}) {
        INFO("failing " << ferry::to_string(site) << " call " << call << " after " << index.size() << " rows");
        const std::vector<std::byte> codes = make_codes(t.rng, 90, dims);
        const ferry::BinaryIndexStats before = index.stats();
        ferry::Status status;
        {
          const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(site, call));
          status = index.add_codes(codes, 90).status();
        }
        if (status.ok()) {  // the add needed fewer calls than that: it counts
          all.insert(all.end(), codes.begin(), codes.end());
        } else {
          CHECK_MESSAGE(status.message().find("nothing added") != std::string::npos, status.to_string());
          CHECK(index.stats().rows == before.rows);
          CHECK(index.stats().code_segments == before.code_segments);
          CHECK(index.stats().device_bytes == before.device_bytes);
        }
        const std::vector<std::byte> next = make_codes(t.rng, 40, dims);
        CHECK(REQUIRE_VALUE(index.add_codes(next, 40)) == all.size() / 16);
        all.insert(all.end(), next.begin(), next.end());
        check_results(REQUIRE_VALUE(index.search_codes(queries, 5, {20, 1, false})),
                      code_truth(all, queries, dims, 20), "after the fault");
      }
    }
  });
}
