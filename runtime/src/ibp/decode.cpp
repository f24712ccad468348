// IBP readers on the host: one row's checked decode, validate, the decoders and inspect
// (docs/IBP_FORMAT.md, "What readers check").
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/crc32c.hpp"
#include "core/host_workers.hpp"
#include "core/input_file.hpp"
#include "ibp/bits.hpp"
#include "ibp/stream.hpp"

namespace ferry::ibp {
namespace detail {
namespace {

using ferry::detail::parallel_for;
using ferry::detail::pieces_of;
using ferry::detail::range_within;

constexpr std::uint64_t kRowsPerTask = 256;

enum class RowProblem : std::uint8_t {
  none,
  row_index,      // row >= rows
  outside,        // a table or the row's bytes past the stream's end
  group_offsets,  // the group's offsets out of range, disordered or misaligned
  mode,           // mode 3
  offsets,        // the row's offset or its end outside its group, or disordered
  length,         // the row's length is not what its mode, bitmap and masks imply
};

const char* describe(RowProblem problem) {
  switch (problem) {
    case RowProblem::none: return "none";
    case RowProblem::row_index: return "row index past the tensor";
    case RowProblem::outside: return "its bytes lie past the stream's end";
    case RowProblem::group_offsets: return "its group's offsets are out of range or disordered";
    case RowProblem::mode: return "its row table entry has mode 3";
    case RowProblem::offsets: return "its offset or end lies outside its group, or out of order";
    case RowProblem::length: return "its length is not what its mode, bitmap and masks imply";
  }
  return "?";
}

// A row whose place and length were checked.
struct CheckedRow {
  RowProblem problem = RowProblem::none;
  RowMode mode = RowMode::raw;
  std::uint64_t offset_in_group = 0;
  const std::byte* bytes = nullptr;  // the row's first byte
  std::uint64_t length = 0;
};

// One group's columns as the row checks and decoders use them, read once per group rather than
// per row: masks and values, each column's count of variable bits and their field_shift, and the
// variable bits of a whole row (the size of a mode 1 row of `columns` elements).
template <typename T>
struct GroupFields {
  std::uint64_t group = ~std::uint64_t{0};  // none yet
  std::uint64_t columns = 0;                // the columns read: masks and values [0, columns)
  std::uint64_t all_variable_bits = 0;      // over [0, columns)
  std::vector<T> mask;
  std::vector<T> value;
  std::vector<std::uint8_t> width;
  std::vector<std::uint8_t> shift;

