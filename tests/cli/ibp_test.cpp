// `ferry ibp encode|decode|inspect` end to end: .npy files of several dtypes and shapes and raw
// files written here, encoded and decoded by the program, the result byte-identical; corrupt and
// truncated streams exit 1 naming the problem.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/run_program.hpp"
#include "common/temp_dir.hpp"
#include "vector_files.hpp"

namespace {

namespace fs = std::filesystem;
using ferry::vector_files::VectorElement;

using ferry::test::Ran;
using ferry::test::slurp;

Ran ferry_ibp(const ferry::test::TempDir& dir, const std::vector<std::string>& args) {
  const Ran ran = ferry::test::run_program(dir, "'" FERRY_PROGRAM "' ibp", args);
  INFO("ferry ibp: stdout: ", ran.out, "\nstderr: ", ran.err);
  return ran;
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::uint64_t n, unsigned spread) {
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() % spread);
  return bytes;
}

std::string back_path(const ferry::test::TempDir& dir) { return (dir / "bad_back.npy").string(); }

TEST_CASE("ferry ibp: .npy round trips are byte-identical") {
  ferry::test::TempDir dir("ferry-ibp-cli");
  std::mt19937_64 rng(14);
  struct Case {
    VectorElement element;
    std::uint64_t rows, dims;
    std::uint8_t ndim;
    const char* group_rows;
  };
  const Case cases[] = {
      {VectorElement::float32, 37, 19, 2, "0"},   {VectorElement::bfloat16, 9, 300, 2, "4"},
      {VectorElement::int64, 1, 10007, 1, "0"},   {VectorElement::uint8, 1, 1, 1, "1"},
      {VectorElement::float64, 5, 3, 2, "2"},     {VectorElement::boolean, 1, 999, 1, "0"},
      {VectorElement::int16, 200, 1, 2, "16"},
  };
  int i = 0;
  for (const Case& c : cases) {
    CAPTURE(i);
    const std::uint64_t bytes = c.rows * c.dims * ferry::vector_files::element_bytes(c.element);
    const auto data = random_bytes(rng, bytes, c.element == VectorElement::boolean ? 2 : 7);
    ferry::vector_files::VectorView view{c.element, c.rows, c.dims, data, c.ndim};
    const fs::path in = dir / ("in" + std::to_string(i) + ".npy");
    const fs::path packed = dir / ("in" + std::to_string(i) + ".ibp");
    const fs::path back = dir / ("back" + std::to_string(i) + ".npy");
    REQUIRE(ferry::vector_files::write_vectors(in, view).ok());
    CHECK(ferry_ibp(dir, {"encode", in.string(), "-o", packed.string(), "--group-rows", c.group_rows}).exit == 0);
    CHECK(ferry_ibp(dir, {"decode", packed.string(), "-o", back.string()}).exit == 0);
    CHECK(slurp(in) == slurp(back));
    const Ran inspect = ferry_ibp(dir, {"inspect", packed.string()});
    CHECK(inspect.exit == 0);
    CHECK(inspect.out.find("ratio") != std::string::npos);
    ++i;
  }
}

