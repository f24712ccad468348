// The ibp_decode op: on every backend, decode(encode(x)) must give x back bit for bit (the truth is
// the tensor itself), for every element size, several group sizes, tensor families and awkward
// shapes; a row range and gathers (any order, duplicates, an index out of range) must give the
// tensor's rows; a stream in host memory the device reads in place must give the same. Corrupt
// streams (with their CRCs re-stamped, so that only the tables tell) must zero exactly the rows
// they break and set the status bit, never touching bytes outside the output. Then every bad
// parameter is a clear error that records nothing.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::BufferRef;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::IbpDecodeBuffers;
using ferry::IbpDecodeParams;
using ferry::IbpDecodeRows;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;
namespace ibp = ferry::ibp;

namespace {

// ---- tensors --------------------------------------------------------------------------------

enum class Family { constant, random, alternating, small_ints, half_zero_floats };

const char* name_of(Family family) {
  switch (family) {
    case Family::constant: return "constant";
    case Family::random: return "random";
    case Family::alternating: return "alternating";
    case Family::small_ints: return "small ints with outliers";
    case Family::half_zero_floats: return "half-zero floats";
  }
  return "?";
}

// `elements` little-endian elements of `size` bytes.
std::vector<std::byte> make_tensor(std::mt19937_64& rng, Family family, unsigned size,
                                   std::uint64_t elements) {
  std::vector<std::byte> bytes(elements * size);
  const std::uint64_t constant = rng();
  for (std::uint64_t i = 0; i < elements; ++i) {
    std::uint64_t x = 0;
    switch (family) {
      case Family::constant: x = constant; break;
      case Family::random: x = rng(); break;
      case Family::alternating: x = (i % 2 == 0) ? 0x5555555555555555ull : 0xaaaaaaaaaaaaaaaaull; break;
      case Family::small_ints: x = rng() % 100 == 0 ? rng() : rng() % 200; break;
      case Family::half_zero_floats: {
        // The top bits of a float of size `size`: sign 0, an exponent near the bias, a random
        // mantissa; half the elements zero.
        const std::uint64_t top = 0x3full << (8 * size - 8);
        x = rng() % 2 == 0 ? 0 : (top | (rng() >> (8 * (8 - size) + 4)));
        break;
      }
    }
    std::memcpy(bytes.data() + i * size, &x, size);  // the low bytes (little-endian hosts)
  }
  return bytes;
}

// ---- CRC-32C, to re-stamp edited streams (the device decoder does not read the CRCs; a stream
// whose CRCs are right is the corruption only the tables can reveal) ---------------------------

std::uint32_t crc32c(const std::byte* data, std::size_t size) {
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= static_cast<std::uint8_t>(data[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

template <typename T>
T load(const std::vector<std::byte>& bytes, std::uint64_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}
template <typename T>
void store(std::vector<std::byte>& bytes, std::uint64_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// Recomputes every chunk CRC, the checksum table's CRC and the header's (docs/IBP_FORMAT.md).
void restamp(std::vector<std::byte>& stream) {
  const std::uint64_t data_bytes = load<std::uint64_t>(stream, 48);
  const std::uint64_t rows = load<std::uint64_t>(stream, 24);
  const std::uint64_t row_elements = load<std::uint64_t>(stream, 32);
  const std::uint64_t group_rows = load<std::uint32_t>(stream, 16);
  const std::uint64_t element_size = static_cast<std::uint8_t>(stream[10]);
  const std::uint64_t groups = (rows + group_rows - 1) / group_rows;
  const std::uint64_t masks = 64 + 8 * (groups + 1);
  const std::uint64_t block = (2 * row_elements * element_size + 7) / 8 * 8;
  const std::uint64_t row_table = masks + groups * block;
  const std::uint64_t data = row_table + (rows * 4 + 7) / 8 * 8;
  const std::uint64_t end = data + data_bytes;
  const std::uint64_t chunks = (end - 64 + 65535) / 65536;
  stream.resize(end + 4 * chunks);
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t first = 64 + c * 65536;
    store(stream, end + 4 * c, crc32c(stream.data() + first, std::min<std::uint64_t>(65536, end - first)));
  }
  store(stream, 56, crc32c(stream.data() + end, 4 * chunks));
  store(stream, 60, crc32c(stream.data(), 60));
}

// ---- running the op ---------------------------------------------------------------------------

enum class Source { device, lease };

struct Decoded {
  std::vector<std::byte> output;
  std::uint32_t status = 0;
};

// Decodes `stream` on t.device: the stream at byte 8 of its memory (a device buffer or a
// lease), the output at an odd multiple of the element size between poisoned guard bytes that
// must survive, the status (poisoned first) after them, the indices (gather) at byte 4.
Decoded run_decode(BackendUnderTest& t, const std::vector<std::byte>& stream,
                   const IbpDecodeParams& params, std::span<const std::uint32_t> indices = {},
                   Source source = Source::device) {
  const ferry::Device& device = t.device;
  const std::uint64_t out_bytes = REQUIRE_VALUE(ferry::ibp_decode_output_bytes(params));
  const std::uint64_t es = params.layout.element_size;
  const std::uint64_t out_offset = 3 * es + 16;  // word-aligned only for es 4 and 8
  const std::uint64_t status_offset = (out_offset + out_bytes + 7 + 16) / 4 * 4;
  const std::uint64_t total = status_offset + 4 + 12;
  const std::vector<std::byte> poison = ferry_test::poison_bytes(total, 7);
  const Buffer outputs = REQUIRE_VALUE(ferry_test::device_buffer_with(device, poison));

  std::vector<std::byte> stream_bytes(8 + stream.size(), std::byte{0x3c});
  std::copy(stream.begin(), stream.end(), stream_bytes.begin() + 8);
  std::optional<Buffer> stream_buffer;
  std::optional<ferry::StagingPool> pool;
  std::optional<ferry::Lease> lease;
  if (source == Source::device) {
    stream_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(device, stream_bytes));
  } else {
    pool = REQUIRE_VALUE(device.create_staging_pool(
        ferry_test::small_pool(ferry::MemoryKind::host_upload, 4 << 20)));
    lease = REQUIRE_VALUE(pool->acquire(stream_bytes.size()));
    std::memcpy(lease->data().data(), stream_bytes.data(), stream_bytes.size());
  }
  const BufferRef stream_ref = lease ? BufferRef(*lease) : BufferRef(*stream_buffer);
  std::vector<std::byte> index_bytes(4 + indices.size_bytes());
  if (!indices.empty()) std::memcpy(index_bytes.data() + 4, indices.data(), indices.size_bytes());
  const Buffer index_buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(device, index_bytes));

  const IbpDecodeBuffers buffers{stream_ref, 8,          index_buffer, 4,
                                 outputs,    out_offset, outputs,      status_offset};
  CommandList commands;
  REQUIRE_OK(ferry::ibp_decode(commands, buffers, params));
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  const std::vector<std::byte> bytes =
      REQUIRE_VALUE(ferry_test::read_bytes(device, outputs, 0, total));
  auto same = [&](std::uint64_t at, std::uint64_t n) {
    return std::equal(bytes.begin() + at, bytes.begin() + at + n, poison.begin() + at);
  };
  CHECK_MESSAGE(same(0, out_offset), "bytes before the output changed");
  CHECK_MESSAGE(same(out_offset + out_bytes, status_offset - out_offset - out_bytes),
                "bytes between the output and the status changed");
  CHECK_MESSAGE(same(status_offset + 4, 12), "bytes after the status changed");
  Decoded decoded;
  decoded.output.assign(bytes.begin() + out_offset, bytes.begin() + out_offset + out_bytes);
  decoded.status = load<std::uint32_t>(bytes, status_offset);
  return decoded;
}

// The same decode on the CPU reference device: the truth for a corrupt stream's rows and status.
Decoded run_decode_on_cpu(const ferry::Device& reference, const std::vector<std::byte>& stream,
                          const IbpDecodeParams& params) {
  BackendUnderTest on_cpu;
  on_cpu.device = reference;
  return run_decode(on_cpu, stream, params);
}

// The stream byte where `row`'s stored bytes begin (its group's start plus its row table offset).
std::uint64_t row_start(const std::vector<std::byte>& stream, const ferry::ibp::Layout& layout,
                        std::uint64_t group_rows, std::uint64_t row) {
  const std::uint64_t group = row / group_rows;
  return layout.data_offset + load<std::uint64_t>(stream, layout.group_table_offset + 8 * group) +
         (load<std::uint32_t>(stream, layout.row_table_offset + 4 * row) & ~3u);
}

ibp::Layout layout_of(const std::vector<std::byte>& stream) {
  return REQUIRE_VALUE(ibp::read_layout(stream));
}

IbpDecodeParams whole(const ibp::Layout& layout) {
  IbpDecodeParams params;
  params.layout = layout;
  return params;
}

// The tensor's rows `rows` as gather slots (R x es bytes each, zeros past a short row); an index
// past the rows is a zero slot.
std::vector<std::byte> gathered(const std::vector<std::byte>& tensor, const ibp::Layout& layout,
                                std::span<const std::uint32_t> rows) {
  const std::uint64_t slot = layout.row_elements * layout.element_size;
  std::vector<std::byte> out(rows.size() * slot, std::byte{0});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= layout.rows) continue;
    const std::uint64_t first = rows[i] * slot;
    const std::uint64_t n = std::min<std::uint64_t>(slot, tensor.size() - first);
    std::memcpy(out.data() + i * slot, tensor.data() + first, n);
  }
  return out;
}

