// ShardedIndex against the same brute-force model as BinaryIndex (index_model.hpp): an index split
// over several devices must return exactly what one index over every row returns. Shards on
// every device of the backend (or the backend's device opened again where it has one), mixed with
// the CPU reference backend, with uneven weights, shards left empty, streamed placement, every
// metric, threshold kind and kept-vector kind; packed codes; the placement of rows by weight; bad
// input; an add that fails on one shard leaving every shard as it was.
#include <algorithm>
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

// Devices for shards: every device of the backend (up to 4; device 0 is t.device), or t.device
// and the same device opened again when the backend has one; then the CPU reference.
std::vector<Device> shard_devices(BackendUnderTest& t) {
  std::vector<Device> devices = {t.device};
  std::size_t listed = 1;
  for (const ferry::BackendInfo& info : ferry::list_backends()) {
    if (info.backend == t.backend) listed = info.devices.size();
  }
  for (std::size_t i = 1; i < std::min<std::size_t>(listed, 4); ++i) {
    Device other = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), static_cast<int>(i), t.options));
    t.extra_devices.push_back(other);
    devices.push_back(other);
  }
  if (devices.size() == 1) devices.push_back(REQUIRE_VALUE(t.open_another()));
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
