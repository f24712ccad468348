// The IBP host codec (ferry/ibp.hpp, runtime/src/ibp/): encode against an independent, slow
// reference encoder written from docs/IBP_FORMAT.md (bit by bit, a per-column sort, every k
// counted by brute force), byte for byte, on awkward shapes and data families; round trips of
// decode, decode_rows and decode_gather; validate and the checked row decoder on corrupt streams.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/ibp_streams.hpp"
#include "common/printers.hpp"
#include "core/crc32c.hpp"
#include "ferry/ibp.hpp"
#include "ibp/stream.hpp"

namespace {

using ferry::ErrorCode;
using ferry::test::IbpFamily;
namespace ibp = ferry::ibp;

// ---- The reference encoder: the format's rules, literally. ----

struct BitStream {
  std::vector<std::uint32_t> words;
  std::uint64_t bits = 0;
  void push(std::uint64_t value, unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
      if (bits % 32 == 0) words.push_back(0);
      words.back() |= static_cast<std::uint32_t>((value >> i) & 1u) << (bits % 32);
      ++bits;
    }
  }
};

void put_le(std::vector<std::byte>& out, std::uint64_t value, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

std::vector<std::byte> reference_encode(const std::vector<std::byte>& data, std::uint8_t es,
                                        std::uint64_t R, std::uint64_t E, std::uint32_t G,
                                        ibp::DType dtype = ibp::DType::unspecified,
                                        std::uint8_t ndim = 2) {
  const unsigned W = 8u * es;
  const std::uint64_t all = W == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << W) - 1;
  const std::uint64_t rows = (E + R - 1) / R;
  const auto n_of = [&](std::uint64_t r) { return std::min(R, E - r * R); };
  const auto element = [&](std::uint64_t r, std::uint64_t c) {
    std::uint64_t x = 0;
    std::memcpy(&x, data.data() + (r * R + c) * es, es);
    return x;
  };
  const std::uint64_t groups = (rows + G - 1) / G;
  std::vector<std::uint64_t> masks(groups * R), values(groups * R);
  for (std::uint64_t g = 0; g < groups; ++g) {
    for (std::uint64_t c = 0; c < R; ++c) {
      std::vector<std::uint64_t> xs;
      for (std::uint64_t r = g * G; r < std::min(rows, (g + 1) * G); ++r) {
        if (c < n_of(r)) xs.push_back(element(r, c));
      }
      const std::uint64_t n = xs.size();
      std::vector<std::uint64_t> agreement(W);
      std::uint64_t V = 0;
      for (unsigned b = 0; b < W; ++b) {
        std::uint64_t ones = 0;
        for (std::uint64_t x : xs) ones += (x >> b) & 1u;
        if (2 * ones > n) V |= std::uint64_t{1} << b;
        agreement[b] = std::max(ones, n - ones);
      }
      std::vector<unsigned> order(W);
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
        return agreement[a] != agreement[b] ? agreement[a] > agreement[b] : a > b;
      });
      std::uint64_t best_mask = 0, best_product = 0, M = 0;
      for (unsigned k = 0; k <= W; ++k) {
        if (k > 0) M |= std::uint64_t{1} << order[k - 1];
        std::uint64_t m = 0;
        for (std::uint64_t x : xs) m += (x & M) == (V & M) ? 1 : 0;
        if (k * m > best_product) {
          best_product = k * m;
          best_mask = M;
        }
      }
      masks[g * R + c] = best_mask;
      values[g * R + c] = V & best_mask;
    }
  }
  std::vector<std::vector<std::uint32_t>> row_words(rows);
  std::vector<unsigned> modes(rows);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t g = r / G, n = n_of(r);
    const auto pext = [&](std::uint64_t x, std::uint64_t m) {
      std::uint64_t out = 0;
      unsigned at = 0;
      for (unsigned b = 0; b < W; ++b) {
        if ((m >> b) & 1u) out |= ((x >> b) & 1u) << at++;
      }
      return std::make_pair(out, at);
    };
    BitStream bitmap_mode, matched_mode, raw_mode;
    bool all_match = true;
    for (std::uint64_t c = 0; c < n; ++c) {
      const bool match = (element(r, c) & masks[g * R + c]) == values[g * R + c];
      bitmap_mode.push(match ? 1 : 0, 1);
      all_match = all_match && match;
    }
    while (bitmap_mode.bits % 32 != 0) bitmap_mode.push(0, 1);
    for (std::uint64_t c = 0; c < n; ++c) {
      const std::uint64_t x = element(r, c);
      const auto [variable, count] = pext(x, ~masks[g * R + c] & all);
      if ((x & masks[g * R + c]) == values[g * R + c]) {
        bitmap_mode.push(variable, count);
      } else {
        bitmap_mode.push(x, W);
      }
      matched_mode.push(variable, count);
      raw_mode.push(x, W);
    }
    const std::uint64_t b2 = 4 * ((n * es + 3) / 4);
    if (all_match) {
      modes[r] = 1;
      row_words[r] = matched_mode.words;
    } else if (bitmap_mode.words.size() * 4 < b2) {
      modes[r] = 0;
      row_words[r] = bitmap_mode.words;
    } else {
      modes[r] = 2;
      row_words[r] = raw_mode.words;
    }
  }
  std::vector<std::uint64_t> group_offsets(groups + 1, 0);
  std::vector<std::uint32_t> entries(rows);
  std::uint64_t total = 0;
  for (std::uint64_t g = 0; g < groups; ++g) {
    group_offsets[g] = total;
    std::uint64_t in_group = 0;
    for (std::uint64_t r = g * G; r < std::min(rows, (g + 1) * G); ++r) {
      entries[r] = static_cast<std::uint32_t>(in_group) | modes[r];
      in_group += row_words[r].size() * 4;
    }
    total += in_group;
  }
  group_offsets[groups] = total;
  std::vector<std::byte> s;
  for (char ch : std::string("FERRYIBP")) s.push_back(static_cast<std::byte>(ch));
  put_le(s, 1, 2);
  put_le(s, es, 1);
  put_le(s, static_cast<std::uint8_t>(dtype), 1);
  put_le(s, ndim, 1);
  put_le(s, 0, 3);
  put_le(s, G, 4);
  put_le(s, 0, 4);
  put_le(s, rows, 8);
  put_le(s, R, 8);
  put_le(s, E, 8);
  put_le(s, total, 8);
  put_le(s, 0, 8);  // both CRCs, below
  for (std::uint64_t o : group_offsets) put_le(s, o, 8);
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::size_t start = s.size();
    for (std::uint64_t c = 0; c < R; ++c) put_le(s, masks[g * R + c], es);
    for (std::uint64_t c = 0; c < R; ++c) put_le(s, values[g * R + c], es);
    while ((s.size() - start) % 8 != 0) s.push_back(std::byte{0});
  }
  for (std::uint32_t e : entries) put_le(s, e, 4);
  while (s.size() % 8 != 0) s.push_back(std::byte{0});
  for (const auto& words : row_words) {
    for (std::uint32_t w : words) put_le(s, w, 4);
  }
  const std::size_t end = s.size();
  for (std::size_t begin = 64; begin < end; begin += 65536) {
    put_le(s, ferry::detail::crc32c_portable(std::span(s.data() + begin, std::min<std::size_t>(65536, end - begin))), 4);
  }
  const std::uint32_t table_crc = ferry::detail::crc32c_portable(std::span(s.data() + end, s.size() - end));
  std::memcpy(s.data() + 56, &table_crc, 4);
  const std::uint32_t header_crc = ferry::detail::crc32c_portable(std::span(s.data(), 60));
  std::memcpy(s.data() + 60, &header_crc, 4);
  return s;
}