struct Shape {
  std::uint64_t elements;
  std::uint64_t row_elements;
  std::uint32_t group_rows;
};

std::vector<std::byte> encode(const std::vector<std::byte>& tensor, unsigned size,
                              const Shape& shape) {
  ibp::EncodeParams params;
  params.element_size = static_cast<std::uint8_t>(size);
  params.row_elements = shape.row_elements;
  params.elements = shape.elements;
  params.group_rows = shape.group_rows;
  return REQUIRE_VALUE(ibp::encode(tensor, params));
}

std::string describe(unsigned size, const Shape& shape, Family family) {
  return std::to_string(size) + "-byte elements, " + std::to_string(shape.elements) +
         " in rows of " + std::to_string(shape.row_elements) + ", groups of " +
         std::to_string(shape.group_rows) + ", " + name_of(family);
}

}  // namespace

TEST_CASE("ibp_decode: decode(encode(x)) == x for every element size, group size and family") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    const Shape shapes[] = {
        {1, 1, 1},             // one element
        {7, 1, 3},             // one element per row, a short last group
        {333, 333, 1},         // one row of an odd length
        {37 * 50 - 13, 50, 8}, // a short last row and a short last group
        {3 * 41, 3, 16},       // rows of 3 elements (R x es not a multiple of 4 below 4 bytes)
        {64 * 40 + 1, 64, 40}, // one group of every row but the last row (alone in its group)
        {200 * 33, 33, 7},
    };
    const Family families[] = {Family::constant, Family::random, Family::alternating,
                               Family::small_ints, Family::half_zero_floats};
    for (const unsigned size : {1u, 2u, 4u, 8u}) {
      for (const Shape& shape : shapes) {
        for (const Family family : families) {
          if (ferry_test::light_run() && (size + static_cast<unsigned>(family)) % 2 != 0)
            continue;  // half the sweep under the sanitizers
          INFO(describe(size, shape, family));
          const std::vector<std::byte> tensor = make_tensor(t.rng, family, size, shape.elements);
          const std::vector<std::byte> stream = encode(tensor, size, shape);
          const Decoded decoded = run_decode(t, stream, whole(layout_of(stream)));
          CHECK(decoded.status == 0);
          CHECK(ferry_test::check_bytes_equal(decoded.output, tensor, "the decoded tensor"));
        }
      }
    }
  });
}

