#include "vector_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "core/checked.hpp"
#include "core/input_file.hpp"

namespace ferry::vector_files {

// Every format here is little-endian; the data is used as it lies in the file.
static_assert(std::endian::native == std::endian::little, "vector files assume a little-endian host");

namespace {

namespace fs = std::filesystem;
using detail::checked_add;
using detail::checked_mul;

constexpr std::uint64_t kVecsChunkBytes = 4ull << 20;   // streamed .*vecs reads
constexpr std::uint64_t kNpyMaxHeaderBytes = 1ull << 20;  // numpy itself refuses far less
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr std::uint64_t kNpyMagicBytes = 6;
constexpr std::uint64_t kNpyAlign = 64;  // numpy.save pads the header to this
constexpr std::uint64_t kNpyGrowthDigits = 21;  // numpy.save's spare room for a growing shape[0]

std::string str(std::uint64_t value) { return std::to_string(value); }

// A file's content breaks its format (truncated, a bad magic or header, rows that disagree):
// data_corrupt, as every reader of files says (core/input_file.hpp).
Status bad_file(const fs::path& path, const std::string& what) { return detail::corrupt(path, what); }

// A well-formed file holding what these readers do not take (a dtype, an order, a shape).
Status unsupported(const fs::path& path, const std::string& what) {
  return detail::file_status(path, ErrorCode::invalid_argument, what);
}

// The system refused (open, read, write): its reason, from errno.
Status system_error(const fs::path& path, const std::string& what, int error) {
  return Status(ErrorCode::failed_precondition,
                path.string() + ": " + what + ": " + std::generic_category().message(error));
}

bool is_vecs(VectorFormat format) { return format != VectorFormat::npy; }

// The element a .*vecs format holds.
VectorElement vecs_element(VectorFormat format) {
  switch (format) {
    case VectorFormat::bvecs: return VectorElement::uint8;
    case VectorFormat::ivecs: return VectorElement::int32;
    default: return VectorElement::float32;
  }
}

// `bytes` of uninitialized heap memory (shared, so that a VectorMatrix can hold it), or
// out_of_memory.
Result<std::shared_ptr<std::byte[]>> allocate(const fs::path& path, std::uint64_t bytes) {
  FERRY_RETURN_IF_ERROR(detail::check_host_allocation(bytes, path.string() + ": the data"));
  std::byte* memory = new (std::nothrow) std::byte[std::max<std::uint64_t>(bytes, 1)];
  if (memory == nullptr) {
    return Status(ErrorCode::out_of_memory,
                  path.string() + ": cannot allocate " + str(bytes) + " bytes for the data");
  }
  return std::shared_ptr<std::byte[]>(memory);
}

std::string hex_bytes(std::span<const std::byte> bytes) {
  std::string text;
  for (const std::byte b : bytes) {
    char digits[4];
    std::snprintf(digits, sizeof digits, "%02x", std::to_integer<unsigned>(b));
    if (!text.empty()) text += ' ';
    text += digits;
  }
  return text;
}

std::uint32_t load_le32(const std::byte* p) {
  std::uint32_t value = 0;
  std::memcpy(&value, p, 4);
  return value;
}

// What a reader found: read_vectors() makes the VectorMatrix of it.
struct Loaded {
  VectorElement element = VectorElement::float32;
  std::uint64_t rows = 0;
  std::uint64_t dims = 0;
  std::uint8_t ndim = 2;
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> storage;
};

// --- .fvecs / .bvecs / .ivecs ------------------------------------------------------------------

// Reads the records through a buffer of whole records (about 4 MiB) and copies each row, without
// its dimension, into one allocation of rows x dims elements.
Result<Loaded> read_vecs(const fs::path& path, VectorFormat format, const detail::InputFile& file) {
  const std::string name(to_string(format));
  const std::uint64_t size = file.size();
  if (size == 0) return bad_file(path, "empty: a ." + name + " file holds at least one row");
  if (size < 4) {
    return bad_file(path, "truncated: row 0 at byte 0 needs a 4-byte dimension, the file ends "
                          "after " + str(size) + " bytes");
  }
  std::byte first[4];
  FERRY_RETURN_IF_ERROR(file.read_at(0, first));
  const auto dims = static_cast<std::int32_t>(load_le32(first));
  if (dims <= 0) {
    return bad_file(path, "row 0: dimension " + std::to_string(dims) + " (must be >= 1)");
  }
  const std::uint32_t element = element_bytes(vecs_element(format));
  const std::uint64_t row_bytes = std::uint64_t(dims) * element;  // < 2^33: no overflow
  const std::uint64_t record = 4 + row_bytes;
  const std::uint64_t whole_rows = size / record;

  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<std::byte[]> data, allocate(path, whole_rows * row_bytes));
  const std::uint64_t chunk_rows = std::max<std::uint64_t>(1, kVecsChunkBytes / record);
  // Whole records only (the last chunk may end in a partial one, which is an error).
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<std::byte[]> chunk,
                         allocate(path, std::min(chunk_rows * record, size)));