ibp::EncodeParams params_of(std::uint8_t es, std::uint64_t R, std::uint64_t E, std::uint32_t G,
                            unsigned threads = 0) {
  ibp::EncodeParams p;
  p.element_size = es;
  p.row_elements = R;
  p.elements = E;
  p.group_rows = G;
  p.threads = threads;
  return p;
}

struct Shape {
  std::uint64_t R;
  std::uint64_t E;
};
// One row, one element per row, a short last row, odd byte lengths, a short last group.
const Shape kShapes[] = {{1, 1},    {1, 37},  {5, 5},     {7, 66},   {33, 1315},
                         {3, 100},  {64, 64 * 40}, {13, 13 * 17 - 12}, {100, 250}};

void check_round_trips(const std::vector<std::byte>& stream, const std::vector<std::byte>& data,
                       std::uint8_t es, std::uint64_t R, std::mt19937_64& rng) {
  const std::uint64_t rows = (data.size() / es + R - 1) / R;
  std::vector<std::byte> back(data.size());
  REQUIRE(ibp::decode(stream, back).ok());
  CHECK(back == data);
  // A range of rows.
  const std::uint64_t first = rng() % rows;
  const std::uint64_t count = 1 + rng() % (rows - first);
  const std::uint64_t end_byte = std::min<std::uint64_t>(data.size(), (first + count) * R * es);
  std::vector<std::byte> slice(end_byte - first * R * es);
  REQUIRE(ibp::decode_rows(stream, first, count, slice, true).ok());
  CHECK(std::equal(slice.begin(), slice.end(), data.begin() + static_cast<std::ptrdiff_t>(first * R * es)));
  // A gather: reversed, duplicates, the last row.
  std::vector<std::uint32_t> picks;
  for (std::uint64_t r = rows; r-- > 0 && picks.size() < 20;) picks.push_back(static_cast<std::uint32_t>(r));
  picks.push_back(static_cast<std::uint32_t>(rows - 1));
  picks.push_back(0);
  picks.push_back(static_cast<std::uint32_t>(rng() % rows));
  std::vector<std::byte> gathered(picks.size() * R * es, std::byte{0xee});
  REQUIRE(ibp::decode_gather(stream, picks, gathered).ok());
  for (std::size_t i = 0; i < picks.size(); ++i) {
    std::vector<std::byte> expected(R * es, std::byte{0});
    const std::uint64_t begin = picks[i] * R * es;
    const std::uint64_t bytes = std::min<std::uint64_t>(R * es, data.size() - begin);
    std::memcpy(expected.data(), data.data() + begin, bytes);
    CHECK(std::equal(expected.begin(), expected.end(), gathered.begin() + static_cast<std::ptrdiff_t>(i * R * es)));
  }
}

