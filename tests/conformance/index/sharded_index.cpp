// ShardedIndex against the same brute-force model as BinaryIndex (index_model.hpp): an index split
// over several devices must return exactly what one index over every row returns. Shards on
// every device of the backend (or the backend's device opened again where it has one), mixed with
// the CPU reference backend, with uneven weights, shards left empty, streamed placement, every
// metric, threshold kind and kept-vector kind; packed codes; the placement of rows by weight; bad
// input; an add that fails on one shard leaving every shard as it was. Files: a sharded index
// saves the bytes one BinaryIndex of the same adds saves, and loads (as a BinaryIndex, or sharded
// over other devices) into the same index, which keeps growing; damaged files and bad arguments.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "harness.hpp"
#include "index/index_model.hpp"

using ferry::Device;
using ferry::ErrorCode;
using ferry::ShardedIndex;
using ferry::ShardedIndexOptions;
using ferry_test::BackendUnderTest;
using namespace index_test;

namespace {

// Devices for shards: several devices of the backend (harness.hpp), then the CPU reference.
std::vector<Device> shard_devices(BackendUnderTest& t) {
  std::vector<Device> devices = t.several_devices();
  if (t.backend != ferry::Backend::cpu) devices.push_back(REQUIRE_VALUE(t.open_cpu_reference()));
  return devices;
}

ShardedIndexOptions sharded(const BinaryIndexOptions& index, std::vector<std::uint32_t> weights) {
  ShardedIndexOptions o;
  o.index = index;
  o.weights = std::move(weights);
  return o;
}

// Uneven weights for `n` shards: 3, 1, 2, 1, ...
std::vector<std::uint32_t> uneven(std::size_t n) {
  std::vector<std::uint32_t> weights(n);
  for (std::size_t i = 0; i < n; ++i) weights[i] = i == 0 ? 3 : 1 + static_cast<std::uint32_t>(i % 2 == 0);
  return weights;
}

namespace fs = std::filesystem;

fs::path temp_file(const BackendUnderTest& t, const std::string& name) {
  return fs::temp_directory_path() / ("ferry_sharded_index_" + std::to_string(ferry_test::base_seed()) +
                                      "_" + std::string(ferry::to_string(t.backend)) + "_" + name);
}

// A few Hamming and rescored searches of `index` (either kind) against the model; k 300 pads.
template <typename Index>
void check_loaded(const Index& index, const Model& model, const Rows& queries, bool rescore,
                  const char* what) {
  INFO(what);
  CHECK(index.size() == model.rows());
  std::vector<SearchParams> all = {{10, 1, false}, {300, 1, false}};
  if (rescore) all.insert(all.end(), {{1, 1, true}, {6, 4, true}});
  const auto count = static_cast<std::uint32_t>(queries.count);
  for (const SearchParams& params : all) {
    INFO("k " << params.k << ", oversample " << params.oversample << ", rescore " << params.rescore);
    check_results(REQUIRE_VALUE(index.search(queries.bytes, count, params)),
                  model.search(queries, params), "against the model");
  }
}

}  // namespace

TEST_CASE("ShardedIndex: Hamming search over several devices equals one index") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    INFO(devices.size() << " shards");
    const std::vector<Case> cases = hamming_cases();
    for (std::size_t i = 0; i < std::size(cases); ++i) {
      const Case& c = cases[i];
      INFO(describe(c));
      BinaryIndexOptions o = options_for(c.dims, c.metric, c.threshold, c.keep, c.type, t.rng);
      if (i == 1) o.memory = tiny_memory();  // shards streaming codes from the host
      ShardedIndex index = REQUIRE_VALUE(
          ShardedIndex::create(devices, sharded(o, i % 2 == 0 ? uneven(devices.size())
                                                              : std::vector<std::uint32_t>{})));
      Model model(o);
      build(t, c, index, model);
      check_searches(t, c, index, model, false);
    }
  });
}