  // Row r's record is at byte r * record as long as every earlier row has `dims` elements.
  for (std::uint64_t start = 0; start * record < size; start += chunk_rows) {
    const std::uint64_t offset = start * record;
    const std::uint64_t length = std::min(chunk_rows * record, size - offset);
    FERRY_RETURN_IF_ERROR(file.read_at(offset, {chunk.get(), length}));
    for (std::uint64_t at = 0; at < length; at += record) {
      const std::uint64_t row = start + at / record;
      const std::uint64_t row_offset = offset + at;
      const std::uint64_t left = length - at;
      if (left < 4) {
        return bad_file(path, "truncated: row " + str(row) + " at byte " + str(row_offset) +
                                  " needs a 4-byte dimension, the file ends " + str(left) +
                                  " bytes into it");
      }
      const auto row_dims = static_cast<std::int32_t>(load_le32(chunk.get() + at));
      if (row_dims != dims) {
        return bad_file(path, "row " + str(row) + " (at byte " + str(row_offset) +
                                  ") has dimension " + std::to_string(row_dims) + ", row 0 has " +
                                  std::to_string(dims));
      }
      if (left < record) {
        return bad_file(path, "truncated: row " + str(row) + " at byte " + str(row_offset) +
                                  " needs " + str(record) + " bytes (a 4-byte dimension and " +
                                  std::to_string(dims) + " x " + str(element) +
                                  "-byte elements), the file ends " + str(left) +
                                  " bytes into it");
      }
      std::memcpy(data.get() + row * row_bytes, chunk.get() + at + 4, row_bytes);
    }
  }
  Loaded loaded{vecs_element(format), whole_rows, static_cast<std::uint64_t>(dims), 2,
                {data.get(), whole_rows * row_bytes}, nullptr};
  loaded.storage = std::move(data);
  return loaded;
}

// --- .npy -----------------------------------------------------------------------------------

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a newline. Parses exactly those three keys (numpy writes nothing else)
// in any order, with either quote, optional trailing commas and Python 2's long suffix (3L).
class NpyHeaderParser {
 public:
  explicit NpyHeaderParser(std::string_view text) : text_(text) {}

  // Whether parse()'s error is a well-formed header this reader does not take.
  bool unsupported() const { return unsupported_; }

