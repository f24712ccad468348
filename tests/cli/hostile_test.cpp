// The `ferry` program against hostile inputs, as an attacker would try it: files that are damaged,
// truncated, empty, of another format, or that claim far more than they hold; paths that are
// directories, FIFOs nobody writes to, devices, or missing; mismatched dimensions and shapes.
// Every case must end with exit status 1 (a library error) or 2 (a usage error), with a message
// naming the path and the fault's code: never a signal (an abort, a crash), never a hang (each
// run is under `timeout`), never an output file left behind. Run under ASan + UBSan by the
// sanitizer presets. docs/RELIABILITY.md, "Files and bytes from outside", has the codes.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/ibp_streams.hpp"
#include "common/run_program.hpp"
#include "common/temp_dir.hpp"
#include "vector_files.hpp"

namespace {

namespace fs = std::filesystem;
using ferry::test::Ran;
using ferry::test::slurp;
using ferry::vector_files::VectorElement;

// A hang is a failure too: `timeout` kills the program after a minute (exit 137).
Ran ferry(const ferry::test::TempDir& dir, const std::vector<std::string>& args,
          const std::string& environment = "") {
  const Ran ran = ferry::test::run_program(
      dir, environment + " timeout -s KILL 60 '" FERRY_PROGRAM "'", args);
  INFO("ferry: exit ", ran.exit, "\nstdout: ", ran.out, "\nstderr: ", ran.err);
  return ran;
}

// The run ended as a user error should: `exit`, ferry's own message containing every one of
// `expected`, no sign of a crash.
void refused(const Ran& ran, int exit, const std::vector<std::string>& expected) {
  INFO("exit ", ran.exit, "\nstderr: ", ran.err);
  CHECK(ran.exit == exit);
  CHECK(ran.err.rfind("ferry: ", 0) == 0);
  for (const std::string& text : expected) {
    CHECK_MESSAGE(ran.err.find(text) != std::string::npos, "missing: ", text);
  }
  for (const char* crash : {"terminate called", "Aborted", "AddressSanitizer", "runtime error",
                            "std::bad_alloc", "Segmentation"}) {
    CHECK(ran.err.find(crash) == std::string::npos);
  }
}

void write_bytes(const fs::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::byte> read_bytes(const fs::path& path) {
  const std::string text = slurp(path);
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

template <typename T>
void put(std::vector<std::byte>& bytes, std::size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// The special paths every reader must refuse at once, named with `extension`: a folder, a FIFO
// nobody writes to (an open() that waits for a writer would hang here), a character device
// (/dev/zero, which never ends, through a link).
struct SpecialPaths {
  fs::path folder, fifo, device;
  SpecialPaths(const ferry::test::TempDir& dir, const std::string& extension)
      : folder(dir / ("folder" + extension)), fifo(dir / ("fifo" + extension)),
        device(dir / ("zero" + extension)) {
    fs::create_directories(folder);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    fs::create_symlink("/dev/zero", device);
  }
};

// A valid IBP stream, written by the program itself: 40 rows of 37 int32 values.
fs::path valid_stream(const ferry::test::TempDir& dir) {
  std::mt19937_64 rng(30);
  std::vector<std::int32_t> values(40 * 37);
  for (auto& v : values) v = static_cast<std::int32_t>(rng() % 9);
  const fs::path in = dir / "valid.npy", out = dir / "valid.ibp";
  REQUIRE(ferry::vector_files::write_vectors(
              in, {VectorElement::int32, 40, 37, std::as_bytes(std::span(values))})
              .ok());
  REQUIRE(ferry(dir, {"ibp", "encode", in.string(), "-o", out.string()}).exit == 0);
  return out;
}

TEST_CASE("hostile: ferry ibp decode and inspect refuse every bad stream, exit 1") {
  ferry::test::TempDir dir("ferry-hostile");
  const fs::path good = valid_stream(dir);
  const std::vector<std::byte> stream = read_bytes(good);
  const fs::path out = dir / "out.npy";
  auto decode = [&](const fs::path& in, const std::string& environment = "") {
    return ferry(dir, {"ibp", "decode", in.string(), "-o", out.string()}, environment);
  };
  auto inspect = [&](const fs::path& in) { return ferry(dir, {"ibp", "inspect", in.string()}); };

  SUBCASE("a 64-byte file whose header claims a 32 GiB tensor") {
    // The header is consistent and its CRC right; the file ends after it. Nothing may be
    // allocated for what it claims before the stream is checked.
    std::vector<std::byte> header(stream.begin(), stream.begin() + 64);
    put<std::uint8_t>(header, 10, 8);                  // element_size
    put<std::uint32_t>(header, 16, 511);               // group_rows: just under 4 GiB a group
    put<std::uint64_t>(header, 24, 4096);              // rows
    put<std::uint64_t>(header, 32, 1u << 20);          // row_elements
    put<std::uint64_t>(header, 40, 4096ull << 20);     // elements: 32 GiB of int64
    put<std::uint64_t>(header, 48, 0);                 // data_bytes: every row all matched
    ferry::test::restamp_ibp(header);
    const fs::path claim = dir / "claim.ibp";
    write_bytes(claim, header);
    refused(decode(claim), 1, {"claim.ibp", "data_corrupt", "truncated"});
    refused(inspect(claim), 1, {"claim.ibp", "data_corrupt"});
  }
  SUBCASE("a valid stream whose tensor is more than the host may hold") {
    // FERRY_HOST_MEMORY_LIMIT stands in for a machine smaller than the tensor (5920 bytes).
    refused(decode(good, "FERRY_HOST_MEMORY_LIMIT=5000"), 1,
            {"valid.ibp", "out_of_memory", "5920 bytes", "5000"});
    CHECK(decode(good, "FERRY_HOST_MEMORY_LIMIT=6000").exit == 0);
    fs::remove(out);
    refused(decode(good, "FERRY_HOST_MEMORY_LIMIT=lots"), 1,
            {"invalid_argument", "FERRY_HOST_MEMORY_LIMIT", "'lots'"});
  }
  SUBCASE("truncated anywhere, extended, empty, garbage") {
    for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{63},
                                   std::size_t{64}, std::size_t{65}, stream.size() / 2,
                                   stream.size() - 1}) {
      CAPTURE(size);
      const fs::path cut = dir / "cut.ibp";
      write_bytes(cut, {stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(size)});
      refused(decode(cut), 1, {"cut.ibp", "data_corrupt"});
      refused(inspect(cut), 1, {"cut.ibp", "data_corrupt"});
    }
    std::vector<std::byte> longer = stream;
    longer.resize(stream.size() + 3);
    write_bytes(dir / "longer.ibp", longer);
    refused(decode(dir / "longer.ibp"), 1, {"longer.ibp", "data_corrupt"});
    std::mt19937_64 rng(31);
    std::vector<std::byte> garbage(5000);
    for (auto& b : garbage) b = static_cast<std::byte>(rng());
    write_bytes(dir / "garbage.ibp", garbage);
    refused(decode(dir / "garbage.ibp"), 1, {"garbage.ibp", "data_corrupt"});
  }
  SUBCASE("one flipped bit anywhere") {
    std::mt19937_64 rng(32);
    for (int i = 0; i < 12; ++i) {
      std::vector<std::byte> flipped = stream;
      flipped[rng() % flipped.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
      write_bytes(dir / "flipped.ibp", flipped);
      refused(decode(dir / "flipped.ibp"), 1, {"flipped.ibp", "data_corrupt"});
    }
  }
  SUBCASE("paths that are not regular files, or missing") {
    const SpecialPaths special(dir, ".ibp");
    for (const auto& [path, what] : {std::pair{special.folder, "is a directory"},
                                     std::pair{special.fifo, "is a FIFO"},
                                     std::pair{special.device, "is a character device"}}) {
      CAPTURE(path);
      refused(decode(path), 1, {path.string(), "invalid_argument", what});
      refused(inspect(path), 1, {path.string(), "invalid_argument", what});
    }
    refused(decode(dir / "missing.ibp"), 1, {"missing.ibp", "not_found", "no such file"});
  }
  CHECK_FALSE(fs::exists(out));  // nothing written by a refused decode
}

TEST_CASE("hostile: ferry ibp encode refuses bad tensors and paths") {
  ferry::test::TempDir dir("ferry-hostile");
  const fs::path out = dir / "out.ibp";
  auto encode = [&](const fs::path& in, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"ibp", "encode", in.string(), "-o", out.string()};
    args.insert(args.end(), more.begin(), more.end());
    return ferry(dir, args);
  };
  std::vector<float> values(6 * 5, 1.5f);
  const fs::path npy = dir / "t.npy";
  REQUIRE(ferry::vector_files::write_vectors(
              npy, {VectorElement::float32, 6, 5, std::as_bytes(std::span(values))})
              .ok());
  const std::vector<std::byte> file = read_bytes(npy);

  SUBCASE(".npy files that are damaged or claim more than they hold") {
    std::vector<std::byte> cut(file.begin(), file.end() - 9);
    write_bytes(dir / "cut.npy", cut);
    refused(encode(dir / "cut.npy"), 1, {"cut.npy", "data_corrupt", "truncated"});
    // The header's shape claims 2^40 rows: refused against the file's real size.
    std::string text(reinterpret_cast<const char*>(file.data()), file.size());
    const std::size_t at = text.find("(6, 5)");
    REQUIRE(at != std::string::npos);
    text.replace(at, 6, "(1099511627776, 5)");
    std::vector<std::byte> huge(text.size());
    std::memcpy(huge.data(), text.data(), text.size());
    std::uint16_t header_length = 0;  // numpy 1.0: 2 bytes at 8; 12 more for the longer shape
    std::memcpy(&header_length, file.data() + 8, 2);
    put<std::uint16_t>(huge, 8, static_cast<std::uint16_t>(header_length + 12));
    write_bytes(dir / "huge.npy", huge);
    refused(encode(dir / "huge.npy"), 1, {"huge.npy", "data_corrupt"});
    std::vector<std::byte> magic = file;
    magic[1] = std::byte{'X'};
    write_bytes(dir / "magic.npy", magic);
    refused(encode(dir / "magic.npy"), 1, {"magic.npy", "data_corrupt", "not an .npy file"});
    write_bytes(dir / "empty.npy", {});
    refused(encode(dir / "empty.npy"), 1, {"empty.npy", "data_corrupt"});
  }
  SUBCASE("well-formed files holding what is not encoded") {
    std::string text(reinterpret_cast<const char*>(file.data()), file.size());
    text.replace(text.find("<f4"), 3, ">f4");
    std::vector<std::byte> big_endian(text.size());
    std::memcpy(big_endian.data(), text.data(), text.size());
    write_bytes(dir / "big.npy", big_endian);
    refused(encode(dir / "big.npy"), 1, {"big.npy", "invalid_argument", "big-endian"});
  }
  SUBCASE("raw files: sizes that disagree with --shape, shapes past 2^64 bytes") {
    write_bytes(dir / "t.raw", std::vector<std::byte>(120));
    refused(encode(dir / "t.raw", {"--dtype", "f32", "--shape", "6x6"}), 1,
            {"t.raw", "120 bytes, not the 144"});
    refused(encode(dir / "t.raw", {"--dtype", "u64", "--shape", "4294967296x4294967296"}), 2,
            {"bad shape"});
    refused(encode(dir / "t.raw", {"--dtype", "u64", "--shape", "1073741824x1073741824"}), 1,
            {"t.raw", "120 bytes, not the 9223372036854775808"});
    write_bytes(dir / "empty.raw", {});
    refused(encode(dir / "empty.raw", {"--dtype", "u8", "--shape", "7"}), 1,
            {"empty.raw", "0 bytes, not the 7"});
  }
  SUBCASE("paths that are not regular files, or missing; outputs that cannot be written") {
    const SpecialPaths special(dir, ".raw");
    for (const fs::path& path : {special.folder, special.fifo, special.device}) {
      CAPTURE(path);
      refused(encode(path, {"--dtype", "u8", "--shape", "16"}), 1,
              {path.string(), "invalid_argument", "not a regular file"});
    }
    refused(encode(dir / "missing.npy"), 1, {"missing.npy", "not_found"});
    const Ran to_folder = ferry(dir, {"ibp", "encode", npy.string(), "-o", special.folder.string()});
    CHECK((to_folder.exit == 1 || to_folder.exit == 2));
    refused(to_folder, to_folder.exit, {special.folder.string()});
    CHECK(fs::is_directory(special.folder));
  }
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("hostile: ferry search refuses bad databases and queries") {
  ferry::test::TempDir dir("ferry-hostile");
  std::mt19937_64 rng(33);
  std::vector<float> base(40 * 16), queries(3 * 16), other(3 * 17);
  for (auto* v : {&base, &queries, &other}) {
    for (float& x : *v) x = static_cast<float>(rng() % 200) / 10.0f - 10.0f;
  }
  const fs::path db = dir / "base.fvecs", q = dir / "q.fvecs", q17 = dir / "q17.fvecs";
  REQUIRE(ferry::vector_files::write_vectors(
              db, {VectorElement::float32, 40, 16, std::as_bytes(std::span(base))}).ok());
  REQUIRE(ferry::vector_files::write_vectors(
              q, {VectorElement::float32, 3, 16, std::as_bytes(std::span(queries))}).ok());
  REQUIRE(ferry::vector_files::write_vectors(
              q17, {VectorElement::float32, 3, 17, std::as_bytes(std::span(other))}).ok());
  const fs::path out = dir / "ids.ivecs";
  auto search = [&](const fs::path& db_path, const fs::path& q_path) {
    return ferry(dir, {"search", "--db", db_path.string(), "--queries", q_path.string(), "--out",
                       out.string(), "--backend", "cpu"});
  };
  REQUIRE(search(db, q).exit == 0);
  fs::remove(out);

  const SpecialPaths special(dir, ".fvecs");
  for (const fs::path& path : {special.folder, special.fifo, special.device}) {
    CAPTURE(path);
    refused(search(path, q), 1, {path.string(), "invalid_argument", "not a regular file"});
    refused(search(db, path), 1, {path.string(), "invalid_argument", "not a regular file"});
  }
  refused(search(dir / "missing.fvecs", q), 1, {"missing.fvecs", "not_found"});
  refused(search(db, q17), 1, {"q17.fvecs", "17-dimensional"});
  const std::vector<std::byte> bytes = read_bytes(db);
  // A first row claiming 2^31 - 1 dimensions; rows of another dimension; empty.
  std::vector<std::byte> claim = bytes;
  put<std::int32_t>(claim, 0, 0x7fffffff);
  write_bytes(dir / "claim.fvecs", claim);
  refused(search(dir / "claim.fvecs", q), 1, {"claim.fvecs", "data_corrupt", "truncated"});
  std::vector<std::byte> mixed = bytes;
  put<std::int32_t>(mixed, 3 * (4 + 16 * 4), 15);
  write_bytes(dir / "mixed.fvecs", mixed);
  refused(search(dir / "mixed.fvecs", q), 1, {"mixed.fvecs", "data_corrupt", "row 3"});
  write_bytes(dir / "empty.fvecs", {});
  refused(search(dir / "empty.fvecs", q), 1, {"empty.fvecs", "data_corrupt", "empty"});
  CHECK_FALSE(fs::exists(out));
}

}  // namespace
