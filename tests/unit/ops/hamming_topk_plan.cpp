// The passes of hamming_topk's GPU plan (pure functions, no GPU), replayed on the host as the
// shader and the CUDA kernel run them: each pass's groups keep their smallest (distance,
// position) entries into the scratch offsets and strides the plan gives, slice after slice. The
// replay must equal a brute-force search, never touch scratch outside the plan's bytes, and never
// read and write the same scratch entries in one pass, for many sizes, k and scratch budgets.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/hamming_topk.hpp"
#include "vulkan/ops/hamming_topk_plan.hpp"

namespace {

using ferry::ops::HammingPass;
using ferry::ops::HammingTopkArgs;
using Entry = std::pair<std::uint32_t, std::uint32_t>;  // distance, row index

constexpr std::uint32_t kNone = 0xFFFFFFFFu;

// The entries a group keeps: the `keep` smallest by (distance, position), sorted. Positions
// follow index order among equal distances (the plan's invariant), so sorting by (distance,
// position) is what the GPU's keys do.
std::vector<Entry> keep_smallest(const std::vector<Entry>& group, std::uint32_t keep) {
  std::vector<std::pair<Entry, std::uint32_t>> keyed;  // ((distance, position), index)
  for (std::uint32_t p = 0; p < group.size(); ++p) keyed.push_back({{group[p].first, p}, group[p].second});
  std::sort(keyed.begin(), keyed.end());
  std::vector<Entry> kept;
  for (std::uint32_t i = 0; i < keep; ++i) kept.push_back({keyed[i].first.first, keyed[i].second});
  return kept;
}

// `extra_words`: the backend's own words per query (the CUDA scan's bounds), which must lie in
// the scratch after the candidates. `bounds` (per query, kNone: none): level 0 keeps only rows
// within the query's bound and pads its runs, the merges count the padding out, as the CUDA
// kernels do.
void replay(const HammingTopkArgs& args, const std::vector<std::vector<std::uint32_t>>& dist,
            std::uint32_t level0_rows = ferry::ops::kHammingChunkRows, std::uint32_t extra_words = 0,
            const std::vector<std::uint32_t>* bounds = nullptr) {
  INFO("queries " << args.queries << ", rows " << args.rows << ", k " << args.k << ", budget "
                  << args.scratch_budget << ", level-0 rows " << level0_rows << ", extra words "
                  << extra_words << std::string(bounds != nullptr ? ", bounds" : ""));
  // The CUDA scan kernel plans its larger level-0 groups within the scratch the public call
  // reserved with the default plan: that must always be enough.
  const auto default_plan = ferry::ops::plan_hamming_topk(args, "test");
  REQUIRE(default_plan.ok());
  HammingTopkArgs planned = args;
  if (level0_rows != ferry::ops::kHammingChunkRows || extra_words > 0)
    planned.scratch_budget = default_plan->scratch_bytes;
  const ferry::Result<ferry::ops::HammingTopkPlan> plan =
      ferry::ops::plan_hamming_topk(planned, "test", level0_rows, extra_words);
  if (extra_words > 0 && !plan.ok()) {
    // The extra words do not fit the scratch (none was reserved: one pass does it all): the
    // CUDA scan then runs without its bounds.
    REQUIRE(plan.status().code() == ferry::ErrorCode::resource_exhausted);
    replay(args, dist, level0_rows);
    return;
  }
  REQUIRE(plan.ok());
  CHECK(plan->scratch_bytes <= default_plan->scratch_bytes);
  std::uint64_t scratch_entries = plan->scratch_bytes / ferry::ops::kHammingCandidateBytes;
  if (extra_words > 0) {
    std::uint32_t slice = 0;
    for (const HammingPass& pass : plan->passes) slice = std::max(slice, pass.query_count);
    CHECK(plan->extra_word_base % 2 == 0);
    CHECK(plan->extra_word_base * 4 + std::uint64_t{slice} * extra_words * 4 <= plan->scratch_bytes);
    scratch_entries = plan->extra_word_base / 2;  // the candidates stay below the extra words
  }
  std::vector<Entry> scratch(scratch_entries, {kNone, kNone});
  std::vector<Entry> output(std::uint64_t{args.queries} * args.k, {kNone, kNone});
  std::vector<bool> done(args.queries, false);
  for (const HammingPass& pass : plan->passes) {
    std::vector<char> read(scratch_entries, 0), written(scratch_entries, 0);
    const std::uint32_t group_size =
        pass.from_codes ? level0_rows : ferry::ops::kHammingMergeGroup;
    REQUIRE(pass.group_items == group_size);
    REQUIRE(pass.groups == (pass.items + group_size - 1) / group_size);
    REQUIRE(pass.query_begin + pass.query_count <= args.queries);
    for (std::uint32_t q = 0; q < pass.query_count; ++q) {
      const std::uint32_t query = pass.query_begin + q;
      std::vector<Entry> out_run;
      for (std::uint32_t g = 0; g < pass.groups; ++g) {
        const std::uint32_t first = g * group_size;
        const std::uint32_t count = std::min(group_size, pass.items - first);
        std::vector<Entry> group;
        for (std::uint32_t i = 0; i < count; ++i) {
          if (pass.from_codes) {
            const std::uint32_t d = dist[query][first + i];
            if (bounds == nullptr || (*bounds)[query] == kNone || d <= (*bounds)[query])
              group.push_back({d, first + i});
          } else {
            const std::uint64_t at = std::uint64_t{pass.in_base} + q * pass.in_stride + first + i;
            if (at >= scratch_entries) FAIL("a read past the scratch memory: entry " << at);
            read[at] = 1;
            if (scratch[at].first != kNone) group.push_back(scratch[at]);  // padding: not counted
          }
        }
        std::vector<Entry> kept =
            keep_smallest(group, std::min<std::uint32_t>(std::min(args.k, count), group.size()));
        if (!pass.final) kept.resize(std::min(args.k, count), Entry{kNone, kNone});
        if (pass.final) {
          if (pass.groups != 1) FAIL("a final pass of " << pass.groups << " groups");
          for (std::uint32_t s = 0; s < args.k; ++s)
            output[std::uint64_t{query} * args.k + s] = s < kept.size() ? kept[s] : Entry{kNone, kNone};
          done[query] = true;
          continue;
        }
        const std::uint64_t run = std::uint64_t{pass.out_base} + q * pass.out_stride +
                                  g * std::min(args.k, group_size);
        if (run + kept.size() > scratch_entries) FAIL("a write past the scratch memory: " << run);
        for (std::uint32_t s = 0; s < kept.size(); ++s) {
          written[run + s] = 1;
          scratch[run + s] = kept[s];
        }
      }
    }
    for (std::uint64_t e = 0; e < scratch_entries; ++e) {
      if (read[e] && written[e]) FAIL("a pass reads and writes scratch entry " << e);
    }
  }
  for (std::uint32_t q = 0; q < args.queries; ++q) {
    if (!done[q]) FAIL("query " << q << " was never finished");
    std::vector<Entry> truth;
    for (std::uint32_t r = 0; r < args.rows; ++r) truth.push_back({dist[q][r], r});
    std::sort(truth.begin(), truth.end());
    for (std::uint32_t s = 0; s < args.k; ++s) {
      const Entry expected = s < truth.size() ? truth[s] : Entry{kNone, kNone};
      const Entry got = output[std::uint64_t{q} * args.k + s];
      if (got != expected) {
        FAIL("query " << q << " rank " << s << ": (" << got.first << ", " << got.second
                      << ") instead of (" << expected.first << ", " << expected.second << ")");
      }
    }
  }
}

}  // namespace