  // Reads group g's first n columns from the mask block at `block` (the caller checked its
  // range), unless they are already here.
  void read(std::uint64_t g, std::uint64_t n, const std::byte* block, std::uint64_t R) {
    if (group == g && columns >= n) return;
    constexpr unsigned W = 8 * sizeof(T);
    mask.resize(n);
    value.resize(n);
    width.resize(n);
    shift.resize(n);
    std::memcpy(mask.data(), block, n * sizeof(T));
    std::memcpy(value.data(), block + R * sizeof(T), n * sizeof(T));
    all_variable_bits = 0;
    for (std::uint64_t c = 0; c < n; ++c) {
      const auto variable = static_cast<T>(~mask[c]);
      width[c] = static_cast<std::uint8_t>(W - static_cast<unsigned>(std::popcount(mask[c])));
      shift[c] = field_shift(variable);
      all_variable_bits += width[c];
    }
    group = g;
    columns = n;
  }
  // The variable bits of a mode 1 row of n <= columns elements.
  std::uint64_t variable_bits(std::uint64_t n) const {
    if (n == columns) return all_variable_bits;
    std::uint64_t bits = 0;
    for (std::uint64_t c = 0; c < n; ++c) bits += width[c];
    return bits;
  }
};

// The bits of a mode 0 row's fields: each column's width where the bitmap says it matches, W
// where not.
template <typename T>
std::uint64_t bitmap_row_bits(const std::byte* bitmap, std::uint64_t n, const GroupFields<T>& f) {
  constexpr unsigned W = 8 * sizeof(T);
  // n x W less the invariant bits of the matching elements; arithmetic, not a branch per element
  // (matches are data: a branch would mispredict).
  std::uint64_t saved = 0;
  for (std::uint64_t word = 0; word * 32 < n; ++word) {
    const std::uint32_t matches = load<std::uint32_t>(bitmap + word * 4);
    const std::uint64_t end = std::min<std::uint64_t>(32, n - word * 32);
    const std::uint8_t* width = f.width.data() + word * 32;
    for (std::uint64_t i = 0; i < end; ++i) {
      saved += (W - width[i]) & (0u - ((matches >> i) & 1u));
    }
  }
  return n * W - saved;
}

// Checks row `row`'s place and length (decode_row_checked's checks), reading its group's columns
// into `fields` when they are not there yet.
template <typename T>
CheckedRow check_row(std::span<const std::byte> stream, const Layout& l, std::uint64_t row,
                     GroupFields<T>& fields) {
  CheckedRow out;
  const auto fail = [&out](RowProblem problem) {
    out.problem = problem;
    return out;
  };
  if (row >= l.rows) return fail(RowProblem::row_index);
  const std::uint64_t size = stream.size();
  const std::byte* s = stream.data();
  const std::uint64_t g = row / l.group_rows;
  const std::uint64_t group_last = std::min(l.rows, (g + 1) * l.group_rows) - 1;
  if (!range_within(l.group_table_offset + 8 * g, 16, size)) return fail(RowProblem::outside);
  const auto begin = load<std::uint64_t>(s + l.group_table_offset + 8 * g);
  const auto end = load<std::uint64_t>(s + l.group_table_offset + 8 * g + 8);
  if (begin > end || end > l.data_bytes || begin % 4 != 0) return fail(RowProblem::group_offsets);
  const std::uint64_t group_length = end - begin;
  const std::uint64_t entries = row < group_last ? 2 : 1;
  if (!range_within(l.row_table_offset + 4 * row, 4 * entries, size)) {
    return fail(RowProblem::outside);
  }
  const auto entry = load<std::uint32_t>(s + l.row_table_offset + 4 * row);
  if ((entry & 3u) > 2) return fail(RowProblem::mode);
  out.mode = static_cast<RowMode>(entry & 3u);
  out.offset_in_group = entry & ~3u;
  const std::uint64_t row_end =
      row < group_last ? load<std::uint32_t>(s + l.row_table_offset + 4 * row + 4) & ~3u
                       : group_length;
  if (out.offset_in_group > row_end || row_end > group_length) return fail(RowProblem::offsets);
  out.length = row_end - out.offset_in_group;
  const std::uint64_t row_start = l.data_offset + begin + out.offset_in_group;
  if (!range_within(row_start, out.length, size)) return fail(RowProblem::outside);
  out.bytes = s + row_start;
  const std::uint64_t n = l.row_elements_of(row);
  const std::uint64_t mask_at = l.masks_offset + g * l.mask_block_bytes;
  if (!range_within(mask_at, (l.row_elements + n) * sizeof(T), size)) {
    return fail(RowProblem::outside);
  }
  std::uint64_t expected = 0;
  if (out.mode == RowMode::raw) {
    expected = raw_row_bytes(n, sizeof(T));
  } else {
    fields.read(g, n, s + mask_at, l.row_elements);
    if (out.mode == RowMode::all_matched) {
      expected = pieces_of(fields.variable_bits(n), 32) * 4;
    } else {
      const std::uint64_t bitmap_bytes = pieces_of(n, 32) * 4;
      if (out.length < bitmap_bytes) return fail(RowProblem::length);
      expected = bitmap_bytes + pieces_of(bitmap_row_bits(out.bytes, n, fields), 32) * 4;
    }
  }
  if (out.length != expected) return fail(RowProblem::length);
  return out;
}

// Decodes a checked row of n elements; `fields` holds its group's columns (check_row read them).
template <typename T>
void decode_checked_row(const CheckedRow& row, std::uint64_t n, const GroupFields<T>& f,
                        std::byte* out) {
  constexpr unsigned W = 8 * sizeof(T);
  if (row.mode == RowMode::raw) {
    std::memcpy(out, row.bytes, n * sizeof(T));
    return;
  }
  if (row.mode == RowMode::all_matched) {
    BitReader reader(row.bytes, row.length);
    for (std::uint64_t c = 0; c < n; ++c) {
      const std::uint64_t bits = reader.get(f.width[c]);
      store<T>(out + c * sizeof(T),
               static_cast<T>(deposit_field(bits, static_cast<T>(~f.mask[c]), f.shift[c]) |
                              f.value[c]));
    }
    return;
  }
  const std::uint64_t bitmap_bytes = pieces_of(n, 32) * 4;
  BitReader reader(row.bytes + bitmap_bytes, row.length - bitmap_bytes);
  for (std::uint64_t c = 0; c < n; ++c) {
    // Selects, not branches: whether an element matches is data.
    const std::uint32_t match = (load<std::uint32_t>(row.bytes + (c / 32) * 4) >> (c % 32)) & 1u;
    const std::uint64_t all = 0 - std::uint64_t{match};  // all ones where it matches
    const std::uint8_t shift = match != 0 ? f.shift[c] : std::uint8_t{0};
    const std::uint64_t bits = reader.get(match != 0 ? f.width[c] : W);
    const std::uint64_t variable = static_cast<T>(~f.mask[c]) | ~all;  // all bits: raw
    store<T>(out + c * sizeof(T),
             static_cast<T>(deposit_field(bits, variable, shift) | (f.value[c] & all)));
  }
}

template <typename T>
bool decode_row_typed(std::span<const std::byte> stream, const Layout& l, std::uint64_t row,
                      std::byte* out) {
  GroupFields<T> fields;
  const CheckedRow checked = check_row<T>(stream, l, row, fields);
  if (checked.problem != RowProblem::none) return false;
  decode_checked_row<T>(checked, l.row_elements_of(row), fields, out);
  return true;
}

// Calls f.template operator()<T>() with T the stream's element type.
template <typename F>
decltype(auto) with_element_type(const Layout& l, F&& f) {
  switch (l.element_size) {
    case 1: return f.template operator()<std::uint8_t>();
    case 2: return f.template operator()<std::uint16_t>();
    case 4: return f.template operator()<std::uint32_t>();
    default: return f.template operator()<std::uint64_t>();
  }
}

RowProblem row_problem(std::span<const std::byte> stream, const Layout& l, std::uint64_t row) {
  return with_element_type(l, [&]<typename T>() {
    GroupFields<T> fields;
    return check_row<T>(stream, l, row, fields).problem;
  });
}

Status corrupt(const std::string& call, const std::string& what) {
  return Status(ErrorCode::data_corrupt, call + ": " + what);
}

// The lowest index in [0, count) for which bad(i, state) holds, or count; over `threads`, each
// task with its own State (a cache of what consecutive indices share).
template <typename State, typename Bad>
std::uint64_t first_bad_with(std::uint64_t count, std::uint64_t per_task, unsigned threads,
                             Bad bad) {
  const std::uint64_t tasks = pieces_of(count, per_task);
  std::vector<std::uint64_t> found(tasks, count);
  parallel_for(tasks, threads, [&](std::size_t task) {
    State state;
    const std::uint64_t end = std::min(count, (task + 1) * per_task);
    for (std::uint64_t i = task * per_task; i < end; ++i) {
      if (bad(i, state)) {
        found[task] = i;
        return;
      }
    }
  });
  return tasks == 0 ? count : *std::min_element(found.begin(), found.end());
}
// The same without state: bad(i).
template <typename Bad>
std::uint64_t first_bad(std::uint64_t count, std::uint64_t per_task, unsigned threads, Bad bad) {
  struct None {};
  return first_bad_with<None>(count, per_task, threads,
                              [&bad](std::uint64_t i, None&) { return bad(i); });
}

Status validate_stream(std::span<const std::byte> stream, unsigned threads, Layout* layout_out) {
  const std::string call = "ibp::validate";
  FERRY_ASSIGN_OR_RETURN(const Layout l, read_layout(stream));
  if (stream.size() != l.stream_bytes) {
    return corrupt(call, "the stream has " + std::to_string(stream.size()) +
                             " bytes, its header says " + std::to_string(l.stream_bytes) +
                             (stream.size() < l.stream_bytes ? " (truncated)" : " (extended)"));
  }
  const std::byte* s = stream.data();
  const unsigned workers = thread_count(threads);
  if (ferry::detail::crc32c(stream.subspan(l.checksum_offset)) != l.checksums_crc) {
    return corrupt(call, "the checksum table's CRC does not match the header's");
  }
  const std::uint64_t payload = l.checksum_offset - kHeaderBytes;
  const std::uint64_t bad_chunk = first_bad(l.checksum_count, 16, workers, [&](std::uint64_t c) {
    const std::uint64_t begin = kHeaderBytes + c * kChecksumChunkBytes;
    const std::uint64_t bytes = std::min(kChecksumChunkBytes, payload - c * kChecksumChunkBytes);
    return ferry::detail::crc32c(stream.subspan(begin, bytes)) !=
           load<std::uint32_t>(s + l.checksum_offset + 4 * c);
  });
  if (bad_chunk < l.checksum_count) {
    return corrupt(call, "CRC mismatch in payload chunk " + std::to_string(bad_chunk) +
                             " (stream bytes from " +
                             std::to_string(kHeaderBytes + bad_chunk * kChecksumChunkBytes) + ")");
  }
  if (load<std::uint64_t>(s + l.group_table_offset) != 0) {
    return corrupt(call, "group table entry 0 is not 0");
  }
  if (load<std::uint64_t>(s + l.group_table_offset + 8 * l.group_count) != l.data_bytes) {
    return corrupt(call, "the group table's last entry is not data_bytes");
  }
  for (std::uint64_t g = 0; g < l.group_count; ++g) {
    if (load<std::uint64_t>(s + l.group_table_offset + 8 * g) >
        load<std::uint64_t>(s + l.group_table_offset + 8 * g + 8)) {
      return corrupt(call, "group table entries " + std::to_string(g) + " and " +
                               std::to_string(g + 1) + " are out of order");
    }
  }
  const std::uint64_t es = l.element_size;
  const std::uint64_t bad_group = first_bad(l.group_count, 1, workers, [&](std::uint64_t g) {
    const std::byte* block = s + l.masks_offset + g * l.mask_block_bytes;
    for (std::uint64_t c = 0; c < l.row_elements; ++c) {
      std::uint64_t mask = 0, value = 0;
      std::memcpy(&mask, block + c * es, es);
      std::memcpy(&value, block + (l.row_elements + c) * es, es);
      if ((value & ~mask) != 0) return true;
    }
    return false;
  });
  if (bad_group < l.group_count) {
    return corrupt(call, "group " + std::to_string(bad_group) +
                             " has an invariant value with bits outside its mask");
  }
  const std::uint64_t bad_row = with_element_type(l, [&]<typename T>() {
    return first_bad_with<GroupFields<T>>(
        l.rows, kRowsPerTask, workers, [&](std::uint64_t r, GroupFields<T>& fields) {
          const CheckedRow row = check_row<T>(stream, l, r, fields);
          // The first row of a group starts it.
          return row.problem != RowProblem::none ||
                 (r % l.group_rows == 0 && row.offset_in_group != 0);
        });
  });
  if (bad_row < l.rows) {
    const RowProblem problem = row_problem(stream, l, bad_row);
    return corrupt(call, "row " + std::to_string(bad_row) + " (group " +
                             std::to_string(bad_row / l.group_rows) + "): " +
                             (problem == RowProblem::none ? "the first row of its group does not "
                                                            "start at offset 0"
                                                          : describe(problem)));
  }
  if (layout_out != nullptr) *layout_out = l;
  return ok_status();
}

// The stream's layout, validated unless the caller just did.
Result<Layout> reader_layout(std::span<const std::byte> stream, bool validated, unsigned threads,
                             const char* call) {
  if (validated) {
    FERRY_ASSIGN_OR_RETURN(Layout l, read_layout(stream));
    if (stream.size() < l.stream_bytes) {
      return corrupt(call, "the stream has " + std::to_string(stream.size()) +
                               " bytes, its header says " + std::to_string(l.stream_bytes) +
                               " (truncated)");
    }
    return l;
  }
  Layout l;
  FERRY_RETURN_IF_ERROR(validate_stream(stream, threads, &l).with_context(call));
  return l;
}

// Decodes row row_of(i) to out_at(i) for i in [0, count), over `threads`.
template <typename RowOf, typename OutAt>
Status decode_list(std::span<const std::byte> stream, const Layout& l, std::uint64_t count,
                   unsigned threads, const char* call, RowOf row_of, OutAt out_at) {
  const std::uint64_t bad = with_element_type(l, [&]<typename T>() {
    return first_bad_with<GroupFields<T>>(
        count, kRowsPerTask, threads, [&](std::uint64_t i, GroupFields<T>& fields) {
          const std::uint64_t row = row_of(i);
          const CheckedRow checked = check_row<T>(stream, l, row, fields);
          if (checked.problem != RowProblem::none) return true;
          decode_checked_row<T>(checked, l.row_elements_of(row), fields, out_at(i));
          return false;
        });
  });
  if (bad < count) {
    const std::uint64_t row = row_of(bad);
    return corrupt(call, "row " + std::to_string(row) + ": " +
                             describe(row_problem(stream, l, row)));
  }
  return ok_status();
}

}  // namespace

bool decode_row_checked(std::span<const std::byte> stream, const Layout& layout, std::uint64_t row,
                        std::byte* out) {
  switch (layout.element_size) {
    case 1: return decode_row_typed<std::uint8_t>(stream, layout, row, out);
    case 2: return decode_row_typed<std::uint16_t>(stream, layout, row, out);
    case 4: return decode_row_typed<std::uint32_t>(stream, layout, row, out);
    case 8: return decode_row_typed<std::uint64_t>(stream, layout, row, out);
    default: return false;
  }
}

}  // namespace detail

Status validate(std::span<const std::byte> stream, unsigned threads) {
  return detail::validate_stream(stream, threads, nullptr);
}

Result<Layout> validate_for_decode(std::span<const std::byte> stream, unsigned threads) {
  Layout layout;
  FERRY_RETURN_IF_ERROR(detail::validate_stream(stream, threads, &layout));
  FERRY_RETURN_IF_ERROR(ferry::detail::check_host_allocation(
      layout.raw_bytes(), "ibp::validate_for_decode: the stream's tensor (" +
                              std::to_string(layout.elements) + " elements of " +
                              std::to_string(layout.element_size) + " bytes)"));
  return layout;
}

Status decode(std::span<const std::byte> stream, std::span<std::byte> out, bool validated,
              unsigned threads) {
  const char* call = "ibp::decode";
  FERRY_ASSIGN_OR_RETURN(const Layout l, detail::reader_layout(stream, validated, threads, call));
  if (out.size() != l.raw_bytes()) {
    return Status(ErrorCode::out_of_range,
                  std::string(call) + ": out has " + std::to_string(out.size()) +
                      " bytes, the tensor " + std::to_string(l.raw_bytes()));
  }
  const std::uint64_t row_bytes = l.row_elements * l.element_size;
  return detail::decode_list(
      stream, l, l.rows, detail::thread_count(threads), call,
      [](std::uint64_t i) { return i; },
      [&](std::uint64_t i) { return out.data() + i * row_bytes; });
}

Status decode_rows(std::span<const std::byte> stream, std::uint64_t first_row,
                   std::uint64_t row_count, std::span<std::byte> out, bool validated) {
  const char* call = "ibp::decode_rows";
  FERRY_ASSIGN_OR_RETURN(const Layout l, detail::reader_layout(stream, validated, 0, call));
  if (first_row > l.rows || row_count > l.rows - first_row) {
    return Status(ErrorCode::out_of_range,
                  std::string(call) + ": rows [" + std::to_string(first_row) + ", +" +
                      std::to_string(row_count) + ") past the tensor's " +
                      std::to_string(l.rows) + " rows");
  }
  const std::uint64_t first_element = first_row * l.row_elements;
  const std::uint64_t end_element =
      std::min(l.elements, (first_row + row_count) * l.row_elements);
  const std::uint64_t bytes = (end_element - first_element) * l.element_size;
  if (out.size() != bytes) {
    return Status(ErrorCode::out_of_range, std::string(call) + ": out has " +
                                               std::to_string(out.size()) + " bytes, the rows " +
                                               std::to_string(bytes));
  }
  const std::uint64_t row_bytes = l.row_elements * l.element_size;
  return detail::decode_list(
      stream, l, row_count, detail::thread_count(0), call,
      [first_row](std::uint64_t i) { return first_row + i; }, [&](std::uint64_t i) { return out.data() + i * row_bytes; });
}

Status decode_gather(std::span<const std::byte> stream, std::span<const std::uint32_t> rows,
                     std::span<std::byte> out, bool validated) {
  const char* call = "ibp::decode_gather";
  FERRY_ASSIGN_OR_RETURN(const Layout l, detail::reader_layout(stream, validated, 0, call));
  const std::uint64_t slot = l.row_elements * l.element_size;
  const auto bytes = ferry::detail::checked_mul(rows.size(), slot);
  if (!bytes || out.size() != *bytes) {
    return Status(ErrorCode::out_of_range,
                  std::string(call) + ": out has " + std::to_string(out.size()) + " bytes, not " +
                      std::to_string(rows.size()) + " slots of " + std::to_string(slot));
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= l.rows) {
      return Status(ErrorCode::out_of_range, std::string(call) + ": rows[" + std::to_string(i) +
                                                 "] = " + std::to_string(rows[i]) +
                                                 " past the tensor's " + std::to_string(l.rows) +
                                                 " rows");
    }
  }
  FERRY_RETURN_IF_ERROR(detail::decode_list(
      stream, l, rows.size(), detail::thread_count(0), call,
      [rows](std::uint64_t i) { return std::uint64_t{rows[i]}; }, [&](std::uint64_t i) { return out.data() + i * slot; }));
  // The short last row's slots end with zeros.
  const std::uint64_t last_bytes = l.row_elements_of(l.rows - 1) * l.element_size;
  if (last_bytes < slot) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] == l.rows - 1) std::memset(out.data() + i * slot + last_bytes, 0, slot - last_bytes);
    }
  }
  return ok_status();
}