TEST_CASE("ibp_decode: the host decoder and the op agree on larger tensors") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    for (const unsigned size : {2u, 4u, 8u}) {
      const Shape shape{300 * 257 - 100, 257, 64};
      INFO(describe(size, shape, Family::small_ints));
      const std::vector<std::byte> tensor = make_tensor(t.rng, Family::small_ints, size, shape.elements);
      const std::vector<std::byte> stream = encode(tensor, size, shape);
      std::vector<std::byte> host(tensor.size());
      REQUIRE_OK(ibp::decode(stream, host));
      CHECK(ferry_test::check_bytes_equal(host, tensor, "the host decoder's tensor"));
      const Decoded decoded = run_decode(t, stream, whole(layout_of(stream)));
      CHECK(decoded.status == 0);
      CHECK(ferry_test::check_bytes_equal(decoded.output, tensor, "the decoded tensor"));
    }
  });
}

TEST_CASE("ibp_decode: row ranges") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    for (const unsigned size : {1u, 2u, 4u, 8u}) {
      const Shape shape{45 * 29 - 7, 29, 4};
      const std::uint64_t rows = 45;
      const std::vector<std::byte> tensor = make_tensor(t.rng, Family::small_ints, size, shape.elements);
      const std::vector<std::byte> stream = encode(tensor, size, shape);
      const ibp::Layout layout = layout_of(stream);
      const std::pair<std::uint64_t, std::uint64_t> ranges[] = {
          {0, 1}, {rows - 1, 1}, {13, 1}, {0, rows}, {7, 30}, {30, rows - 30}};
      for (const auto& [first, count] : ranges) {
        INFO(size << "-byte elements, rows " << first << " + " << count);
        IbpDecodeParams params = whole(layout);
        params.rows = IbpDecodeRows::range;
        params.first_row = first;
        params.row_count = count;
        const Decoded decoded = run_decode(t, stream, params);
        const std::uint64_t begin = first * shape.row_elements * size;
        const std::uint64_t end =
            std::min<std::uint64_t>(tensor.size(), (first + count) * shape.row_elements * size);
        const std::vector<std::byte> expected(tensor.begin() + begin, tensor.begin() + end);
        CHECK(decoded.status == 0);
        CHECK(ferry_test::check_bytes_equal(decoded.output, expected, "the rows"));
      }
    }
  });
}