TEST_CASE("ShardedIndex: rescoring over several devices equals one index") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    INFO(devices.size() << " shards");
    const Case cases[] = {
        {48, IndexMetric::inner_product, IndexThreshold::zero, KeptVectors::float32,
         ElementType::float32, {150, 77}},
        {100, IndexMetric::l2, IndexThreshold::first_add_mean, KeptVectors::float32,
         ElementType::float16, {211}},
        {96, IndexMetric::inner_product, IndexThreshold::given, KeptVectors::int8,
         ElementType::float32, {120, 90}},
        {33, IndexMetric::cosine, IndexThreshold::first_add_mean, KeptVectors::int8,
         ElementType::float32, {64, 64, 1}},
    };
    for (std::size_t i = 0; i < std::size(cases); ++i) {
      const Case& c = cases[i];
      INFO(describe(c));
      BinaryIndexOptions o = options_for(c.dims, c.metric, c.threshold, c.keep, c.type, t.rng);
      if (i == 3) o.memory = tiny_memory();  // kept vectors read in place from the host
      ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(devices, sharded(o, uneven(devices.size()))));
      Model model(o);
      build(t, c, index, model);
      // The first add's thresholds and int8 scale are those of all its rows, on every shard.
      CHECK(index.thresholds().size() == c.dims);
      check_searches(t, c, index, model, true);
    }
  });
}

TEST_CASE("ShardedIndex: rows are placed by weight, and empty shards change nothing") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    const std::vector<std::uint32_t> weights = uneven(devices.size());
    const BinaryIndexOptions o = options_for(40, IndexMetric::inner_product, IndexThreshold::zero,
                                             KeptVectors::none, ElementType::float32, t.rng);
    ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(devices, sharded(o, weights)));
    Model model(o);
    const Rows queries = make_rows(t.rng, 6, o.dims, o.input_type);
    // One row: one shard holds it, the others are empty, and searches pad past it.
    const Rows one = make_rows(t.rng, 1, o.dims, o.input_type);
    CHECK(REQUIRE_VALUE(index.add(one.bytes, 1)) == 0);
    model.add(one);
    check_results(REQUIRE_VALUE(index.search(queries.bytes, 6, {5, 1, false})),
                  model.search(queries, {5, 1, false}), "one row, the other shards empty");
    for (const std::uint64_t count : {2u, 1u, 517u, 3u, 250u}) {
      const Rows rows = make_rows(t.rng, count, o.dims, o.input_type);
      CHECK(REQUIRE_VALUE(index.add(rows.bytes, count)) == model.rows());
      model.add(rows);
    }
    const std::vector<ferry::BinaryIndexStats> stats = index.shard_stats();
    REQUIRE(stats.size() == devices.size());
    std::uint64_t weight_sum = 0, rows = 0;
    for (const std::uint32_t w : weights) weight_sum += w;
    for (std::size_t s = 0; s < stats.size(); ++s) {
      rows += stats[s].rows;
      const double share = static_cast<double>(model.rows()) * weights[s] / static_cast<double>(weight_sum);
      INFO("shard " << s << ": " << stats[s].rows << " rows, share " << share);
      CHECK(std::abs(static_cast<double>(stats[s].rows) - share) <= static_cast<double>(devices.size()));
    }
    CHECK(rows == model.rows());
    CHECK(index.size() == model.rows());
    for (const std::uint32_t k : {1u, 13u, 1024u}) {
      INFO("k " << k);
      check_results(REQUIRE_VALUE(index.search(queries.bytes, 6, {k, 1, false})),
                    model.search(queries, {k, 1, false}), "placed by weight");
    }
  });
}

TEST_CASE("ShardedIndex: add_codes and search_codes over several devices equal the truth") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    for (const std::uint32_t dims : {5u, 64u, 200u}) {
      INFO("dims " << dims);
      ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(
          devices, sharded(codes_options(dims, dims == 64 ? tiny_memory() : BinaryIndexMemory{}),
                           dims == 5 ? uneven(devices.size()) : std::vector<std::uint32_t>{})));
      std::vector<std::byte> db;
      for (const std::uint64_t count : {300u, 1u, 77u}) {
        const std::vector<std::byte> codes = make_codes(t.rng, count, dims);
        CHECK(REQUIRE_VALUE(index.add_codes(codes, count)) == db.size() / ferry::binary_code_bytes(dims));
        db.insert(db.end(), codes.begin(), codes.end());
      }
      const std::vector<std::byte> queries = make_codes(t.rng, 9, dims);
      for (const std::uint32_t k : {1u, 10u, 500u}) {
        INFO("k " << k);
        check_results(REQUIRE_VALUE(index.search_codes(queries, 9, {k, 1, false})),
                      code_truth(db, queries, dims, k), "codes");
      }
    }
  });
}

