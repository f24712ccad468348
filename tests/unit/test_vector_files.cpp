// Vector files (tools/vector_files.hpp): every format and element type round-trips, against files
// whose bytes the test writes by hand (the .npy headers as numpy.save writes them: header length
// 118 for every shape here, taken from numpy 2.4's output); every kind of bad file gives an
// error naming the file and what is wrong.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/printers.hpp"
#include "common/temp_dir.hpp"
#include "vector_files.hpp"

namespace {

namespace fs = std::filesystem;
using ferry::ErrorCode;
using ferry::Status;
using ferry::vector_files::VectorElement;
using ferry::vector_files::VectorFormat;
using ferry::vector_files::VectorMatrix;
using ferry::vector_files::VectorView;
using Bytes = std::vector<std::uint8_t>;

// A fresh folder, removed with everything in it at the end of the test.
struct TempDir : ferry::test::TempDir {
  TempDir() : ferry::test::TempDir("ferry-vector-files") {}
};

void put32(Bytes& bytes, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void append(Bytes& bytes, std::string_view text) { bytes.insert(bytes.end(), text.begin(), text.end()); }
void append(Bytes& bytes, const Bytes& more) { bytes.insert(bytes.end(), more.begin(), more.end()); }

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  Bytes bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return bytes;
}

// A .*vecs file: each row a little-endian int32 dimension, then the row's bytes.
Bytes vecs_file(std::uint32_t dims, std::uint32_t element, const Bytes& data) {
  Bytes file;
  const std::size_t row = std::size_t{dims} * element;
  for (std::size_t at = 0; at < data.size(); at += row) {
    put32(file, dims);
    file.insert(file.end(), data.begin() + static_cast<std::ptrdiff_t>(at),
                data.begin() + static_cast<std::ptrdiff_t>(at + row));
  }
  return file;
}

// An .npy file: magic, version, the header length (2 bytes for 1.0, else 4), `dict` padded with
// spaces and a newline to `header_bytes`, then the data.
Bytes npy_file(std::uint8_t major, const std::string& dict, std::size_t header_bytes,
               const Bytes& data) {
  REQUIRE(header_bytes >= dict.size() + 1);
  Bytes file = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  if (major == 1) {
    file.push_back(static_cast<std::uint8_t>(header_bytes));
    file.push_back(static_cast<std::uint8_t>(header_bytes >> 8));
  } else {
    put32(file, static_cast<std::uint32_t>(header_bytes));
  }
  append(file, dict);
  file.insert(file.end(), header_bytes - dict.size() - 1, ' ');
  file.push_back('\n');
  append(file, data);
  return file;
}

std::string numpy_dict(const std::string& descr, std::uint64_t rows, std::uint64_t dims) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
         ", " + std::to_string(dims) + "), }";
}

// numpy.save's bytes for a 2-D array: format 1.0, a header of 118 bytes (data at byte 128).
Bytes numpy_file(const std::string& descr, std::uint64_t rows, std::uint64_t dims,
                 const Bytes& data) {
  return npy_file(1, numpy_dict(descr, rows, dims), 118, data);
}

Bytes matrix_bytes(const VectorMatrix& matrix) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(matrix.bytes().data());
  return Bytes(p, p + matrix.bytes().size());
}

VectorView view_of(VectorElement element, std::uint64_t rows, std::uint64_t dims, const Bytes& data) {
  return {element, rows, dims, std::as_bytes(std::span(data))};
}

// The status is the error `code`, its message starts with the path and contains every part.
void check_error(const Status& status, ErrorCode code, const fs::path& path,
                 const std::vector<std::string_view>& parts) {
  CAPTURE(status);
  CHECK(status.code() == code);
  CHECK(status.message().find(path.string()) != std::string::npos);
  for (const std::string_view part : parts) {
    CAPTURE(part);
    CHECK(status.message().find(part) != std::string::npos);
  }
}

struct Shape {
  std::uint64_t rows, dims;
};
constexpr Shape kShapes[] = {{1, 1}, {7, 13}, {37, 100}, {3, 1}, {1, 257}};

}  // namespace