TEST_CASE("ibp_decode: gathers in any order, with duplicates and an index out of range") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    for (const unsigned size : {1u, 2u, 4u, 8u}) {
      const Shape shape{60 * 23 - 5, 23, 8};
      const std::uint32_t rows = 60;
      const std::vector<std::byte> tensor = make_tensor(t.rng, Family::half_zero_floats, size, shape.elements);
      const std::vector<std::byte> stream = encode(tensor, size, shape);
      const ibp::Layout layout = layout_of(stream);
      std::vector<std::uint32_t> reversed(rows);
      std::iota(reversed.rbegin(), reversed.rend(), 0u);
      std::vector<std::uint32_t> duplicates;
      for (int i = 0; i < 50; ++i) duplicates.push_back(static_cast<std::uint32_t>(t.rng() % rows));
      duplicates.push_back(rows - 1);
      duplicates.push_back(rows - 1);
      const std::vector<std::uint32_t> out_of_range = {3, rows, rows - 1, 0xffffffffu, 3, 0};
      const std::vector<std::uint32_t>* lists[] = {&reversed, &duplicates, &out_of_range};
      for (const std::vector<std::uint32_t>* list : lists) {
        INFO(size << "-byte elements, " << list->size() << " indices");
        IbpDecodeParams params = whole(layout);
        params.rows = IbpDecodeRows::gather;
        params.row_count = list->size();
        const Decoded decoded = run_decode(t, stream, params, *list);
        const bool bad = list == lists[2];
        CHECK(decoded.status == (bad ? ferry::kIbpStatusIndexOutOfRange : 0u));
        CHECK(ferry_test::check_bytes_equal(decoded.output, gathered(tensor, layout, *list),
                                            "the gathered rows"));
      }
    }
  });
}