TEST_CASE("ibp: encode matches the reference encoder byte for byte; decoders round trip") {
  std::mt19937_64 rng(14);
  for (std::uint8_t es : {1, 2, 4, 8}) {
    for (const Shape& shape : kShapes) {
      const std::uint64_t rows = (shape.E + shape.R - 1) / shape.R;
      for (std::uint32_t G : {1u, 3u, static_cast<std::uint32_t>(rows), 1000u}) {
        for (int f = 0; f < static_cast<int>(IbpFamily::count); ++f) {
          const auto family = static_cast<IbpFamily>(f);
          CAPTURE(int{es});
          CAPTURE(shape.R);
          CAPTURE(shape.E);
          CAPTURE(G);
          CAPTURE(ferry::test::to_string(family));
          const auto data = ferry::test::ibp_tensor(family, es, shape.E, shape.R, rng);
          const auto stream = ibp::encode(data, params_of(es, shape.R, shape.E, G, 1 + rng() % 3));
          REQUIRE(stream.ok());
          const auto expected = reference_encode(data, es, shape.R, shape.E, G);
          REQUIRE(stream->size() == expected.size());
          CHECK(*stream == expected);
          CHECK(ibp::validate(*stream).ok());
          const auto bound = ibp::max_stream_bytes(params_of(es, shape.R, shape.E, G));
          REQUIRE(bound.ok());
          CHECK(stream->size() <= *bound);
          check_round_trips(*stream, data, es, shape.R, rng);
        }
      }
    }
  }
}

TEST_CASE("ibp: a big group over several threads and column tiles matches the reference") {
  std::mt19937_64 rng(141);
  for (IbpFamily family : {IbpFamily::half_zero_floats, IbpFamily::small_ints}) {
    const std::uint64_t R = 1100, E = R * 1100 - 7;
    const auto data = ferry::test::ibp_tensor(family, 2, E, R, rng);
    for (unsigned threads : {1u, 4u}) {
      const auto stream = ibp::encode(data, params_of(2, R, E, 1100, threads));
      REQUIRE(stream.ok());
      CHECK(*stream == reference_encode(data, 2, R, E, 1100));
    }
  }
}