TEST_CASE("vector files: .fvecs, .bvecs and .ivecs round-trip byte for byte") {
  TempDir dir;
  std::mt19937_64 rng(std::random_device{}());
  struct Format {
    const char* extension;
    VectorFormat format;
    VectorElement element;
    std::uint32_t bytes;
  };
  const Format formats[] = {{".fvecs", VectorFormat::fvecs, VectorElement::float32, 4},
                            {".bvecs", VectorFormat::bvecs, VectorElement::uint8, 1},
                            {".ivecs", VectorFormat::ivecs, VectorElement::int32, 4}};
  for (const Format& f : formats) {
    for (const Shape& s : kShapes) {
      CAPTURE(f.extension);
      CAPTURE(s.rows);
      CAPTURE(s.dims);
      const Bytes data = random_bytes(rng, s.rows * s.dims * f.bytes);
      const Bytes file = vecs_file(static_cast<std::uint32_t>(s.dims), f.bytes, data);
      const fs::path by_hand = dir / (std::string("hand") + f.extension);
      write_file(by_hand, file);

      auto read = ferry::vector_files::read_vectors(by_hand);
      REQUIRE(read.ok());
      CHECK(read->format() == f.format);
      CHECK(read->element() == f.element);
      CHECK(read->rows() == s.rows);
      CHECK(read->dims() == s.dims);
      CHECK(read->row_bytes() == s.dims * f.bytes);
      CHECK(matrix_bytes(*read) == data);
      // The last row, through row().
      const auto last = read->row(s.rows - 1);
      CHECK(std::memcmp(last.data(), data.data() + (s.rows - 1) * s.dims * f.bytes, last.size()) == 0);

      const fs::path written = dir / (std::string("written") + f.extension);
      REQUIRE(ferry::vector_files::write_vectors(written, view_of(f.element, s.rows, s.dims, data)).ok());
      CHECK(read_file(written) == file);
    }
  }
}

TEST_CASE("vector files: .npy of every element type round-trips as numpy.save writes it") {
  TempDir dir;
  std::mt19937_64 rng(std::random_device{}());
  struct Type {
    const char* descr;
    VectorElement element;
    std::uint32_t bytes;
  };
  const Type types[] = {{"<f4", VectorElement::float32, 4},
                        {"<f2", VectorElement::float16, 2},
                        {"|u1", VectorElement::uint8, 1},
                        {"<i4", VectorElement::int32, 4},
                        {"<u4", VectorElement::uint32, 4}};
  for (const Type& t : types) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({0, 5});  // an .npy file may have no rows
    for (const Shape& s : shapes) {
      CAPTURE(t.descr);
      CAPTURE(s.rows);
      CAPTURE(s.dims);
      const Bytes data = random_bytes(rng, s.rows * s.dims * t.bytes);
      const Bytes file = numpy_file(t.descr, s.rows, s.dims, data);
      const fs::path by_hand = dir / "hand.npy";
      write_file(by_hand, file);

      auto read = ferry::vector_files::read_vectors(by_hand);
      REQUIRE(read.ok());
      CHECK(read->format() == VectorFormat::npy);
      CHECK(read->element() == t.element);
      CHECK(read->rows() == s.rows);
      CHECK(read->dims() == s.dims);
      CHECK(matrix_bytes(*read) == data);
      CHECK(reinterpret_cast<std::uintptr_t>(read->bytes().data()) % t.bytes == 0);

      const fs::path written = dir / "written.npy";
      REQUIRE(ferry::vector_files::write_vectors(written, view_of(t.element, s.rows, s.dims, data)).ok());
      CHECK(read_file(written) == file);
    }
  }
}

TEST_CASE("vector files: .npy versions 2.0 and 3.0, other header spellings, unaligned data") {
  TempDir dir;
  std::mt19937_64 rng(std::random_device{}());
  const Bytes data = random_bytes(rng, 5 * 3 * 4);
  const fs::path path = dir / "v.npy";
  struct Case {
    std::uint8_t major;
    std::string dict;
    std::size_t header_bytes;
  };
  const Case cases[] = {
      {2, numpy_dict("<f4", 5, 3), 116},  // 4-byte length: data still at byte 128
      {3, numpy_dict("<f4", 5, 3), 116},
      // Keys in another order, double quotes, no trailing comma, no spaces, Python 2's 5L.
      {1, "{\"shape\":(5L,3L),\"fortran_order\":False,\"descr\":\"<f4\"}", 118},
      // Data at byte 10 + 61 = 71: not a multiple of 4, so read rather than mapped.
      {1, numpy_dict("<f4", 5, 3), 61},
  };
  for (const Case& c : cases) {
    CAPTURE(c.dict);
    CAPTURE(int{c.major});
    write_file(path, npy_file(c.major, c.dict, c.header_bytes, data));
    auto read = ferry::vector_files::read_vectors(path);
    REQUIRE(read.ok());
    CHECK(read->element() == VectorElement::float32);
    CHECK(read->rows() == 5);
    CHECK(read->dims() == 3);
    CHECK(matrix_bytes(*read) == data);
    CHECK(reinterpret_cast<std::uintptr_t>(read->bytes().data()) % 4 == 0);
  }
}