TEST_CASE("ibp_decode: a stream in host memory the device reads in place") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    for (const unsigned size : {1u, 4u, 8u}) {
      // 70 rows of 31 in groups of 16, the last row short (26 elements).
      const Shape shape{70 * 31 - 5, 31, 16};
      const std::vector<std::byte> tensor = make_tensor(t.rng, Family::small_ints, size, shape.elements);
      const std::vector<std::byte> stream = encode(tensor, size, shape);
      const ibp::Layout layout = layout_of(stream);
      const Decoded decoded = run_decode(t, stream, whole(layout), {}, Source::lease);
      CHECK(decoded.status == 0);
      CHECK(ferry_test::check_bytes_equal(decoded.output, tensor, "the decoded tensor"));
      // Gathers of fewer than 1/8 of the rows read the row table in place where the GPU backends
      // copy the other tables (ops::ibp_gather_reads_row_table_in_place); of more, from the copy.
      std::vector<std::uint32_t> many(20);
      for (std::uint32_t& row : many) row = static_cast<std::uint32_t>(t.rng() % 70);
      many[3] = 69;
      const std::vector<std::vector<std::uint32_t>> lists = {
          {69, 0, 35, 35}, {15, 16, 70, 69, 0xffffffffu}, many};
      for (const std::vector<std::uint32_t>& rows : lists) {
        INFO(size << "-byte elements, " << rows.size() << " rows gathered");
        IbpDecodeParams params = whole(layout);
        params.rows = IbpDecodeRows::gather;
        params.row_count = rows.size();
        const Decoded slots = run_decode(t, stream, params, rows, Source::lease);
        const bool out_of_range = std::any_of(rows.begin(), rows.end(),
                                              [](std::uint32_t row) { return row >= 70; });
        CHECK(slots.status == (out_of_range ? ferry::kIbpStatusIndexOutOfRange : 0u));
        CHECK(ferry_test::check_bytes_equal(slots.output, gathered(tensor, layout, rows),
                                            "the rows"));
      }
      // A corrupt row table entry read in place (row 35's mode 3): that slot alone is zeros.
      std::vector<std::byte> corrupt = stream;
      const std::uint64_t entry = layout.row_table_offset + 4 * 35;
      store(corrupt, entry, load<std::uint32_t>(corrupt, entry) | 3u);
      restamp(corrupt);
      for (const std::vector<std::uint32_t>& rows :
           {std::vector<std::uint32_t>{35, 0, 69}, many}) {
        INFO(size << "-byte elements, row 35's mode 3, " << rows.size() << " rows gathered");
        IbpDecodeParams params = whole(layout);
        params.rows = IbpDecodeRows::gather;
        params.row_count = rows.size();
        const Decoded slots = run_decode(t, corrupt, params, rows, Source::lease);
        std::vector<std::uint32_t> expected_rows = rows;
        for (std::uint32_t& row : expected_rows) row = row == 35 ? 0xffffffffu : row;
        const bool has_35 = std::find(rows.begin(), rows.end(), 35u) != rows.end();
        CHECK(slots.status == (has_35 ? ferry::kIbpStatusCorrupt : 0u));
        CHECK(ferry_test::check_bytes_equal(slots.output, gathered(tensor, layout, expected_rows),
                                            "the rows, row 35's slots zero"));
      }
    }
  });
}

namespace {

// The tensor with rows `bad` zeroed.
std::vector<std::byte> with_zero_rows(std::vector<std::byte> tensor, const ibp::Layout& layout,
                                      std::initializer_list<std::uint64_t> bad) {
  const std::uint64_t row = layout.row_elements * layout.element_size;
  for (const std::uint64_t r : bad) {
    const std::uint64_t first = r * row;
    std::fill(tensor.begin() + first,
              tensor.begin() + std::min<std::uint64_t>(tensor.size(), first + row), std::byte{0});
  }
  return tensor;
}

}  // namespace