  // The header, or what is wrong with it.
  std::variant<NpyHeader, std::string> parse() {
    NpyHeader header;
    bool seen[3] = {false, false, false};
    space();
    if (!take('{')) return error("expected '{'");
    for (;;) {
      space();
      if (take('}')) break;
      std::string key;
      if (!quoted(key)) return error("expected a quoted key or '}'");
      space();
      if (!take(':')) return error("expected ':' after '" + key + "'");
      space();
      int slot = 0;
      if (key == "descr") {
        if (peek() == '[') {
          unsupported_ = true;
          return std::string("descr is a list (a structured dtype); only plain dtypes are read");
        }
        if (!quoted(header.descr)) return error("expected a quoted dtype after 'descr'");
      } else if (key == "fortran_order") {
        slot = 1;
        if (word("True")) {
          header.fortran_order = true;
        } else if (word("False")) {
          header.fortran_order = false;
        } else {
          return error("expected True or False after 'fortran_order'");
        }
      } else if (key == "shape") {
        slot = 2;
        if (!tuple(header.shape)) return error("expected a tuple of integers after 'shape'");
      } else {
        return "unexpected key '" + key + "' (an .npy header holds descr, fortran_order, shape)";
      }
      if (seen[slot]) return "key '" + key + "' appears twice";
      seen[slot] = true;
      space();
      if (take(',')) continue;
      if (!take('}')) return error("expected ',' or '}'");
      break;
    }
    space();
    if (at_ != text_.size()) return error("unexpected text after the closing '}'");
    if (!seen[0] || !seen[1] || !seen[2]) {
      return std::string("missing key '") + (!seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape") + "'";
    }
    return header;
  }

 private:
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  bool take(char c) {
    if (peek() != c) return false;
    ++at_;
    return true;
  }
  void space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' ||
                                  text_[at_] == '\t' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool word(std::string_view w) {
    if (text_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }
  // A '...' or "..." string without escapes.
  bool quoted(std::string& out) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') return false;
    const std::size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) return false;
    out = std::string(text_.substr(at_ + 1, end - at_ - 1));
    if (out.find('\\') != std::string::npos) return false;
    at_ = end + 1;
    return true;
  }
  bool integer(std::uint64_t& value) {
    const std::size_t begin = at_;
    value = 0;
    while (std::isdigit(static_cast<unsigned char>(peek())) != 0) {
      const auto digit = static_cast<std::uint64_t>(peek() - '0');
      const auto scaled = checked_mul(value, 10);
      const auto next = scaled ? checked_add(*scaled, digit) : std::nullopt;
      if (!next) return false;
      value = *next;
      ++at_;
    }
    if (at_ == begin) return false;
    if (!take('L')) take('l');
    return true;
  }
  bool tuple(std::vector<std::uint64_t>& out) {
    if (!take('(')) return false;
    for (;;) {
      space();
      if (take(')')) return true;
      std::uint64_t value = 0;
      if (!integer(value)) return false;
      out.push_back(value);
      space();
      if (take(',')) continue;
      return take(')');
    }
  }
  std::string error(const std::string& what) const {
    return what + " at character " + str(at_);
  }

  std::string_view text_;
  std::size_t at_ = 0;
  bool unsupported_ = false;  // the header is well formed but holds what is not read
};

// The element an .npy dtype string names, or what is wrong with it.
// The dtype strings of the elements past the vector formats' five (read_npy_array).
struct NpyDtype {
  const char* descr;
  VectorElement element;
};
constexpr NpyDtype kArrayDtypes[] = {
    {"|i1", VectorElement::int8},    {"<u2", VectorElement::uint16},
    {"<i2", VectorElement::int16},   {"<V2", VectorElement::bfloat16},
    {"<i8", VectorElement::int64},   {"<u8", VectorElement::uint64},
    {"<f8", VectorElement::float64}, {"|b1", VectorElement::boolean},
};