TEST_CASE("ShardedIndex: bad input is a clear error") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const BinaryIndexOptions o = options_for(32, IndexMetric::inner_product, IndexThreshold::zero,
                                             KeptVectors::none, ElementType::float32, t.rng);
    const Device other = REQUIRE_VALUE(t.open_another());
    const std::vector<Device> two = {t.device, other};
    auto expect = [](const ferry::Status& status, ErrorCode code, const char* text) {
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK_MESSAGE(status.message().find(text) != std::string::npos, status.to_string());
    };
    expect(ShardedIndex::create({}, sharded(o, {})).status(), ErrorCode::invalid_argument,
           "0 devices");
    expect(ShardedIndex::create(two, sharded(o, {1})).status(), ErrorCode::invalid_argument,
           "1 weights for 2 devices");
    expect(ShardedIndex::create(two, sharded(o, {1, 0})).status(), ErrorCode::invalid_argument,
           "weights[1] 0");
    expect(ShardedIndex::create(std::vector<Device>{t.device, Device()}, sharded(o, {})).status(),
           ErrorCode::released, "devices[1]");
    BinaryIndexOptions no_dims = o;
    no_dims.dims = 0;
    expect(ShardedIndex::create(two, sharded(no_dims, {})).status(), ErrorCode::invalid_argument,
           "dims 0");

    ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(two, sharded(o, {})));
    const Rows queries = make_rows(t.rng, 2, o.dims, o.input_type);
    expect(index.search(queries.bytes, 2, {}).status(), ErrorCode::failed_precondition, "empty");
    const Rows rows = make_rows(t.rng, 10, o.dims, o.input_type);
    expect(index.add(rows.bytes, 9).status(), ErrorCode::invalid_argument, "9 rows");
    expect(index.add(rows.bytes, 0).status(), ErrorCode::invalid_argument, "rows must be > 0");
    CHECK(index.size() == 0);
    REQUIRE_OK(index.add(rows.bytes, 10));
    expect(index.search(queries.bytes, 2, {0, 1, false}).status(), ErrorCode::invalid_argument, "k 0");
    expect(index.search(queries.bytes, 2, {5, 1, true}).status(), ErrorCode::failed_precondition,
           "keeps no vectors");
    expect(index.search_codes(std::vector<std::byte>(2 * ferry::binary_code_bytes(32)), 2, {5, 1, true}).status(),
           ErrorCode::invalid_argument, "rescore");
    std::vector<std::byte> padded(ferry::binary_code_bytes(31), std::byte{0});
    padded[3] = std::byte{0x80};
    BinaryIndexOptions odd = o;
    odd.dims = 31;
    ShardedIndex odd_index = REQUIRE_VALUE(ShardedIndex::create(two, sharded(odd, {})));
    expect(odd_index.add_codes(padded, 1).status(), ErrorCode::invalid_argument, "past dims 31");
    BinaryIndexOptions mean = o;
    mean.threshold = IndexThreshold::first_add_mean;
    ShardedIndex mean_index = REQUIRE_VALUE(ShardedIndex::create(two, sharded(mean, {})));
    expect(mean_index.add_codes(std::vector<std::byte>(ferry::binary_code_bytes(32)), 1).status(),
           ErrorCode::failed_precondition, "first_add_mean");

    ShardedIndex moved = std::move(index);
    expect(index.add(rows.bytes, 10).status(), ErrorCode::released, "no index");
    expect(index.search(queries.bytes, 2, {}).status(), ErrorCode::released, "no index");
    CHECK(index.size() == 0);
    CHECK(index.shard_count() == 0);
    CHECK(moved.size() == 10);
    CHECK(moved.shard_count() == 2);
  });
}