TEST_CASE("ibp_decode: corrupt tables zero their rows and set the status") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    const ferry::Device reference = REQUIRE_VALUE(t.open_cpu_reference());
    for (const unsigned size : {1u, 4u, 8u}) {
      // 40 rows of 37 in groups of 8: 5 groups; random rows are raw, small ints bitmap rows.
      const Shape shape{40 * 37, 37, 8};
      const std::vector<std::byte> tensor = make_tensor(t.rng, Family::small_ints, size, shape.elements);
      const std::vector<std::byte> good = encode(tensor, size, shape);
      const ibp::Layout layout = layout_of(good);
      auto row_entry_at = [&](std::uint64_t row) { return layout.row_table_offset + 4 * row; };
      auto check_corrupt = [&](const std::vector<std::byte>& stream, const ibp::Layout& used,
                               const std::vector<std::byte>& expected, const char* what) {
        // From device memory, and from host memory (where GPU backends read the tables from a
        // device copy).
        for (const Source source : {Source::device, Source::lease}) {
          INFO(size << "-byte elements: " << what << (source == Source::lease ? ", host stream" : ""));
          const Decoded decoded = run_decode(t, stream, whole(used), {}, source);
          CHECK(decoded.status == ferry::kIbpStatusCorrupt);
          CHECK(ferry_test::check_bytes_equal(decoded.output, expected, "the decoded tensor"));
        }
      };
      {  // A row's mode 3: that row alone.
        std::vector<std::byte> stream = good;
        const std::uint64_t at = row_entry_at(11);
        store(stream, at, load<std::uint32_t>(stream, at) | 3u);
        restamp(stream);
        check_corrupt(stream, layout, with_zero_rows(tensor, layout, {11}), "row 11's mode 3");
      }
      {  // A row's offset 4 bytes later: it and the row before it have the wrong lengths.
        std::vector<std::byte> stream = good;
        const std::uint64_t at = row_entry_at(13);
        store(stream, at, load<std::uint32_t>(stream, at) + 4u);
        restamp(stream);
        check_corrupt(stream, layout, with_zero_rows(tensor, layout, {12, 13}),
                      "row 13's offset + 4");
      }
      {  // A row's offset past its group's end.
        std::vector<std::byte> stream = good;
        const std::uint64_t at = row_entry_at(23);
        store(stream, at, (load<std::uint32_t>(stream, at) & 3u) | 0xfffffff0u);
        restamp(stream);
        check_corrupt(stream, layout, with_zero_rows(tensor, layout, {22, 23}),
                      "row 23's offset past its group");
      }
      {  // Group 2's start past the data: groups 1 and 2 (rows 8 .. 23).
        std::vector<std::byte> stream = good;
        store(stream, layout.group_table_offset + 8 * 2, layout.data_bytes + 4);
        restamp(stream);
        check_corrupt(stream, layout,
                      with_zero_rows(tensor, layout, {8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                                      20, 21, 22, 23}),
                      "group 2's start past the data");
      }
      {  // The data 8 bytes shorter in the header (the stream cut to it, the CRCs re-stamped): the
         // last group ends past the data.
        std::vector<std::byte> stream = good;
        store(stream, 48, layout.data_bytes - 8);
        restamp(stream);
        const ibp::Layout shorter = layout_of(stream);
        check_corrupt(stream, shorter,
                      with_zero_rows(tensor, layout, {32, 33, 34, 35, 36, 37, 38, 39}),
                      "data_bytes 8 bytes short");
      }
      {  // Bitmap bits flipped in a bitmap row: whatever the row decodes to, every backend decodes
         // it as the CPU reference does, and the other rows are right.
        std::vector<std::byte> stream = good;
        std::uint64_t row = 0;
        for (; row < layout.rows; ++row) {
          if ((load<std::uint32_t>(stream, row_entry_at(row)) & 3u) == 0) break;
        }
        if (row == layout.rows) continue;  // no bitmap row (not with these tensors)
        const std::uint64_t start = row_start(stream, layout, shape.group_rows, row);
        store(stream, start, load<std::uint32_t>(stream, start) ^ 0x0000ffffu);
        restamp(stream);
        INFO(size << "-byte elements: bitmap bits of row " << row << " flipped");
        const Decoded decoded = run_decode(t, stream, whole(layout));
        const Decoded expected = run_decode_on_cpu(reference, stream, whole(layout));
        CHECK(decoded.status == expected.status);
        CHECK(ferry_test::check_bytes_equal(decoded.output, expected.output, "the CPU's decode"));
        const std::uint64_t row_bytes = shape.row_elements * size;
        for (std::uint64_t r = 0; r < layout.rows; ++r) {
          if (r == row) continue;
          CHECK_MESSAGE(std::equal(tensor.begin() + r * row_bytes, tensor.begin() + (r + 1) * row_bytes,
                                   decoded.output.begin() + r * row_bytes),
                        "row " << r << " changed");
        }
      }
    }
  });
}