std::variant<VectorElement, std::string> npy_element(const std::string& descr, bool any) {
  if (any) {
    for (const NpyDtype& d : kArrayDtypes) {
      if (descr == d.descr) return d.element;
    }
    if (descr == "|V2") return VectorElement::bfloat16;
  }
  const std::string supported =
      any ? "; read are '|u1', '|i1', '<u2', '<i2', '<f2', '<V2' (bfloat16), '<u4', '<i4', "
            "'<f4', '<u8', '<i8', '<f8' and '|b1'"
          : "; read are float32 '<f4', float16 '<f2', uint8 '|u1', int32 '<i4' and uint32 '<u4'";
  if (descr.size() == 3 && descr[1] == 'u' && descr[2] == '1' &&
      (descr[0] == '|' || descr[0] == '<' || descr[0] == '>' || descr[0] == '=')) {
    return VectorElement::uint8;  // one byte: the byte order says nothing
  }
  if (descr == "<f4") return VectorElement::float32;
  if (descr == "<f2") return VectorElement::float16;
  if (descr == "<i4") return VectorElement::int32;
  if (descr == "<u4") return VectorElement::uint32;
  if (descr.size() == 3 && descr[0] == '>') {
    return "dtype '" + descr + "' is big-endian (numpy: a.astype('<" + descr.substr(1) + "'))" +
           supported;
  }
  return "dtype '" + descr + "' is not supported" + supported;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + str(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

// `any`: every dtype of read_npy_array and 1-D shapes too.
Result<Loaded> read_npy(const fs::path& path, const detail::InputFile& file, bool any = false) {
  const std::uint64_t size = file.size();
  std::byte prefix[12] = {};
  FERRY_RETURN_IF_ERROR(file.read_at(0, {prefix, std::min<std::uint64_t>(size, 12)}));
  if (size < 10 || std::memcmp(prefix, kNpyMagic, kNpyMagicBytes) != 0) {
    return bad_file(path, "not an .npy file: it starts with " +
                              hex_bytes({prefix, std::min<std::uint64_t>(size, 8)}) +
                              ", not the magic 93 4e 55 4d 50 59 (\\x93NUMPY)");
  }
  const auto major = std::to_integer<unsigned>(prefix[6]);
  const auto minor = std::to_integer<unsigned>(prefix[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return bad_file(path, ".npy version " + std::to_string(major) + "." + std::to_string(minor) +
                              " is not supported (1.0, 2.0 and 3.0 are)");
  }
  // 1.0: a 2-byte header length; 2.0 and 3.0: 4 bytes (3.0 only allows UTF-8 in the header).
  const std::uint64_t length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t header_offset = kNpyMagicBytes + 2 + length_bytes;
  if (size < header_offset) {
    return bad_file(path, "truncated: the file ends after " + str(size) + " bytes, inside the "
                          ".npy header length");
  }
  const std::uint64_t header_bytes = major == 1
      ? std::to_integer<std::uint64_t>(prefix[8]) | std::to_integer<std::uint64_t>(prefix[9]) << 8
      : load_le32(prefix + 8);
  if (header_bytes > kNpyMaxHeaderBytes) {
    return bad_file(path, "the .npy header says it is " + str(header_bytes) +
                              " bytes long (more than " + str(kNpyMaxHeaderBytes) + ")");
  }
  const std::uint64_t data_offset = header_offset + header_bytes;
  if (size < data_offset) {
    return bad_file(path, "truncated: the .npy header of " + str(header_bytes) + " bytes at byte " +
                              str(header_offset) + " ends at byte " + str(data_offset) +
                              ", the file after " + str(size));
  }
  std::string text(header_bytes, '\0');
  FERRY_RETURN_IF_ERROR(file.read_at(
      header_offset, {reinterpret_cast<std::byte*>(text.data()), text.size()}));
  NpyHeaderParser parser(text);
  auto parsed = parser.parse();
  if (auto* what = std::get_if<std::string>(&parsed)) {
    std::string shown = text.substr(0, 120);
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    // A hostile header must not reach a terminal as control characters.
    for (char& c : shown) {
      if (std::isprint(static_cast<unsigned char>(c)) == 0) c = '?';
    }
    if (parser.unsupported()) return unsupported(path, *what + ": " + shown);
    return bad_file(path, "bad .npy header (" + *what + "): " + shown);
  }
  const NpyHeader& header = std::get<NpyHeader>(parsed);
  auto element = npy_element(header.descr, any);
  if (auto* what = std::get_if<std::string>(&element)) return unsupported(path, *what);
  if (header.fortran_order) {
    return unsupported(path, "the array is in Fortran (column-major) order; rows must be "
                          "contiguous (numpy: np.ascontiguousarray(a))");
  }
  const bool one_d = any && header.shape.size() == 1;
  if (header.shape.size() != 2 && !one_d) {
    return unsupported(path, "shape " + shape_text(header.shape) + " is " +
                              str(header.shape.size()) + "-D; a 2-D array (rows, dims) is read" +
                              (any ? " or a 1-D one" : ""));
  }
  const std::uint64_t rows = one_d ? 1 : header.shape[0];
  const std::uint64_t dims = one_d ? header.shape[0] : header.shape[1];
  if (dims == 0) return unsupported(path, "shape " + shape_text(header.shape) + ": dimension 0");
  Loaded loaded{std::get<VectorElement>(element), rows, dims, one_d ? std::uint8_t{1} : std::uint8_t{2},
                {}, nullptr};
  const std::uint64_t element_size = element_bytes(loaded.element);
  const auto row_bytes = checked_mul(dims, element_size);
  const auto data_bytes = row_bytes ? checked_mul(*row_bytes, rows) : std::nullopt;
  const auto end = data_bytes ? checked_add(data_offset, *data_bytes) : std::nullopt;
  if (!end) {
    return bad_file(path, "shape " + shape_text(header.shape) + " of '" + header.descr +
                              "' is more than 2^64 bytes");
  }
  if (size < *end) {
    return bad_file(path, "truncated: shape " + shape_text(header.shape) + " of '" +
                              header.descr + "' needs " + str(*data_bytes) + " data bytes from byte " +
                              str(data_offset) + ", the file has " + str(size - data_offset) +
                              " (row " + str((size - data_offset) / *row_bytes) +
                              " is the first incomplete one)");
  }
  if (size > *end) {
    return bad_file(path, str(size - *end) + " bytes after the data: shape " +
                              shape_text(header.shape) + " of '" + header.descr + "' ends at byte " +
                              str(*end) + " of " + str(size));
  }
  if (*data_bytes == 0) return loaded;
  // numpy aligns the data to 64 bytes; a file that does not align it to its element is read.
  if (data_offset % element_size == 0) {
    FERRY_ASSIGN_OR_RETURN(detail::InputFile::Mapping mapped, file.map());
    loaded.bytes = mapped.bytes.subspan(data_offset, *data_bytes);
    loaded.storage = std::move(mapped.owner);
    return loaded;
  }
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<std::byte[]> data, allocate(path, *data_bytes));
  FERRY_RETURN_IF_ERROR(file.read_at(data_offset, {data.get(), *data_bytes}));
  loaded.bytes = {data.get(), *data_bytes};
  loaded.storage = std::move(data);
  return loaded;
}

// numpy.save's header for a 2-D C-order array, byte for byte (format 1.0): the dict with its
// keys sorted, room for shape[0] to grow to 21 digits, spaces to a multiple of 64 bytes
// (always at least one), a newline.
std::string npy_header(const VectorView& vectors) {
  std::string descr;
  switch (vectors.element) {
    case VectorElement::float32: descr = "<f4"; break;
    case VectorElement::float16: descr = "<f2"; break;
    case VectorElement::uint8: descr = "|u1"; break;
    case VectorElement::int32: descr = "<i4"; break;
    case VectorElement::uint32: descr = "<u4"; break;
    default:
      for (const NpyDtype& d : kArrayDtypes) {
        if (d.element == vectors.element) descr = d.descr;
      }
      break;
  }
  const std::string rows = vectors.ndim == 1 ? str(vectors.dims) : str(vectors.rows);
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + rows +
                     (vectors.ndim == 1 ? ",)" : ", " + str(vectors.dims) + ")") + ", }";
  dict.append(kNpyGrowthDigits - std::min<std::uint64_t>(rows.size(), kNpyGrowthDigits), ' ');
  const std::uint64_t unpadded = kNpyMagicBytes + 2 + 2 + dict.size() + 1;
  dict.append(kNpyAlign - unpadded % kNpyAlign, ' ');
  dict += '\n';
  const auto length = static_cast<std::uint16_t>(dict.size());
  std::string header(kNpyMagic, kNpyMagicBytes);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(length & 0xFF);
  header += static_cast<char>(length >> 8);
  return header + dict;
}

// A file being written; a regular file is removed unless commit() succeeds.
class OutputFile {
 public:
  explicit OutputFile(fs::path path) : path_(std::move(path)) {}
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_ && regular_) std::remove(path_.c_str());
  }

  Status open() {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) return system_error(path_, "cannot create", errno);
    // Only a regular file is removed after a failure (never /dev/full or a pipe).
    struct stat info {};
    regular_ = ::fstat(::fileno(file_), &info) == 0 && S_ISREG(info.st_mode);
    return Status();
  }
  Status write(const void* data, std::size_t bytes) {
    if (bytes != 0 && std::fwrite(data, 1, bytes, file_) != bytes) {
      return system_error(path_, "cannot write", errno);
    }
    return Status();
  }
  Status commit() {
    std::FILE* file = std::exchange(file_, nullptr);
    if (std::fflush(file) != 0) {
      const int error = errno;
      std::fclose(file);
      return system_error(path_, "cannot write", error);
    }
    if (std::fclose(file) != 0) return system_error(path_, "cannot write", errno);
    committed_ = true;
    return Status();
  }

 private:
  fs::path path_;
  std::FILE* file_ = nullptr;
  bool regular_ = false;
  bool committed_ = false;
};

}  // namespace