TEST_CASE("ibp: groups past a counter's reach, every element size, match the reference") {
  // The host encoder counts in lanes of the element's width, flushed every 255 rows; 70 columns
  // leave partial vectors at any SIMD width, and a short last row.
  std::mt19937_64 rng(142);
  const std::uint64_t R = 70, E = R * 700 - 9;
  for (std::uint8_t es : {1, 2, 4, 8}) {
    for (int f = 0; f < static_cast<int>(IbpFamily::count); ++f) {
      const auto family = static_cast<IbpFamily>(f);
      CAPTURE(int{es});
      CAPTURE(ferry::test::to_string(family));
      const auto data = ferry::test::ibp_tensor(family, es, E, R, rng);
      for (std::uint32_t G : {700u, 300u}) {
        for (unsigned threads : {1u, 3u}) {
          const auto stream = ibp::encode(data, params_of(es, R, E, G, threads));
          REQUIRE(stream.ok());
          CHECK(*stream == reference_encode(data, es, R, E, G));
        }
      }
    }
  }
}

TEST_CASE("ibp: all rows raw, dtype and ndim kept, inspect's counts") {
  std::mt19937_64 rng(7);
  const auto data = ferry::test::ibp_tensor(IbpFamily::random, 4, 1000, 50, rng);
  auto params = params_of(4, 50, 1000, 8);
  params.dtype = ibp::DType::f32;
  params.ndim = 1;
  const auto stream = ibp::encode(data, params);
  REQUIRE(stream.ok());
  CHECK(*stream == reference_encode(data, 4, 50, 1000, 8, ibp::DType::f32, 1));
  const auto stats = ibp::inspect(*stream);
  REQUIRE(stats.ok());
  CHECK(stats->layout.dtype == ibp::DType::f32);
  CHECK(stats->layout.ndim == 1);
  REQUIRE(stats->groups.size() == 3);
  CHECK(stats->groups[2].rows == 4);
  std::uint64_t raw_rows = 0, rows = 0, table_raw_rows = 0;
  for (const auto& g : stats->groups) {
    raw_rows += g.rows_by_mode[2];
    rows += g.rows_by_mode[0] + g.rows_by_mode[1] + g.rows_by_mode[2];
  }
  for (std::uint64_t r = 0; r < 20; ++r) {
    table_raw_rows += ((*stream)[stats->layout.row_table_offset + 4 * r] & std::byte{3}) == std::byte{2};
  }
  CHECK(rows == 20);
  CHECK(raw_rows == table_raw_rows);
  CHECK(raw_rows > 0);
  CHECK(stats->ratio() < 1.0);
}

TEST_CASE("ibp: group_rows 0 picks the smallest stream among the candidates") {
  std::mt19937_64 rng(3);
  for (IbpFamily family : {IbpFamily::small_ints, IbpFamily::half_zero_floats, IbpFamily::constant}) {
    const std::uint64_t R = 16, E = R * 3000;
    const auto data = ferry::test::ibp_tensor(family, 4, E, R, rng);
    const auto chosen = ibp::encode(data, params_of(4, R, E, 0));
    REQUIRE(chosen.ok());
    std::vector<std::byte> best;
    for (std::uint32_t G : {3000u, 1024u, 128u}) {  // 8192 and 65536 are not below 3000 rows
      auto s = ibp::encode(data, params_of(4, R, E, G));
      REQUIRE(s.ok());
      if (best.empty() || s->size() < best.size()) best = std::move(*s);
    }
    CHECK(*chosen == best);
  }
}