TEST_CASE("ibp_decode: long rows, split among several subgroups on Vulkan") {
  // Rows of thousands of elements: the Vulkan subgroup shader splits each among several
  // subgroups (segments of whole chunks), whose bit counts must add up before anything is stored.
  // Lengths not a multiple of any team width, a corrupt row whose error lies in the middle of a
  // segment, and gathers of such rows.
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    const ferry::Device reference = REQUIRE_VALUE(t.open_cpu_reference());
    const Shape shapes[] = {
        {6 * 4096, 4096, 4},     // whole words of every element size
        {5 * 3001 - 17, 3001, 2},  // odd rows: items that start mid-word below 4 bytes
    };
    for (const unsigned size : {1u, 2u, 4u, 8u}) {
      for (const Shape& shape : shapes) {
        for (const Family family : {Family::small_ints, Family::half_zero_floats, Family::random}) {
          INFO(describe(size, shape, family));
          const std::vector<std::byte> tensor = make_tensor(t.rng, family, size, shape.elements);
          const std::vector<std::byte> stream = encode(tensor, size, shape);
          const ibp::Layout layout = layout_of(stream);
          const Decoded decoded = run_decode(t, stream, whole(layout));
          CHECK(decoded.status == 0);
          CHECK(ferry_test::check_bytes_equal(decoded.output, tensor, "the decoded tensor"));

          const std::vector<std::uint32_t> rows = {
              static_cast<std::uint32_t>(layout.rows - 1), 1, 0xfffffff0u, 0,
              static_cast<std::uint32_t>(layout.rows - 1)};
          IbpDecodeParams params = whole(layout);
          params.rows = IbpDecodeRows::gather;
          params.row_count = rows.size();
          const Decoded slots = run_decode(t, stream, params, rows);
          CHECK(slots.status == ferry::kIbpStatusIndexOutOfRange);
          CHECK(ferry_test::check_bytes_equal(slots.output, gathered(tensor, layout, rows),
                                              "the gathered rows"));

          // Row 2, if it is a bitmap row: a bitmap word near its middle flipped, so that the
          // length check fails (or not) only by the sums of several segments; every backend
          // decodes it as the CPU reference does, and the other rows are right.
          const std::uint64_t row = 2;
          const std::uint32_t entry =
              load<std::uint32_t>(stream, layout.row_table_offset + 4 * row);
          if ((entry & 3u) != 0) continue;
          std::vector<std::byte> broken = stream;
          const std::uint64_t middle = row_start(stream, layout, shape.group_rows, row) +
                                       4 * ((shape.row_elements + 31) / 32 / 2);
          store(broken, middle, load<std::uint32_t>(broken, middle) ^ 0x00ff00f0u);
          restamp(broken);
          const Decoded got = run_decode(t, broken, whole(layout));
          const Decoded expected = run_decode_on_cpu(reference, broken, whole(layout));
          CHECK(got.status == expected.status);
          CHECK(ferry_test::check_bytes_equal(got.output, expected.output, "the CPU's decode"));
          const std::uint64_t row_bytes = shape.row_elements * size;
          CHECK(std::equal(tensor.begin(), tensor.begin() + row * row_bytes, got.output.begin()));
          CHECK(std::equal(tensor.begin() + (row + 1) * row_bytes, tensor.end(),
                           got.output.begin() + (row + 1) * row_bytes));
        }
      }
    }
  });
}