TEST_CASE("hamming_topk plan: replayed passes equal a brute-force search") {
  std::mt19937_64 rng(0x4a11);
  struct Case {
    std::uint32_t queries, rows, k;
    std::uint64_t budget;
    std::uint32_t distinct;  // distance values drawn from 0..distinct-1 (few: ties everywhere)
  };
  const Case cases[] = {
      {1, 1, 1, 64 << 20, 4},            // one row, one pass
      {3, 2048, 7, 64 << 20, 257},       // one chunk exactly: one pass
      {5, 2049, 1024, 64 << 20, 3},      // a chunk and a row, k > the short chunk
      {2, 40000, 1024, 64 << 20, 257},   // level 0 and two merges
      {9, 100000, 1024, 1 << 20, 40},    // slices of few queries, four levels
      {7, 9001, 10, 20000, 2},           // a budget below the target: one query per slice
      {70000, 5, 2, 64 << 20, 3},        // more queries than one grid row: slices of 65535
  };
  for (const Case& c : cases) {
    HammingTopkArgs args{8, c.queries, c.rows, c.k, c.budget};
    std::vector<std::vector<std::uint32_t>> dist(c.queries, std::vector<std::uint32_t>(c.rows));
    for (auto& row : dist)
      for (auto& d : row) d = static_cast<std::uint32_t>(rng() % c.distinct);
    replay(args, dist);
    // Level-0 groups as the CUDA scan kernel takes them: spans of many chunks, or the whole
    // database in one.
    for (const std::uint32_t span : {c.rows < 2048 ? c.rows : 2048u, 5000u, 65536u, 1u << 19}) {
      if (span >= std::min(c.rows, 2048u)) replay(args, dist, span);
    }
    // The CUDA scan's bounds: the k-th smallest distance of a sample (the first rows) is at
    // least the k-th of all, so rows beyond it may be left out; runs are padded instead.
    std::vector<std::uint32_t> bounds(c.queries, kNone);
    for (std::uint32_t q = 0; q < c.queries; ++q) {
      std::vector<std::uint32_t> sample(dist[q].begin(), dist[q].begin() + std::min(c.rows, 300u));
      if (sample.size() < c.k) continue;
      std::nth_element(sample.begin(), sample.begin() + (c.k - 1), sample.end());
      bounds[q] = sample[c.k - 1];
    }
    if (c.budget >= (1u << 20)) {
      for (const std::uint32_t span : {std::min(c.rows, 2048u), 5000u})
        if (span >= std::min(c.rows, 2048u)) replay(args, dist, span, 257, &bounds);
    }
  }
}