TEST_CASE("ShardedIndex: an add that fails on a shard leaves every shard as it was") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    BinaryIndexOptions o = options_for(56, IndexMetric::inner_product, IndexThreshold::first_add_mean,
                                       KeptVectors::int8, ElementType::float32, t.rng);
    o.memory = tiny_memory();
    ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(devices, sharded(o, {})));
    Model model(o);
    const Rows queries = make_rows(t.rng, 5, o.dims, o.input_type);
    for (const ferry::FaultSite site :
         {ferry::FaultSite::submit, ferry::FaultSite::allocation, ferry::FaultSite::wait}) {
      for (const std::uint64_t call : {1, 4, 9}) {
        INFO("failing " << ferry::to_string(site) << " call " << call << " after " << model.rows() << " rows");
        const Rows rows = make_rows(t.rng, 90, o.dims, o.input_type);
        const std::vector<ferry::BinaryIndexStats> before = index.shard_stats();
        const std::vector<float> thresholds = index.thresholds();
        const float scale = index.int8_scale();
        ferry::Status status;
        {
          const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(site, call));
          status = index.add(rows.bytes, 90).status();
        }
        if (status.ok()) {  // the add needed fewer calls than that: it counts
          model.add(rows);
        } else {
          CHECK_MESSAGE(status.message().find("nothing added") != std::string::npos, status.to_string());
          CHECK_MESSAGE(status.message().find("shard") != std::string::npos, status.to_string());
          const std::vector<ferry::BinaryIndexStats> after = index.shard_stats();
          for (std::size_t s = 0; s < after.size(); ++s) {
            CHECK(after[s].rows == before[s].rows);
            CHECK(after[s].code_segments == before[s].code_segments);
            CHECK(after[s].vector_segments == before[s].vector_segments);
            CHECK(after[s].device_bytes == before[s].device_bytes);
          }
          CHECK(index.size() == model.rows());
          CHECK(index.thresholds() == thresholds);
          CHECK(index.int8_scale() == scale);
        }
        // Rows added after a failure get the ids they would have had.
        const Rows next = make_rows(t.rng, 40, o.dims, o.input_type);
        CHECK(REQUIRE_VALUE(index.add(next.bytes, 40)) == model.rows());
        model.add(next);
        for (const SearchParams& params : {SearchParams{20, 1, false}, SearchParams{7, 3, true}}) {
          check_results(REQUIRE_VALUE(index.search(queries.bytes, 5, params)),
                        model.search(queries, params), "after the fault");
        }
      }
    }
  });
}

// ---- save and load -----------------------------------------------------------------------------