TEST_CASE("ferry ibp: raw files, and corrupt or truncated streams exit 1") {
  ferry::test::TempDir dir("ferry-ibp-cli");
  std::mt19937_64 rng(15);
  const auto data = random_bytes(rng, 4 * 33 * 70, 5);
  const fs::path raw = dir / "t.raw", packed = dir / "t.ibp", back = dir / "t.bin";
  {
    std::ofstream out(raw, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  CHECK(ferry_ibp(dir, {"encode", raw.string(), "-o", packed.string(), "--dtype", "u32", "--shape", "33x70"}).exit == 0);
  CHECK(ferry_ibp(dir, {"decode", packed.string(), "-o", back.string()}).exit == 0);
  CHECK(slurp(raw) == slurp(back));
  // A raw file of the wrong size, and one without --dtype.
  CHECK(ferry_ibp(dir, {"encode", raw.string(), "-o", packed.string(), "--dtype", "u32", "--shape", "33x71"}).exit == 1);
  CHECK(ferry_ibp(dir, {"encode", raw.string(), "-o", (dir / "x.ibp").string()}).exit == 2);
  const std::string stream = slurp(packed);
  const fs::path cut = dir / "cut.ibp", flipped = dir / "flipped.ibp";
  {
    std::ofstream out(cut, std::ios::binary);
    out.write(stream.data(), static_cast<std::streamsize>(stream.size() / 2));
    std::string f = stream;
    f[f.size() / 2] = static_cast<char>(f[f.size() / 2] ^ 4);
    std::ofstream(flipped, std::ios::binary).write(f.data(), static_cast<std::streamsize>(f.size()));
  }
  for (const fs::path& bad : {cut, flipped}) {
    const Ran d = ferry_ibp(dir, {"decode", bad.string(), "-o", (dir / "y.npy").string()});
    CHECK(d.exit == 1);
    CHECK(d.err.find("data_corrupt") != std::string::npos);
    CHECK(ferry_ibp(dir, {"inspect", bad.string()}).exit == 1);
  }
  const Ran truncated = ferry_ibp(dir, {"inspect", cut.string()});
  CHECK(truncated.err.find("truncated") != std::string::npos);
}

TEST_CASE("ferry ibp: --backend runs the device ops, with the host codec's bytes") {
  // FERRY_IBP_BACKEND names the device (ctest: cli.ibp.vulkan); without it the CPU backend.
  const char* env = std::getenv("FERRY_IBP_BACKEND");
  const std::string backend = env != nullptr ? env : "cpu";
  ferry::test::TempDir dir("ferry-ibp-cli");
  std::mt19937_64 rng(16);
  struct Case {
    VectorElement element;
    std::uint64_t rows, dims;
    const char* group_rows;
  };
  const Case cases[] = {{VectorElement::int32, 300, 17, "0"}, {VectorElement::bfloat16, 7, 129, "3"},
                        {VectorElement::int64, 1, 5000, "0"}};
  int i = 0;
  for (const Case& c : cases) {
    CAPTURE(i);
    const std::uint64_t bytes = c.rows * c.dims * ferry::vector_files::element_bytes(c.element);
    const auto data = random_bytes(rng, bytes, 3);
    ferry::vector_files::VectorView view{c.element, c.rows, c.dims, data,
                                         static_cast<std::uint8_t>(c.rows == 1 ? 1 : 2)};
    const fs::path in = dir / "in.npy", host = dir / "host.ibp", device = dir / "device.ibp",
                   back = dir / "back.npy";
    REQUIRE(ferry::vector_files::write_vectors(in, view).ok());
    CHECK(ferry_ibp(dir, {"encode", in.string(), "-o", host.string(), "--group-rows",
                          c.group_rows, "--backend", "cpu"}).exit == 0);
    CHECK(ferry_ibp(dir, {"encode", in.string(), "-o", device.string(), "--group-rows",
                          c.group_rows, "--backend", backend}).exit == 0);
    CHECK(slurp(host) == slurp(device));
    CHECK(ferry_ibp(dir, {"decode", host.string(), "-o", back.string(), "--backend", backend}).exit == 0);
    CHECK(slurp(in) == slurp(back));
    ++i;
  }
  // A corrupt stream never reaches the device.
  std::string stream = slurp(dir / "host.ibp");
  stream[stream.size() / 3] = static_cast<char>(stream[stream.size() / 3] ^ 1);
  std::ofstream(dir / "bad.ibp", std::ios::binary).write(stream.data(), static_cast<std::streamsize>(stream.size()));
  const Ran bad = ferry_ibp(dir, {"decode", (dir / "bad.ibp").string(), "-o", back_path(dir), "--backend", backend});
  CHECK(bad.exit == 1);
  CHECK(bad.err.find("data_corrupt") != std::string::npos);
}

}  // namespace