std::string_view to_string(VectorFormat format) noexcept {
  switch (format) {
    case VectorFormat::fvecs: return "fvecs";
    case VectorFormat::bvecs: return "bvecs";
    case VectorFormat::ivecs: return "ivecs";
    case VectorFormat::npy: return "npy";
  }
  return "unknown vector format";
}

std::string_view to_string(VectorElement element) noexcept {
  switch (element) {
    case VectorElement::float32: return "float32";
    case VectorElement::float16: return "float16";
    case VectorElement::uint8: return "uint8";
    case VectorElement::int32: return "int32";
    case VectorElement::uint32: return "uint32";
    case VectorElement::int8: return "int8";
    case VectorElement::uint16: return "uint16";
    case VectorElement::int16: return "int16";
    case VectorElement::bfloat16: return "bfloat16";
    case VectorElement::int64: return "int64";
    case VectorElement::uint64: return "uint64";
    case VectorElement::float64: return "float64";
    case VectorElement::boolean: return "bool";
  }
  return "unknown vector element";
}

std::uint32_t element_bytes(VectorElement element) noexcept {
  switch (element) {
    case VectorElement::float16:
    case VectorElement::uint16:
    case VectorElement::int16:
    case VectorElement::bfloat16: return 2;
    case VectorElement::uint8:
    case VectorElement::int8:
    case VectorElement::boolean: return 1;
    case VectorElement::int64:
    case VectorElement::uint64:
    case VectorElement::float64: return 8;
    default: return 4;
  }
}