TEST_CASE("ShardedIndex: save writes one index's file, which loads on any devices") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    INFO(devices.size() << " shards");
    // Mean thresholds and an int8 scale from the first add, which the file must carry.
    const BinaryIndexOptions o = options_for(72, IndexMetric::l2, IndexThreshold::first_add_mean,
                                             KeptVectors::int8, ElementType::float32, t.rng);
    ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(devices, sharded(o, uneven(devices.size()))));
    BinaryIndex single = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    Model model(o);
    for (const std::uint64_t count : {150u, 91u}) {
      const Rows rows = make_rows(t.rng, count, o.dims, o.input_type);
      CHECK(REQUIRE_VALUE(index.add(rows.bytes, count)) == model.rows());
      REQUIRE_OK(single.add(rows.bytes, count));
      model.add(rows);
    }
    const fs::path path = temp_file(t, "sharded.bix");
    const fs::path single_path = temp_file(t, "single.bix");
    const fs::path again = temp_file(t, "again.bix");
    REQUIRE_OK(index.save(path));
    REQUIRE_OK(single.save(single_path));
    // The same bytes as one index of the same adds: rows in global order, one header.
    CHECK(file_bytes(path) == file_bytes(single_path));
    const Rows queries = make_rows(t.rng, 5, o.dims, o.input_type);

    // As a BinaryIndex.
    BinaryIndex as_one = REQUIRE_VALUE(BinaryIndex::load(t.device, path));
    CHECK(as_one.thresholds() == index.thresholds());
    CHECK(as_one.int8_scale() == index.int8_scale());
    check_loaded(as_one, model, queries, true, "loaded as a BinaryIndex");

    // Sharded over another number of devices, other weights, codes and vectors mostly in host
    // memory.
    const std::vector<Device> two(devices.begin(), devices.begin() + 2);
    ShardedIndex loaded = REQUIRE_VALUE(ShardedIndex::load(two, path, tiny_memory(), {1, 2}));
    CHECK(loaded.shard_count() == 2);
    CHECK(loaded.options().weights == std::vector<std::uint32_t>{1, 2});
    CHECK(loaded.thresholds() == index.thresholds());
    CHECK(loaded.int8_scale() == index.int8_scale());
    // As one add of 241 rows: floor(241 / 3) = 80 and floor(482 / 3) = 160, the row left over
    // to the first shard.
    const std::vector<ferry::BinaryIndexStats> stats = loaded.shard_stats();
    REQUIRE(stats.size() == 2);
    CHECK(stats[0].rows == 81);
    CHECK(stats[1].rows == 160);
    CHECK(stats[1].device_code_rows < stats[1].rows);  // placed by the memory given
    check_loaded(loaded, model, queries, true, "loaded on two devices");
    REQUIRE_OK(loaded.save(again));
    CHECK(file_bytes(again) == file_bytes(path));

    // The loaded index keeps growing: new rows continue the ids, with the file's thresholds.
    const Rows more = make_rows(t.rng, 37, o.dims, o.input_type);
    CHECK(REQUIRE_VALUE(loaded.add(more.bytes, 37)) == model.rows());
    model.add(more);
    check_loaded(loaded, model, queries, true, "loaded, then added to");
    fs::remove(path);
    fs::remove(single_path);
    fs::remove(again);
  });
}

TEST_CASE("ShardedIndex: a BinaryIndex's file loads sharded; empty indexes round-trip") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk", "rescore"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = shard_devices(t);
    INFO(devices.size() << " shards");
    const BinaryIndexOptions o = options_for(48, IndexMetric::inner_product, IndexThreshold::given,
                                             KeptVectors::float32, ElementType::float16, t.rng);
    BinaryIndex single = REQUIRE_VALUE(BinaryIndex::create(t.device, o));
    Model model(o);
    for (const std::uint64_t count : {100u, 33u}) {
      const Rows rows = make_rows(t.rng, count, o.dims, o.input_type);
      REQUIRE_OK(single.add(rows.bytes, count));
      model.add(rows);
    }
    const fs::path path = temp_file(t, "from_single.bix");
    REQUIRE_OK(single.save(path));
    ShardedIndex loaded = REQUIRE_VALUE(ShardedIndex::load(devices, path));
    CHECK(loaded.shard_count() == devices.size());
    CHECK(loaded.options().index.thresholds == o.thresholds);
    const Rows queries = make_rows(t.rng, 4, o.dims, o.input_type);
    check_loaded(loaded, model, queries, true, "a BinaryIndex's file, sharded");

    // Empty, mean thresholds still unknown: both ways, and the loaded one fixes them at its first
    // add like a new index.
    BinaryIndexOptions mean = options_for(40, IndexMetric::cosine, IndexThreshold::first_add_mean,
                                          KeptVectors::none, ElementType::float32, t.rng);
    BinaryIndex empty_single = REQUIRE_VALUE(BinaryIndex::create(t.device, mean));
    REQUIRE_OK(empty_single.save(path));
    ShardedIndex empty = REQUIRE_VALUE(ShardedIndex::load(devices, path, {}, uneven(devices.size())));
    CHECK(empty.size() == 0);
    CHECK(empty.thresholds().empty());
    const fs::path again = temp_file(t, "empty_again.bix");
    REQUIRE_OK(empty.save(again));
    CHECK(file_bytes(again) == file_bytes(path));
    CHECK(REQUIRE_VALUE(BinaryIndex::load(t.device, again)).size() == 0);
    Model mean_model(mean);
    const Rows rows = make_rows(t.rng, 60, mean.dims, mean.input_type);
    CHECK(REQUIRE_VALUE(empty.add(rows.bytes, 60)) == 0);
    mean_model.add(rows);
    check_loaded(empty, mean_model, make_rows(t.rng, 4, mean.dims, mean.input_type), false,
                 "loaded empty, then added to");
    fs::remove(path);
    fs::remove(again);
  });
}