TEST_CASE("ibp_decode: bad parameters are clear errors and record nothing") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    const Shape shape{10 * 7, 7, 4};
    const std::vector<std::byte> tensor = make_tensor(t.rng, Family::small_ints, 4, shape.elements);
    const std::vector<std::byte> stream = encode(tensor, 4, shape);
    const ibp::Layout layout = layout_of(stream);
    const Buffer in = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, stream));
    const Buffer out = REQUIRE_VALUE(t.device.create_buffer(1024));
    const Buffer indices = REQUIRE_VALUE(t.device.create_buffer(64));
    const IbpDecodeBuffers good{in, 0, indices, 0, out, 4, out, 512};
    {
      CommandList commands;
      CHECK_OK(ferry::ibp_decode(commands, good, whole(layout)));  // the baseline is accepted
    }
    auto check = [&](const IbpDecodeBuffers& b, const IbpDecodeParams& p, ErrorCode code,
                     const char* what, const char* mentions = nullptr) {
      INFO(std::string(what));
      CommandList commands;
      const ferry::Status status = ferry::ibp_decode(commands, b, p);
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK(!status.message().empty());
      if (mentions != nullptr) {
        CHECK_MESSAGE(status.message().find(mentions) != std::string::npos, status.message());
      }
      CHECK(commands.empty());
    };
    IbpDecodeParams p = whole(layout);
    p.layout.masks_offset += 8;
    check(good, p, ErrorCode::invalid_argument, "a moved masks_offset", "masks_offset");
    p = whole(layout);
    p.layout.element_size = 3;
    check(good, p, ErrorCode::invalid_argument, "element_size 3");
    p = whole(layout);
    p.layout.stream_bytes -= 4;
    check(good, p, ErrorCode::invalid_argument, "a short stream_bytes", "stream_bytes");
    p = whole(layout);
    p.layout.rows += 1;
    check(good, p, ErrorCode::invalid_argument, "rows beyond the elements");
    p = whole(layout);
    p.rows = IbpDecodeRows::range;
    p.first_row = 5;
    p.row_count = 6;
    check(good, p, ErrorCode::out_of_range, "a range past the rows", "first_row");
    p.row_count = 0;
    check(good, p, ErrorCode::out_of_range, "an empty range");
    p = whole(layout);
    p.rows = IbpDecodeRows::gather;
    p.row_count = 0;
    check(good, p, ErrorCode::invalid_argument, "no gather indices", "row_count");
    p.row_count = 17;
    check(good, p, ErrorCode::out_of_range, "indices past their buffer", "indices");
    p = whole(layout);
    p.rows = static_cast<IbpDecodeRows>(7);
    check(good, p, ErrorCode::invalid_argument, "an unknown rows", "rows");

    IbpDecodeBuffers b = good;
    b.stream_offset = 4;
    check(b, whole(layout), ErrorCode::out_of_range, "the stream past its buffer");
    const Buffer roomy = REQUIRE_VALUE(t.device.create_buffer(stream.size() + 64));
    b.stream = roomy;
    check(b, whole(layout), ErrorCode::invalid_argument, "a misaligned stream", "stream_offset");
    b = good;
    b.output_offset = 2;
    check(b, whole(layout), ErrorCode::invalid_argument, "a misaligned output", "output_offset");
    b = good;
    b.status_offset = 514;
    check(b, whole(layout), ErrorCode::invalid_argument, "a misaligned status", "status_offset");
    b = good;
    b.output_offset = 1024 - 200;
    check(b, whole(layout), ErrorCode::out_of_range, "a small output", "output");
    b = good;
    b.status_offset = 8;
    check(b, whole(layout), ErrorCode::invalid_argument, "the status inside the output", "overlap");
    b = good;
    b.output = in;
    b.output_offset = 0;
    b.status = out;
    check(b, whole(layout), ErrorCode::invalid_argument, "the output over the stream", "overlap");
    {
      Buffer gone = REQUIRE_VALUE(t.device.create_buffer(1024));
      gone.release();
      b = good;
      b.output = gone;
      check(b, whole(layout), ErrorCode::released, "a released output");
    }
  });
}