Result<VectorFormat> format_of(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".fvecs") return VectorFormat::fvecs;
  if (extension == ".bvecs") return VectorFormat::bvecs;
  if (extension == ".ivecs") return VectorFormat::ivecs;
  if (extension == ".npy") return VectorFormat::npy;
  return unsupported(path, (extension.empty() ? std::string("no extension")
                                           : "unknown extension '" + path.extension().string() + "'") +
                            " (vector files are .fvecs, .bvecs, .ivecs or .npy)");
}

Result<VectorMatrix> read_vectors(const fs::path& path) {
  FERRY_ASSIGN_OR_RETURN(const VectorFormat format, format_of(path));
  return read_vectors(path, format);
}

Result<VectorMatrix> read_vectors(const fs::path& path, VectorFormat format) {
  if (static_cast<unsigned>(format) > static_cast<unsigned>(VectorFormat::npy)) {
    return Status(ErrorCode::invalid_argument, path.string() + ": unknown vector format " +
                                                   std::to_string(static_cast<unsigned>(format)));
  }
  FERRY_ASSIGN_OR_RETURN(detail::InputFile file, detail::InputFile::open(path));
  FERRY_ASSIGN_OR_RETURN(Loaded loaded, format == VectorFormat::npy
                                            ? read_npy(path, file)
                                            : read_vecs(path, format, file));
  VectorMatrix matrix;
  matrix.format_ = format;
  matrix.element_ = loaded.element;
  matrix.rows_ = loaded.rows;
  matrix.dims_ = loaded.dims;
  matrix.bytes_ = loaded.bytes;
  matrix.storage_ = std::move(loaded.storage);
  return matrix;
}

