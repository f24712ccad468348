// Fuzzing the IBP readers (read_layout, validate, decode, decode_rows, decode_gather, inspect,
// and the ops' checked row decoder): a deterministic, seeded mutation loop over valid streams
// (byte flips, truncations, extensions, table and header edits with the CRCs re-stamped, so the
// structural checks are what must catch them), bounded by wall time and iterations; run by
// ctest as ibp_fuzz, under every preset's sanitizers. Built with -DFERRY_FUZZ=ON and clang, the
// same checks are also a libFuzzer target (ferry_ibp_libfuzzer).
//
// Properties: nothing crashes or reads out of bounds (the sanitizers watch exact-size copies);
// a stream validate accepts decodes; one it refuses is refused by decode as data_corrupt.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/ibp_streams.hpp"
#include "ferry/ibp.hpp"
#include "ibp/stream.hpp"

namespace {

namespace ibp = ferry::ibp;

bool fail(const char* what, const ferry::Status& status) {
  std::fprintf(stderr, "ibp_fuzz: %s: %s\n", what, status.to_string().c_str());
  return false;
}

// Runs every reader on `bytes` (an exact-size copy, so any read past it is an ASan finding).
bool exercise(std::span<const std::byte> input) {
  const std::vector<std::byte> bytes(input.begin(), input.end());
  const auto layout = ibp::read_layout(bytes);
  const ferry::Status valid = ibp::validate(bytes, 2);
  if (!layout.ok()) {
    if (valid.ok()) return fail("validate accepted what read_layout refused", valid);
    return true;
  }
  const ibp::Layout& l = *layout;
  // Keep each case cheap: tensors of mutated headers can be huge.
  const std::uint64_t row_bytes = l.row_elements * l.element_size;
  if (row_bytes > (1u << 20) || l.raw_bytes() > (16u << 20)) return true;
  std::vector<std::byte> row(row_bytes);
  for (std::uint64_t r = 0; r < std::min<std::uint64_t>(l.rows, 4096); ++r) {
    if (!ibp::detail::decode_row_checked(bytes, l, r, row.data()) && valid.ok()) {
      return fail("decode_row_checked refused a row of a valid stream", valid);
    }
  }
  if (ibp::detail::decode_row_checked(bytes, l, l.rows, row.data())) {
    return fail("decode_row_checked decoded the row past the end", valid);
  }
  std::vector<std::byte> out(l.raw_bytes());
  const ferry::Status decoded = ibp::decode(bytes, out, false, 2);
  if (valid.ok() && !decoded.ok()) return fail("decode refused a valid stream", decoded);
  if (!valid.ok() && decoded.code() != ferry::ErrorCode::data_corrupt) {
    return fail("decode of an invalid stream", decoded);
  }
  // The trusting paths (validated = true) on a stream that may be invalid: errors, never faults.
  (void)ibp::decode(bytes, out, true, 2);
  const std::uint64_t first = l.rows / 2;
  const std::uint64_t end_element = std::min(l.elements, (first + 1) * l.row_elements);
  std::vector<std::byte> slice((end_element - first * l.row_elements) * l.element_size);
  (void)ibp::decode_rows(bytes, first, 1, slice, true);
  const std::uint32_t picks[] = {0, static_cast<std::uint32_t>(std::min<std::uint64_t>(l.rows - 1, 0xffffffffu)), 0};
  std::vector<std::byte> slots(3 * row_bytes);
  (void)ibp::decode_gather(bytes, picks, slots, true);
  const auto stats = ibp::inspect(bytes);
  if (stats.ok() != valid.ok()) return fail("inspect and validate disagree", stats.status());
  return true;
}

std::vector<std::vector<std::byte>> corpus() {
  std::mt19937_64 rng(2026);
  std::vector<std::vector<std::byte>> streams;
  struct Case {
    std::uint8_t es;
    std::uint64_t R, E;
    std::uint32_t G;
    ferry::test::IbpFamily family;
  };
  using F = ferry::test::IbpFamily;
  const Case cases[] = {{4, 37, 40 * 37 - 5, 6, F::small_ints},  {8, 9, 200, 7, F::half_zero_floats},
                        {1, 50, 1000, 4, F::random},             {2, 33, 33 * 30, 30, F::half_zero_floats},
                        {4, 1, 300, 64, F::constant},           {2, 70, 140 * 70 - 1, 16, F::alternating},
                        {4, 3000, 3000 * 25, 25, F::small_ints}};  // > 64 KiB: several chunks
  for (const Case& c : cases) {
    const auto data = ferry::test::ibp_tensor(c.family, c.es, c.E, c.R, rng);
    ibp::EncodeParams p;
    p.element_size = c.es;
    p.row_elements = c.R;
    p.elements = c.E;
    p.group_rows = c.G;
    p.threads = 1;
    streams.push_back(*ibp::encode(data, p));
  }
  return streams;
}

std::vector<std::byte> mutate(const std::vector<std::byte>& base, std::mt19937_64& rng) {
  std::vector<std::byte> s = base;
  const auto layout = *ibp::read_layout(base);
  const auto poke = [&](std::uint64_t at, std::uint64_t value, unsigned bytes) {
    if (at + bytes <= s.size()) std::memcpy(s.data() + at, &value, bytes);
  };
  const auto near = [&](std::uint64_t at, unsigned bytes) {
    std::uint64_t v = 0;
    std::memcpy(&v, s.data() + at, bytes);
    const std::uint64_t deltas[] = {1, 2, 3, 4, 8, 12, 0x100, 0x10000};
    const std::uint64_t d = deltas[rng() % 8];
    return rng() % 2 == 0 ? v + d : v - d;
  };
  bool restamp = rng() % 4 != 0;
  switch (rng() % 6) {
    case 0:  // byte flips anywhere
      for (int i = 0, n = 1 + static_cast<int>(rng() % 8); i < n; ++i) {
        s[rng() % s.size()] ^= static_cast<std::byte>(1 + rng() % 255);
      }
      break;
    case 1: {  // a group table entry
      const std::uint64_t at = layout.group_table_offset + 8 * (rng() % (layout.group_count + 1));
      poke(at, rng() % 3 == 0 ? rng() : near(at, 8), 8);
      break;
    }
    case 2: {  // row table entries: offsets and modes
      for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i) {
        const std::uint64_t at = layout.row_table_offset + 4 * (rng() % layout.rows);
        poke(at, rng() % 3 == 0 ? rng() : near(at, 4), 4);
      }
      break;
    }
    case 3: {  // masks, values, row bitmaps
      const std::uint64_t span = layout.checksum_offset - layout.masks_offset;
      for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i) {
        s[layout.masks_offset + rng() % span] = static_cast<std::byte>(rng());
      }
      break;
    }
    case 4: {  // header fields
      const std::uint64_t fields[] = {10, 11, 12, 16, 24, 32, 40, 48};
      const std::uint64_t at = fields[rng() % 8];
      const unsigned bytes = at < 16 ? 1 : at == 16 ? 4 : 8;
      poke(at, rng() % 2 == 0 ? rng() % 300 : near(at, bytes), bytes);
      break;
    }
    default:  // extended
      for (int i = 0, n = 1 + static_cast<int>(rng() % 16); i < n; ++i) {
        s.push_back(static_cast<std::byte>(rng()));
      }
      break;
  }
  if (restamp) ferry::test::restamp_ibp(s);
  if (rng() % 5 == 0) s.resize(rng() % (s.size() + 1));  // truncated
  return s;
}

}  // namespace

#ifdef FERRY_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!exercise(std::as_bytes(std::span(data, size)))) std::abort();
  return 0;
}
#else
// ibp_fuzz [seconds] [iterations]: stops at whichever comes first (defaults: 8 s, 200000).
int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 8.0;
  const long iterations = argc > 2 ? std::atol(argv[2]) : 200000;
  const auto streams = corpus();
  for (const auto& s : streams) {
    if (!ibp::validate(s).ok() || !exercise(s)) {
      std::fprintf(stderr, "ibp_fuzz: a corpus stream fails\n");
      return 1;
    }
  }
  std::mt19937_64 rng(14);
  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (; done < iterations; ++done) {
    if (done % 64 == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
      break;
    }
    const auto& base = streams[rng() % streams.size()];
    const auto mutated = mutate(base, rng);
    if (!exercise(mutated)) {
      std::fprintf(stderr, "ibp_fuzz: iteration %ld failed\n", done);
      return 1;
    }
  }
  std::printf("ibp_fuzz: %ld mutated streams, no finding\n", done);
  return 0;
}
#endif