TEST_CASE("ibp: parameter errors") {
  const std::vector<std::byte> data(64);
  CHECK(ibp::encode(data, params_of(3, 4, 16, 1)).status().code() == ErrorCode::invalid_argument);
  CHECK(ibp::encode(data, params_of(4, 0, 16, 1)).status().code() == ErrorCode::invalid_argument);
  CHECK(ibp::encode(data, params_of(4, 4, 0, 1)).status().code() == ErrorCode::invalid_argument);
  CHECK(ibp::encode(data, params_of(4, 4, 15, 1)).status().code() == ErrorCode::invalid_argument);
  auto bad_ndim = params_of(4, 4, 16, 1);
  bad_ndim.ndim = 3;
  CHECK(ibp::encode(data, bad_ndim).status().code() == ErrorCode::invalid_argument);
  // A group whose raw rows reach 4 GiB.
  CHECK(ibp::max_stream_bytes(params_of(4, 1u << 20, 1u << 22, 1024)).status().code() ==
        ErrorCode::invalid_argument);
  CHECK(ibp::max_stream_bytes(params_of(4, 4, 16, 0)).status().code() == ErrorCode::invalid_argument);
  std::vector<std::byte> small(10);
  std::uint64_t written = 0;
  CHECK(ibp::detail::encode_into(data, params_of(4, 4, 16, 1), small, &written).code() ==
        ErrorCode::out_of_range);
  std::vector<std::byte> big(*ibp::max_stream_bytes(params_of(4, 4, 16, 2)) + 8, std::byte{0x77});
  REQUIRE(ibp::detail::encode_into(data, params_of(4, 4, 16, 2), big, &written).ok());
  CHECK(std::equal(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(written),
                   ibp::encode(data, params_of(4, 4, 16, 2))->begin()));
  CHECK(big.back() == std::byte{0x77});
}

TEST_CASE("ibp: decoder argument errors") {
  std::mt19937_64 rng(5);
  const auto data = ferry::test::ibp_tensor(IbpFamily::small_ints, 4, 10 * 8 - 3, 8, rng);
  const auto stream = *ibp::encode(data, params_of(4, 8, 77, 4));
  std::vector<std::byte> out(data.size() + 4);
  CHECK(ibp::decode(stream, out).code() == ErrorCode::out_of_range);
  std::vector<std::byte> row(32);
  CHECK(ibp::decode_rows(stream, 10, 1, row).code() == ErrorCode::out_of_range);
  CHECK(ibp::decode_rows(stream, 9, 2, row).code() == ErrorCode::out_of_range);
  std::vector<std::byte> last(5 * 4);
  CHECK(ibp::decode_rows(stream, 9, 1, last).ok());
  const std::vector<std::uint32_t> picks = {1, 10};
  std::vector<std::byte> slots(64);
  CHECK(ibp::decode_gather(stream, picks, slots).code() == ErrorCode::out_of_range);
  const std::vector<std::uint32_t> fine = {9, 9};
  CHECK(ibp::decode_gather(stream, fine, slots).ok());
  CHECK(ibp::decode_gather(stream, fine, row).code() == ErrorCode::out_of_range);
}

// ---- Corrupt streams. ----

std::vector<std::byte> sample_stream(std::mt19937_64& rng, std::uint8_t es = 4) {
  const auto data = ferry::test::ibp_tensor(IbpFamily::small_ints, es, 40 * 37 - 5, 37, rng);
  return *ibp::encode(data, params_of(es, 37, 40 * 37 - 5, 6));
}

TEST_CASE("ibp: validate refuses truncated, extended and bit-flipped streams") {
  std::mt19937_64 rng(11);
  const auto stream = sample_stream(rng);
  REQUIRE(ibp::validate(stream).ok());
  for (std::size_t size : {std::size_t{0}, std::size_t{10}, std::size_t{63}, std::size_t{64},
                           stream.size() / 2, stream.size() - 1}) {
    const std::vector<std::byte> cut(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(size));
    CHECK(ibp::validate(cut).code() == ErrorCode::data_corrupt);
    std::vector<std::byte> out(37 * 4 * 40);
    CHECK(ibp::decode(cut, std::span(out).first(40 * 37 * 4 - 20)).code() == ErrorCode::data_corrupt);
  }
  auto longer = stream;
  longer.push_back(std::byte{0});
  CHECK(ibp::validate(longer).code() == ErrorCode::data_corrupt);
  for (std::size_t bit = 0; bit < stream.size() * 8; bit += 1 + rng() % 13) {
    auto flipped = stream;
    flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    CAPTURE(bit);
    CHECK(ibp::validate(flipped).code() == ErrorCode::data_corrupt);
  }
}