TEST_CASE("hamming_topk plan: a query that cannot fit the scratch budget is an error") {
  HammingTopkArgs args{8, 4, 40000, 1024, 64 << 10};
  const auto plan = ferry::ops::plan_hamming_topk(args, "test");
  REQUIRE(!plan.ok());
  CHECK(plan.status().code() == ferry::ErrorCode::resource_exhausted);
}

TEST_CASE("hamming_topk plan: scan spans cover the rows within the key's reach and the scratch") {
  using ferry::ops::hamming_scan_span;
  using ferry::ops::kHammingChunkRows;
  using ferry::ops::kHammingScanMaxSpan;
  std::mt19937_64 rng(0x5ca4);
  const std::uint32_t rows_cases[] = {1, 63, 64, 2047, 2048, 2049, 40000, 1000000, 1u << 19,
                                      (1u << 19) + 1, 300000000, 0xFFFFFFFEu};
  for (const std::uint32_t rows : rows_cases) {
    for (const std::uint32_t queries : {1u, 5u, 32u, 1000u, 70000u}) {
      for (const std::uint32_t tile : {4u, 8u, 32u}) {
        for (const std::uint32_t round : {64u, 128u}) {
          for (const std::uint64_t resident : {0ull, 1ull, 16ull, 1056ull, 1ull << 20}) {
            INFO("rows " << rows << ", queries " << queries << ", tile " << tile << ", round "
                         << round << ", resident " << resident);
            const std::uint32_t span = hamming_scan_span(rows, queries, tile, round, resident);
            CHECK(span <= kHammingScanMaxSpan);
            CHECK(span >= std::min(rows, kHammingChunkRows));
            // A round multiple unless the chunk floor or the key's reach decided.
            CHECK((span % round == 0 || span == std::min(rows, kHammingChunkRows)));
            // Spans for two waves of `resident` workgroups over the tiles: each span the
            // shortest round multiple that makes that many, unless a bound decided.
            const std::uint64_t tiles = (std::min(queries, 65535u) + tile - 1) / tile;
            const std::uint64_t wanted = 2 * std::max<std::uint64_t>(resident, 1);
            const std::uint64_t spans = std::max<std::uint64_t>(1, (wanted + tiles - 1) / tiles);
            const std::uint64_t even = (std::uint64_t{rows} + spans - 1) / spans;
            if (span < kHammingScanMaxSpan) CHECK(span >= even);
            if (span > std::min(rows, kHammingChunkRows)) CHECK(span - round < even);
          }
        }
      }
    }
  }
  // Spans as the backends pick them keep every plan within the default plan's scratch, and the
  // replay exact.
  for (const std::uint32_t rows : {2049u, 9001u, 70000u}) {
    HammingTopkArgs args{8, 3, rows, 100, 64 << 20};
    std::vector<std::vector<std::uint32_t>> dist(args.queries, std::vector<std::uint32_t>(rows));
    for (auto& row : dist)
      for (auto& d : row) d = static_cast<std::uint32_t>(rng() % 30);
    for (const std::uint64_t resident : {1ull, 64ull, 1056ull})
      replay(args, dist, hamming_scan_span(rows, args.queries, 8, 64, resident));
  }
}