TEST_CASE("vector files: a matrix outlives its file being replaced, and copies share it") {
  TempDir dir;
  std::mt19937_64 rng(std::random_device{}());
  const Bytes data = random_bytes(rng, 4 * 8 * 4);
  const fs::path path = dir / "keep.npy";
  write_file(path, numpy_file("<f4", 4, 8, data));
  auto read = ferry::vector_files::read_vectors(path);
  REQUIRE(read.ok());
  const VectorMatrix copy = *read;
  // Replaced by a new file (a new inode): the mapping still shows the old one.
  fs::remove(path);
  write_file(path, numpy_file("<f4", 1, 1, {0, 0, 0, 0}));
  CHECK(matrix_bytes(copy) == data);
  CHECK(copy.bytes().data() == read->bytes().data());
}

TEST_CASE("vector files: .*vecs streamed over several chunks, errors found past the first") {
  // 5000 rows of 1000 bytes (records of 1004 bytes: 5 MB, more than one 4 MiB chunk).
  TempDir dir;
  std::mt19937_64 rng(std::random_device{}());
  constexpr std::uint32_t kDims = 1000;
  constexpr std::uint64_t kRows = 5000;
  constexpr std::uint64_t kRecord = 4 + kDims;
  const Bytes data = random_bytes(rng, kRows * kDims);
  const Bytes file = vecs_file(kDims, 1, data);
  const fs::path path = dir / "big.bvecs";
  write_file(path, file);
  auto read = ferry::vector_files::read_vectors(path);
  REQUIRE(read.ok());
  CHECK(read->rows() == kRows);
  CHECK(matrix_bytes(*read) == data);

  SUBCASE("a row of another dimension in the second chunk") {
    Bytes bad = file;
    const std::uint64_t row = 4321;
    bad[row * kRecord] = 0xE7;  // 1000 = 0x3E8 -> 0x3E7 = 999
    write_file(path, bad);
    check_error(ferry::vector_files::read_vectors(path).status(), ErrorCode::data_corrupt, path,
                {"row 4321 (at byte " + std::to_string(row * kRecord) + ") has dimension 999, row 0 has 1000"});
  }
  SUBCASE("the last row cut short") {
    Bytes bad = file;
    bad.resize(bad.size() - 10);
    write_file(path, bad);
    check_error(ferry::vector_files::read_vectors(path).status(), ErrorCode::data_corrupt, path,
                {"truncated: row 4999 at byte " + std::to_string(4999 * kRecord), "needs 1004 bytes",
                 "ends 994 bytes into it"});
  }
}