Result<FileBytes> read_file_bytes(const fs::path& path) {
  FERRY_ASSIGN_OR_RETURN(detail::InputFile file, detail::InputFile::open(path));
  FERRY_ASSIGN_OR_RETURN(std::vector<std::byte> read, file.read_all());
  auto held = std::make_shared<std::vector<std::byte>>(std::move(read));
  return FileBytes{*held, held};
}

Result<VectorMatrix> read_npy_array(const fs::path& path) {
  FERRY_ASSIGN_OR_RETURN(detail::InputFile file, detail::InputFile::open(path));
  FERRY_ASSIGN_OR_RETURN(Loaded loaded, read_npy(path, file, true));
  VectorMatrix matrix;
  matrix.format_ = VectorFormat::npy;
  matrix.element_ = loaded.element;
  matrix.rows_ = loaded.rows;
  matrix.dims_ = loaded.dims;
  matrix.ndim_ = loaded.ndim;
  matrix.bytes_ = loaded.bytes;
  matrix.storage_ = std::move(loaded.storage);
  return matrix;
}

Status write_vectors(const fs::path& path, const VectorView& vectors) {
  FERRY_ASSIGN_OR_RETURN(const VectorFormat format, format_of(path));
  return write_vectors(path, format, vectors);
}

Status write_vectors(const fs::path& path, VectorFormat format, const VectorView& vectors) {
  const auto refuse = [&path](const std::string& what) {
    return Status(ErrorCode::invalid_argument, "write_vectors " + path.string() + ": " + what);
  };
  if (static_cast<unsigned>(format) > static_cast<unsigned>(VectorFormat::npy)) {
    return refuse("unknown vector format " + std::to_string(static_cast<unsigned>(format)));
  }
  if (static_cast<unsigned>(vectors.element) > static_cast<unsigned>(VectorElement::boolean)) {
    return refuse("unknown element type " + std::to_string(static_cast<unsigned>(vectors.element)));
  }
  const std::string name(to_string(format));
  if (is_vecs(format) && vectors.element != vecs_element(format)) {
    return refuse("." + name + " holds " + std::string(to_string(vecs_element(format))) +
                  ", the vectors are " + std::string(to_string(vectors.element)));
  }
  if (vectors.dims == 0) return refuse("dims is 0 (must be >= 1)");
  if (vectors.ndim != 2 && (vectors.ndim != 1 || vectors.rows != 1 || is_vecs(format))) {
    return refuse("ndim " + str(vectors.ndim) + " (2, or 1 for one .npy row)");
  }
  if (is_vecs(format) && vectors.dims > 0x7FFFFFFF) {
    return refuse("dims " + str(vectors.dims) + " does not fit ." + name + "'s int32 dimension");
  }
  if (is_vecs(format) && vectors.rows == 0) {
    return refuse("0 rows: a ." + name + " file without rows would have no dimension");
  }
  const auto row_bytes = checked_mul(vectors.dims, element_bytes(vectors.element));
  const auto bytes = row_bytes ? checked_mul(*row_bytes, vectors.rows) : std::nullopt;
  if (!bytes || *bytes != vectors.bytes.size()) {
    return refuse(str(vectors.rows) + " x " + str(vectors.dims) + " " +
                  std::string(to_string(vectors.element)) + " elements need " +
                  (bytes ? str(*bytes) : std::string("more than 2^64")) + " bytes, the data has " +
                  str(vectors.bytes.size()));
  }

  OutputFile out(path);
  FERRY_RETURN_IF_ERROR(out.open());
  if (format == VectorFormat::npy) {
    const std::string header = npy_header(vectors);
    FERRY_RETURN_IF_ERROR(out.write(header.data(), header.size()));
    FERRY_RETURN_IF_ERROR(out.write(vectors.bytes.data(), vectors.bytes.size()));
  } else {
    const auto dims = static_cast<std::uint32_t>(vectors.dims);
    for (std::uint64_t row = 0; row < vectors.rows; ++row) {
      FERRY_RETURN_IF_ERROR(out.write(&dims, 4));
      FERRY_RETURN_IF_ERROR(out.write(vectors.bytes.data() + row * *row_bytes, *row_bytes));
    }
  }
  return out.commit();
}

}  // namespace ferry::vector_files