TEST_CASE("hamming_topk plan: scan buffers hold k, a round and the sort's power of two") {
  using ferry::ops::hamming_scan_cap;
  using ferry::ops::hamming_scan_min_cap;
  for (std::uint32_t k = 1; k <= ferry::kHammingMaxK; ++k) {
    for (const std::uint32_t round : {64u, 128u}) {
      INFO("k " << k << ", round " << round);
      CHECK(hamming_scan_min_cap(k, round) >= k + round);
      CHECK(hamming_scan_min_cap(k, round) >= std::bit_ceil(k));
      CHECK(hamming_scan_cap(k, round) >= hamming_scan_min_cap(k, round));
      CHECK(hamming_scan_cap(k, round) % 32 == 0);
    }
  }
}

TEST_CASE("hamming_topk plan: the Vulkan scan's tile and buffers fit its shared memory") {
  using ferry::vulkan::hamming_scan_shape;
  for (std::uint32_t k = 1; k <= ferry::kHammingMaxK; ++k) {
    for (std::uint32_t words = 2; words <= ferry::kHammingMaxCodeBits / 32; words += 2) {
      for (const std::uint32_t queries : {1u, 9u, 1000u}) {
        for (const std::uint32_t preferred : {0u, 4u, 8u, 16u, 32u}) {
          const ferry::vulkan::HammingScanShape shape = hamming_scan_shape(k, words, queries, preferred);
          const bool ok =
              std::has_single_bit(shape.tile) && shape.tile >= FERRY_HAMMING_MIN_TILE &&
              shape.tile <= FERRY_HAMMING_MAX_TILE && (preferred == 0 || shape.tile <= preferred) &&
              (preferred != 0 || shape.tile == FERRY_HAMMING_MIN_TILE || shape.tile / 2 < queries) &&
              shape.tile * ((words + 3) / 4) <= FERRY_HAMMING_QUERY_QUADS &&
              FERRY_HAMMING_SCAN_KEYS + shape.tile * shape.cap <= FERRY_HAMMING_POOL_WORDS &&
              shape.cap >= ferry::ops::hamming_scan_min_cap(k, FERRY_HAMMING_ROUND_ROWS);
          if (!ok) {
            FAIL("k " << k << ", words " << words << ", queries " << queries << ", preferred tile "
                      << preferred << ": tile " << shape.tile << ", cap " << shape.cap);
          }
        }
      }
    }
  }
  // The common searches take the tiles of the CUDA scan: 32 queries for k = 10, 8 for k = 100.
  CHECK(hamming_scan_shape(10, 8, 1000).tile == 32);
  CHECK(hamming_scan_shape(100, 8, 1000).tile == 8);
  CHECK(hamming_scan_shape(10, 128, 1000).tile == 16);  // 4096-bit codes: the codes' quads decide
  CHECK(hamming_scan_shape(10, 8, 16).tile == 16);      // few queries: a tile they fill
  CHECK(hamming_scan_shape(10, 8, 17).tile == 32);
}