TEST_CASE("ShardedIndex: load and save errors are clear, naming the file") {
  ferry_test::for_each_backend({"binary_quantize", "hamming_topk"}, [](BackendUnderTest& t) {
    const Device other = REQUIRE_VALUE(t.open_another());
    const std::vector<Device> two = {t.device, other};
    const BinaryIndexOptions o = options_for(40, IndexMetric::inner_product, IndexThreshold::zero,
                                             KeptVectors::float32, ElementType::float32, t.rng);
    ShardedIndex index = REQUIRE_VALUE(ShardedIndex::create(two, sharded(o, {})));
    const Rows rows = make_rows(t.rng, 30, o.dims, o.input_type);
    REQUIRE_OK(index.add(rows.bytes, 30));
    const fs::path good = temp_file(t, "good.bix");
    const fs::path bad = temp_file(t, "bad.bix");
    REQUIRE_OK(index.save(good));
    const std::vector<char> bytes = file_bytes(good);
    REQUIRE(bytes.size() == 64 + 30 * (8 + 160));

    // The error BinaryIndex::load gives for the same file, with this call's name.
    auto refused = [&](const fs::path& path, const char* expected, const char* what) {
      INFO(what);
      const auto loaded = ShardedIndex::load(two, path);
      REQUIRE(!loaded.ok());
      const std::string message = loaded.status().message();
      CHECK_MESSAGE(message.find("ShardedIndex::load(" + path.string() + ")") != std::string::npos,
                    message);
      CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
      const auto as_one = BinaryIndex::load(t.device, path);
      REQUIRE(!as_one.ok());
      CHECK_MESSAGE(loaded.status().code() == as_one.status().code(), as_one.status().to_string());
    };
    refused(temp_file(t, "does_not_exist.bix"), "no such file", "a missing file");
    CHECK(ShardedIndex::load(two, temp_file(t, "does_not_exist.bix")).status().code() ==
          ErrorCode::not_found);
    write_file(bad, std::vector<char>(bytes.begin(), bytes.end() - 1));
    refused(bad, "truncated", "a truncated file");
    std::vector<char> flipped = bytes;
    flipped[64 + 17] = static_cast<char>(flipped[64 + 17] ^ 0x04);  // a code of row 2
    write_file(bad, flipped);
    refused(bad, "corrupted payload", "a payload bit flipped");
    CHECK(ShardedIndex::load(two, bad).status().code() == ErrorCode::data_corrupt);

    auto expect = [](const ferry::Status& status, ErrorCode code, const std::string& text) {
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK_MESSAGE(status.message().find(text) != std::string::npos, status.to_string());
    };
    expect(ShardedIndex::load({}, good).status(), ErrorCode::invalid_argument, "0 devices");
    expect(ShardedIndex::load(two, good, {}, {1}).status(), ErrorCode::invalid_argument,
           "1 weights for 2 devices");
    expect(ShardedIndex::load(two, good, {}, {1, 0}).status(), ErrorCode::invalid_argument,
           "weights[1] 0");
    expect(ShardedIndex::load(std::vector<Device>{t.device, Device()}, good).status(),
           ErrorCode::released, "devices[1]");
    ferry::BinaryIndexMemory no_segments;
    no_segments.segment_bytes = 0;
    expect(ShardedIndex::load(two, good, no_segments).status(), ErrorCode::invalid_argument,
           "segment_bytes");

    const fs::path no_folder = temp_file(t, "no_such_folder") / "index.bix";
    expect(index.save(no_folder), ErrorCode::not_found, "ShardedIndex::save(" + no_folder.string());
    CHECK(!fs::exists(no_folder));
    ShardedIndex moved = std::move(index);
    expect(index.save(good), ErrorCode::released, "no index");  // NOLINT: testing the moved-from
    CHECK(REQUIRE_VALUE(ShardedIndex::load(two, good)).size() == 30);  // the good file still loads
    fs::remove(good);
    fs::remove(bad);
  });
}