// Every structural check must hold on its own: the edits below keep the CRCs right.
TEST_CASE("ibp: validate and the checked row decoder catch restamped structural edits") {
  std::mt19937_64 rng(12);
  const auto stream = sample_stream(rng);
  const auto layout = *ibp::read_layout(stream);
  const auto edited = [&](std::uint64_t at, std::uint32_t value, unsigned bytes) {
    auto s = stream;
    std::memcpy(s.data() + at, &value, bytes);
    ferry::test::restamp_ibp(s);
    return s;
  };
  std::vector<std::vector<std::byte>> cases;
  cases.push_back(edited(layout.group_table_offset + 8, 4, 4));                 // group 1 moved
  cases.push_back(edited(layout.group_table_offset + 8, 0xfffffff0u, 4));       // out of range
  cases.push_back(edited(layout.group_table_offset, 4, 4));                     // entry 0
  cases.push_back(edited(layout.row_table_offset + 4, 3, 1));                   // mode 3
  cases.push_back(edited(layout.row_table_offset + 8, 0xfffffffcu, 4));         // far offset
  cases.push_back(edited(layout.row_table_offset + 4 * 6, 4, 4));               // group start
  cases.push_back(edited(layout.masks_offset + 4 * 37, 0xffffffffu, 4));        // value & ~mask
  cases.push_back(edited(layout.data_offset, 0xffffffffu, 4));                  // a bitmap
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    CHECK(ibp::validate(cases[i]).code() == ErrorCode::data_corrupt);
  }
  // The checked row decoder reads nothing outside its span (ASan watches the exact-size copies).
  std::uint64_t refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto s = stream;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::uint64_t table_bytes = layout.data_offset - layout.group_table_offset;
      const std::uint64_t at = layout.group_table_offset + rng() % table_bytes;
      s[at] = static_cast<std::byte>(rng());
    }
    ferry::test::restamp_ibp(s);
    if (rng() % 4 == 0) s.resize(rng() % s.size());
    const std::vector<std::byte> exact(s.begin(), s.end());
    std::vector<std::byte> out(37 * 4);
    for (std::uint64_t r = 0; r < layout.rows + 2; ++r) {
      if (!ibp::detail::decode_row_checked(exact, layout, r, out.data())) ++refused;
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("ibp: read_layout refuses bad headers") {
  std::mt19937_64 rng(13);
  const auto stream = sample_stream(rng);
  const auto with = [&](std::size_t at, std::uint64_t value, unsigned bytes) {
    auto s = stream;
    std::memcpy(s.data() + at, &value, bytes);
    ferry::test::restamp_ibp(s);
    return ibp::read_layout(s).status().code();
  };
  CHECK(with(0, 'X', 1) == ErrorCode::data_corrupt);        // magic
  CHECK(with(8, 2, 2) == ErrorCode::data_corrupt);          // version
  CHECK(with(10, 3, 1) == ErrorCode::data_corrupt);         // element size
  CHECK(with(11, 99, 1) == ErrorCode::data_corrupt);        // dtype
  CHECK(with(12, 0, 1) == ErrorCode::data_corrupt);         // ndim
  CHECK(with(14, 1, 1) == ErrorCode::data_corrupt);         // zero field
  CHECK(with(16, 0, 4) == ErrorCode::data_corrupt);         // group_rows
  CHECK(with(24, 0, 8) == ErrorCode::data_corrupt);         // rows
  CHECK(with(40, 40 * 37 + 1, 8) == ErrorCode::data_corrupt);  // elements
  CHECK(with(48, 6, 8) == ErrorCode::data_corrupt);         // data_bytes
  CHECK(with(32, ~std::uint64_t{0} / 2, 8) == ErrorCode::data_corrupt);
  auto bad_crc = stream;
  bad_crc[61] ^= std::byte{1};
  CHECK(ibp::read_layout(bad_crc).status().code() == ErrorCode::data_corrupt);
}

}  // namespace