TEST_CASE("vector files: bad .fvecs / .bvecs / .ivecs files are named with what is wrong") {
  TempDir dir;
  struct Case {
    const char* name;
    Bytes bytes;
    std::vector<std::string_view> parts;
  };
  Bytes three_rows;  // 3 rows of dimension 4 (records of 20 bytes)
  for (int r = 0; r < 3; ++r) {
    put32(three_rows, 4);
    for (int i = 0; i < 4; ++i) put32(three_rows, 0x3F800000);  // 1.0f
  }
  Bytes cut_row = three_rows;
  put32(cut_row, 4);
  put32(cut_row, 0);
  put32(cut_row, 0);
  Bytes cut_dimension = three_rows;
  cut_dimension.push_back(4);
  cut_dimension.push_back(0);
  Bytes other_dimension;
  for (std::uint32_t dims : {4u, 4u, 5u}) {
    put32(other_dimension, dims);
    for (std::uint32_t i = 0; i < dims; ++i) put32(other_dimension, 0);
  }
  Bytes negative_later = three_rows;
  put32(negative_later, 0xFFFFFFFF);
  Bytes zero;
  put32(zero, 0);
  put32(zero, 0);
  Bytes negative;
  put32(negative, 0xFFFFFFFB);  // -5
  put32(negative, 0);
  Bytes huge;  // a dimension far beyond the file
  put32(huge, 1'000'000);
  put32(huge, 0);
  const Case cases[] = {
      {"empty.fvecs", {}, {"empty: a .fvecs file holds at least one row"}},
      {"short.fvecs", {4, 0, 0}, {"truncated: row 0 at byte 0 needs a 4-byte dimension", "after 3 bytes"}},
      {"cut_row.fvecs", cut_row, {"truncated: row 3 at byte 60 needs 20 bytes", "4 x 4-byte elements",
                                  "ends 12 bytes into it"}},
      {"cut_dimension.fvecs", cut_dimension, {"truncated: row 3 at byte 60 needs a 4-byte dimension",
                                              "ends 2 bytes into it"}},
      {"other_dimension.ivecs", other_dimension, {"row 2 (at byte 40) has dimension 5, row 0 has 4"}},
      {"negative_later.fvecs", negative_later, {"row 3 (at byte 60) has dimension -1, row 0 has 4"}},
      {"zero.bvecs", zero, {"row 0: dimension 0 (must be >= 1)"}},
      {"negative.bvecs", negative, {"row 0: dimension -5 (must be >= 1)"}},
      {"huge.fvecs", huge, {"truncated: row 0 at byte 0 needs 4000004 bytes", "ends 8 bytes into it"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const fs::path path = dir / c.name;
    write_file(path, c.bytes);
    auto read = ferry::vector_files::read_vectors(path);
    REQUIRE_FALSE(read.ok());
    check_error(read.status(), ErrorCode::data_corrupt, path, c.parts);
  }
}

TEST_CASE("vector files: bad .npy files are named with what is wrong") {
  TempDir dir;
  const Bytes data12(4 * 3 * 4, 0);  // (4, 3) float32
  const std::string ok_dict = numpy_dict("<f4", 4, 3);
  Bytes bad_magic = numpy_file("<f4", 4, 3, data12);
  bad_magic[5] = 'Z';
  Bytes version4 = numpy_file("<f4", 4, 3, data12);
  version4[6] = 4;
  Bytes version11 = numpy_file("<f4", 4, 3, data12);
  version11[7] = 1;
  Bytes cut_header = numpy_file("<f4", 4, 3, {});
  cut_header.resize(100);
  Bytes cut_data = numpy_file("<f4", 4, 3, data12);
  cut_data.resize(cut_data.size() - 8);
  Bytes extra = numpy_file("<f4", 4, 3, data12);
  extra.push_back(0);
  extra.push_back(0);
  // A file that breaks the format is data_corrupt; a well-formed one holding what is not read
  // (a dtype, an order, a shape) is invalid_argument.
  constexpr ErrorCode kCorrupt = ErrorCode::data_corrupt;
  constexpr ErrorCode kUnsupported = ErrorCode::invalid_argument;
  struct Case {
    const char* name;
    Bytes bytes;
    std::vector<std::string_view> parts;
    ErrorCode code = kCorrupt;
  };
  const Case cases[] = {
      {"bad_magic.npy", bad_magic, {"not an .npy file: it starts with 93 4e 55 4d 50 5a 01 00"}},
      {"tiny.npy", {0x93, 'N', 'U'}, {"not an .npy file: it starts with 93 4e 55,"}},
      {"version4.npy", version4, {".npy version 4.0 is not supported"}},
      {"version11.npy", version11, {".npy version 1.1 is not supported"}},
      {"cut_length.npy", {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 118, 0}, {"inside the .npy header length"}},
      {"cut_header.npy", cut_header, {"truncated: the .npy header of 118 bytes at byte 10 ends at byte 128, "
                                      "the file after 100"}},
      {"not_a_dict.npy", npy_file(1, "hello", 118, {}), {"bad .npy header (expected '{' at character 0): hello"}},
      {"no_shape.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': False}", 118, {}), {"missing key 'shape'"}},
      {"unknown_key.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), 'x': 1}", 118, {}),
       {"unexpected key 'x'"}},
      {"twice.npy", npy_file(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1, 1)}", 118, {}),
       {"key 'descr' appears twice"}},
      {"float64.npy", numpy_file("<f8", 4, 3, Bytes(96)), {"dtype '<f8' is not supported", "float32 '<f4'"}, kUnsupported},
      {"int8.npy", numpy_file("|i1", 4, 3, Bytes(12)), {"dtype '|i1' is not supported"}, kUnsupported},
      {"big_endian.npy", numpy_file(">f4", 4, 3, data12), {"dtype '>f4' is big-endian", "astype('<f4')"}, kUnsupported},
      {"structured.npy", npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", 118, data12),
       {"structured dtype"}, kUnsupported},
      {"fortran.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 3), }", 118, data12),
       {"Fortran (column-major) order"}, kUnsupported},
      {"one_d.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (12,), }", 118, data12),
       {"shape (12,) is 1-D"}, kUnsupported},
      {"three_d.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 3), }", 118, data12),
       {"shape (2, 2, 3) is 3-D"}, kUnsupported},
      {"scalar.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 118, Bytes(4)),
       {"shape () is 0-D"}, kUnsupported},
      {"zero_dims.npy", numpy_file("<f4", 4, 0, {}), {"shape (4, 0): dimension 0"}, kUnsupported},
      {"overflow.npy", numpy_file("<f4", 1ull << 40, 1ull << 30, {}), {"is more than 2^64 bytes"}},
      {"not_a_number.npy", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1), }", 118, {}),
       {"expected a tuple of integers after 'shape'"}},
      {"cut_data.npy", cut_data, {"truncated: shape (4, 3) of '<f4' needs 48 data bytes from byte 128, the file has 40",
                                  "row 3 is the first incomplete one"}},
      {"extra.npy", extra, {"2 bytes after the data: shape (4, 3) of '<f4' ends at byte 176 of 178"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const fs::path path = dir / c.name;
    write_file(path, c.bytes);
    auto read = ferry::vector_files::read_vectors(path);
    REQUIRE_FALSE(read.ok());
    check_error(read.status(), c.code, path, c.parts);
  }
}