TEST_CASE("hamming_topk plan: the pooled search's pools and the scratch offered for them") {
  using ferry::ops::HammingPoolShape;
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 2000; ++trial) {
    ferry::ops::HammingTopkArgs args;
    args.words = 8;
    args.k = 1 + static_cast<std::uint32_t>(rng() % 1024);
    args.rows = 1 + static_cast<std::uint32_t>(rng() % (trial % 2 == 0 ? 3'000'000 : 200'000'000));
    args.queries = 1 + static_cast<std::uint32_t>(rng() % 70'000);
    args.scratch_budget = (1ull << (16 + rng() % 12));  // 64 KiB to 128 MiB
    INFO("k " << args.k << ", rows " << args.rows << ", queries " << args.queries << ", budget "
              << args.scratch_budget);
    const HammingPoolShape shape = ferry::ops::hamming_pool_shape(args);
    const std::uint32_t groups = ferry::ops::hamming_pool_sample_groups(args.rows, args.k);
    const std::uint64_t scratch = ferry::ops::hamming_pool_scratch_bytes(args);
    // The pools' sample: the bound's, or 1/16 of the database up to 4096 groups where larger.
    const std::uint32_t bound_groups = ferry::ops::hamming_bound_sample_groups(args.rows, args.k);
    const std::uint64_t row_groups = (std::uint64_t{args.rows} + 255) / 256;
    CHECK((groups == 0) == (bound_groups == 0));
    if (groups != 0) {
      CHECK(groups >= bound_groups);
      CHECK(groups <= row_groups);
      CHECK((groups == bound_groups || groups == row_groups ||
             groups == std::min<std::uint64_t>(4096, (row_groups + 15) / 16)));
      CHECK((groups == row_groups || groups >= std::min<std::uint64_t>(4096, (row_groups + 15) / 16)));
    }
    if (shape.pool_cap == 0) {
      CHECK(scratch == 0);
      // None: no bound, a sample below a sixteenth of the database, or more than the largest
      // pool wanted.
      if (groups != 0) {
        const std::uint64_t sample = std::min<std::uint64_t>(std::uint64_t{groups} * 256, args.rows);
        const std::uint64_t parts = (args.rows + sample - 1) / sample;
        CHECK((parts > 16 || 3 * args.k * parts + args.k > ferry::ops::kHammingMaxPool));
      }
      continue;
    }
    REQUIRE(groups != 0);
    CHECK(shape.sample_groups == groups);
    CHECK(shape.sample_rows == std::min<std::uint64_t>(std::uint64_t{groups} * 256, args.rows));
    const std::uint64_t parts = (args.rows + shape.sample_rows - 1) / shape.sample_rows;
    CHECK(parts <= 16);
    CHECK(std::has_single_bit(shape.pool_cap));
    CHECK(shape.pool_cap >= ferry::ops::kHammingMinPool);
    CHECK(shape.pool_cap <= ferry::ops::kHammingMaxPool);
    CHECK(shape.pool_cap >= 3 * args.k * parts + args.k);
    CHECK(shape.pool_cap / 2 < std::max<std::uint64_t>(ferry::ops::kHammingMinPool, 3 * args.k * parts + args.k));
    CHECK(shape.words_per_query == std::uint64_t{shape.pool_cap} + groups + 2);
    CHECK(shape.offered_words_per_query ==
          std::uint64_t{shape.pool_cap} + 2ull * groups + 2ull * args.k + 2);
    const std::uint64_t per_query = 4 * shape.offered_words_per_query;
    if (per_query > std::min(ferry::ops::kHammingPoolScratchTarget, args.scratch_budget)) {
      CHECK(scratch == 0);
      continue;
    }
    // Whole queries' pools, every query's when they fit, within the target and the slab.
    CHECK(scratch % per_query == 0);
    CHECK(scratch >= per_query);
    CHECK(scratch <= std::min(ferry::ops::kHammingPoolScratchTarget, args.scratch_budget));
    const std::uint64_t queries = std::min<std::uint32_t>(args.queries, 65535);
    CHECK((scratch == queries * per_query ||
           scratch + per_query >
               std::min(ferry::ops::kHammingPoolScratchTarget, args.scratch_budget)));
  }
}