Result<StreamStats> inspect(std::span<const std::byte> stream) {
  const char* call = "ibp::inspect";
  StreamStats stats;
  FERRY_ASSIGN_OR_RETURN(stats.layout, detail::reader_layout(stream, false, 0, call));
  const Layout& l = stats.layout;
  const std::byte* s = stream.data();
  stats.groups.resize(l.group_count);
  for (std::uint64_t g = 0; g < l.group_count; ++g) {
    GroupStats& group = stats.groups[g];
    group.first_row = g * l.group_rows;
    group.rows = std::min(l.rows, group.first_row + l.group_rows) - group.first_row;
    group.data_bytes = detail::load<std::uint64_t>(s + l.group_table_offset + 8 * g + 8) -
                       detail::load<std::uint64_t>(s + l.group_table_offset + 8 * g);
    const std::uint64_t end_element =
        std::min(l.elements, (group.first_row + group.rows) * l.row_elements);
    group.raw_bytes = (end_element - group.first_row * l.row_elements) * l.element_size;
    const std::byte* block = s + l.masks_offset + g * l.mask_block_bytes;
    for (std::uint64_t c = 0; c < l.row_elements; ++c) {
      std::uint64_t mask = 0;
      std::memcpy(&mask, block + c * l.element_size, l.element_size);
      group.invariant_bits += static_cast<std::uint64_t>(std::popcount(mask));
    }
    for (std::uint64_t r = group.first_row; r < group.first_row + group.rows; ++r) {
      ++group.rows_by_mode[detail::load<std::uint32_t>(s + l.row_table_offset + 4 * r) & 3u];
    }
  }
  return stats;
}

}  // namespace ferry::ibp