TEST_CASE("vector files: extensions, missing files, and what write_vectors refuses") {
  TempDir dir;
  const Bytes four_floats(16, 0);
  const VectorView floats = view_of(VectorElement::float32, 1, 4, four_floats);

  const fs::path text = dir / "vectors.txt";
  write_file(text, four_floats);
  check_error(ferry::vector_files::read_vectors(text).status(), ErrorCode::invalid_argument, text,
              {"unknown extension '.txt' (vector files are .fvecs, .bvecs, .ivecs or .npy)"});
  check_error(ferry::vector_files::write_vectors(text, floats), ErrorCode::invalid_argument, text,
              {"unknown extension '.txt'"});
  const fs::path bare = dir / "vectors";
  check_error(ferry::vector_files::read_vectors(bare).status(), ErrorCode::invalid_argument, bare,
              {"no extension"});
  // Upper case is the same format; an explicit format overrides the extension.
  CHECK(ferry::vector_files::format_of("BASE.FVECS").value() == VectorFormat::fvecs);
  REQUIRE(ferry::vector_files::write_vectors(text, VectorFormat::fvecs, floats).ok());
  CHECK(ferry::vector_files::read_vectors(text, VectorFormat::fvecs)->dims() == 4);

  const fs::path missing = dir / "missing.fvecs";
  check_error(ferry::vector_files::read_vectors(missing).status(), ErrorCode::not_found,
              missing, {"no such file"});
  const fs::path folder = dir / "folder.npy";
  fs::create_directories(folder);
  check_error(ferry::vector_files::read_vectors(folder).status(), ErrorCode::invalid_argument,
              folder, {"is a directory, not a regular file"});
  const fs::path fifo = dir / "fifo.fvecs";  // nobody writes to it: a blocking open would hang
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_error(ferry::vector_files::read_vectors(fifo).status(), ErrorCode::invalid_argument, fifo,
              {"is a FIFO"});
  check_error(ferry::vector_files::read_file_bytes(fifo).status(), ErrorCode::invalid_argument,
              fifo, {"is a FIFO"});
  check_error(ferry::vector_files::read_file_bytes(missing).status(), ErrorCode::not_found,
              missing, {"no such file"});

  const fs::path out = dir / "out.fvecs";
  const Bytes bytes(12, 0);
  check_error(ferry::vector_files::write_vectors(out, view_of(VectorElement::uint8, 1, 12, bytes)),
              ErrorCode::invalid_argument, out, {".fvecs holds float32, the vectors are uint8"});
  check_error(ferry::vector_files::write_vectors(dir / "out.ivecs", view_of(VectorElement::uint32, 1, 3, bytes)),
              ErrorCode::invalid_argument, dir / "out.ivecs", {".ivecs holds int32, the vectors are uint32"});
  check_error(ferry::vector_files::write_vectors(out, view_of(VectorElement::float32, 1, 4, bytes)),
              ErrorCode::invalid_argument, out, {"1 x 4 float32 elements need 16 bytes, the data has 12"});
  check_error(ferry::vector_files::write_vectors(out, view_of(VectorElement::float32, 0, 3, {})),
              ErrorCode::invalid_argument, out, {"0 rows"});
  check_error(ferry::vector_files::write_vectors(out, view_of(VectorElement::float32, 3, 0, {})),
              ErrorCode::invalid_argument, out, {"dims is 0"});
  check_error(ferry::vector_files::write_vectors(out, view_of(VectorElement::float32, 1, 1ull << 31, {})),
              ErrorCode::invalid_argument, out, {"does not fit .fvecs's int32 dimension"});
  CHECK_FALSE(fs::exists(out));  // nothing written for a refused call

  const fs::path no_folder = dir / "no-such-folder" / "out.npy";
  check_error(ferry::vector_files::write_vectors(no_folder, floats), ErrorCode::failed_precondition,
              no_folder, {"cannot create: No such file or directory"});
}