TEST_CASE("hamming_topk plan: the Vulkan pooled search's slices fit the scratch offered") {
  using ferry::vulkan::HammingPoolPlan;
  std::mt19937_64 rng(32);
  int pooled = 0, sliced = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    ferry::ops::HammingTopkArgs args;
    args.words = 2 * (1 + static_cast<std::uint32_t>(rng() % 64));
    args.k = 1 + static_cast<std::uint32_t>(rng() % 1024);
    args.rows = 1 + static_cast<std::uint32_t>(rng() % (trial % 2 == 0 ? 3'000'000 : 60'000'000));
    args.queries = 1 + static_cast<std::uint32_t>(rng() % (trial % 3 == 0 ? 70'000 : 2'000));
    args.scratch_budget = (1ull << (16 + rng() % 12));  // 64 KiB to 128 MiB
    INFO("k " << args.k << ", rows " << args.rows << ", queries " << args.queries << ", budget "
              << args.scratch_budget);
    const ferry::ops::HammingPoolShape shape = ferry::ops::hamming_pool_shape(args);
    // The public call offers this much (or the plan's own scratch, when larger).
    const std::uint64_t offered = ferry::ops::hamming_pool_scratch_bytes(args);
    const HammingPoolPlan plan = ferry::vulkan::hamming_pool_plan(args, offered);
    if (shape.pool_cap == 0 || offered == 0) {
      CHECK(plan.pool_cap == 0);
      continue;
    }
    const std::uint64_t slice_limit = std::min<std::uint64_t>(args.queries, 65535);
    if (plan.pool_cap == 0) {
      // No slice of kHammingMinPoolSlice queries (or of all of them) fits.
      CHECK(offered / 4 / (shape.pool_cap + 2ull * (shape.sample_groups + args.k) + 2) <
            std::min<std::uint64_t>(ferry::vulkan::kHammingMinPoolSlice, slice_limit));
      continue;
    }
    ++pooled;
    CHECK(plan.pool_cap == shape.pool_cap);
    CHECK(plan.sample_groups == shape.sample_groups);
    CHECK(plan.sample_rows == shape.sample_rows);
    REQUIRE(plan.slice >= 1);
    CHECK(plan.slice <= slice_limit);
    // Equal slices, as few as the scratch holds.
    const auto words = [&](std::uint64_t slice) {
      return (slice * plan.pool_cap + slice + 1) / 2 * 2 +
             2 * slice * (plan.sample_groups + args.k);
    };
    const std::uint64_t slices = (args.queries + plan.slice - 1) / plan.slice;
    CHECK((args.queries + slices - 1) / slices == plan.slice);
    CHECK(4 * words(plan.slice) <= offered);
    if (slices > 1) {
      ++sliced;
      const std::uint64_t fewer = (args.queries + slices - 2) / (slices - 1);
      CHECK((fewer > 65535 || 4 * words(fewer) > offered));
    }
    // The layout: pools, counts, then the minima and the bounds as candidates from an even word,
    // each region after the one before, all within the scratch.
    CHECK(plan.counts_word == std::uint64_t{plan.slice} * plan.pool_cap);
    CHECK(2ull * plan.minima_base >= std::uint64_t{plan.counts_word} + plan.slice);
    CHECK(2ull * plan.minima_base <= std::uint64_t{plan.counts_word} + plan.slice + 1);
    CHECK(plan.bound_base ==
          std::uint64_t{plan.minima_base} + std::uint64_t{plan.slice} * plan.sample_groups);
    CHECK(8ull * (plan.bound_base + std::uint64_t{plan.slice} * args.k) <= offered);
  }
  CHECK(pooled > 100);
  CHECK(sliced > 10);
}
