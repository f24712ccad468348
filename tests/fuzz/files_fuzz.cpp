// Fuzzing the readers of files from outside, as ibp_fuzz does the IBP readers: a deterministic,
// seeded mutation loop over valid files, each mutant written to disk and read back through the
// public entry points, bounded by wall time and iterations; run by ctest as files_fuzz, under
// every preset's sanitizers.
//
// - BinaryIndex files (BinaryIndex::load on the CPU backend): byte flips, truncations,
//   extensions, header fields edited with the header CRC re-stamped (so that the field checks,
//   not the checksum, must catch them), payload edits.
// - Vector files (read_vectors, read_npy_array): .npy headers edited as text (shape, dtype,
//   order, the header length) and as bytes, .fvecs/.bvecs/.ivecs dimensions and lengths.
// - The `ferry ibp decode` path for files: read_file_bytes, validate_for_decode, decode.
//
// Properties: nothing crashes or reads out of bounds (ASan watches exact-size copies and every
// byte a reader hands back is read); an error carries the code of its fault (data_corrupt for a
// damaged file; invalid_argument only for a well-formed file holding what a reader does not
// take; out_of_memory only for a claim past the host's memory); a file left as it was loads;
// what loads is consistent with the file's size.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/ibp_streams.hpp"
#include "common/temp_dir.hpp"
#include "core/crc32c.hpp"
#include "ferry/ferry.hpp"
#include "vector_files.hpp"

namespace {

namespace fs = std::filesystem;
using ferry::ErrorCode;
using Bytes = std::vector<std::byte>;

bool fail(const char* kind, const char* what, const ferry::Status& status) {
  std::fprintf(stderr, "files_fuzz: %s: %s: %s\n", kind, what, status.to_string().c_str());
  return false;
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Bytes bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

// Every byte of `bytes`, folded: a reader handing back memory it does not own is an ASan finding.
unsigned touch(std::span<const std::byte> bytes) {
  unsigned sum = 0;
  for (const std::byte b : bytes) sum += std::to_integer<unsigned>(b);
  return sum;
}

// Generic damage: flips, a truncation, an extension, an 8-byte field set near its value or to
// anything, at any offset.
void damage(Bytes& s, std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      for (int i = 0, n = 1 + static_cast<int>(rng() % 6); i < n && !s.empty(); ++i) {
        s[rng() % s.size()] ^= static_cast<std::byte>(1 + rng() % 255);
      }
      break;
    case 1:
      s.resize(rng() % (s.size() + 1));
      break;
    case 2:
      for (int i = 0, n = 1 + static_cast<int>(rng() % 70); i < n; ++i) {
        s.push_back(static_cast<std::byte>(rng()));
      }
      break;
    default: {
      if (s.size() < 8) break;
      const std::size_t at = rng() % (s.size() - 7);
      std::uint64_t v = 0;
      std::memcpy(&v, s.data() + at, 8);
      const std::uint64_t deltas[] = {1, 4, 0x100, 0x10000, 1ull << 32, 1ull << 62};
      v = rng() % 3 == 0 ? rng() : v + deltas[rng() % 6] * (rng() % 2 == 0 ? 1 : ~0ull);
      std::memcpy(s.data() + at, &v, 8);
      break;
    }
  }
}

// ---- BinaryIndex files ----------------------------------------------------------------------

struct IndexCorpus {
  std::vector<Bytes> files;
};

IndexCorpus index_corpus(const ferry::Device& device, const fs::path& dir) {
  IndexCorpus corpus;
  std::mt19937_64 rng(41);
  struct Case {
    std::uint32_t dims;
    ferry::KeptVectors keep;
    ferry::IndexThreshold threshold;
    std::uint64_t rows;
  };
  const Case cases[] = {{40, ferry::KeptVectors::float32, ferry::IndexThreshold::given, 23},
                        {129, ferry::KeptVectors::int8, ferry::IndexThreshold::first_add_mean, 9},
                        {64, ferry::KeptVectors::none, ferry::IndexThreshold::zero, 31},
                        {8, ferry::KeptVectors::none, ferry::IndexThreshold::first_add_mean, 0}};
  for (const Case& c : cases) {
    ferry::BinaryIndexOptions options;
    options.dims = c.dims;
    options.keep = c.keep;
    options.threshold = c.threshold;
    if (c.threshold == ferry::IndexThreshold::given) options.thresholds.assign(c.dims, 0.25f);
    ferry::BinaryIndex index = ferry::BinaryIndex::create(device, options).value();
    std::vector<float> values(c.rows * c.dims);
    for (float& v : values) v = static_cast<float>(static_cast<int>(rng() % 200) - 100) / 17.0f;
    if (c.rows > 0 && !index.add(std::span<const float>(values), c.rows).ok()) std::abort();
    const fs::path path = dir / "corpus.bix";
    if (!index.save(path).ok()) std::abort();
    corpus.files.push_back(file_bytes(path));
  }
  return corpus;
}

Bytes mutate_index(const Bytes& base, std::mt19937_64& rng) {
  Bytes s = base;
  switch (rng() % 3) {
    case 0: {  // header fields, the header CRC re-stamped: the field checks must catch it
      const std::size_t fields[] = {8, 12, 16, 20, 21, 22, 23, 24, 32, 36, 40, 44, 48};
      const std::size_t at = fields[rng() % std::size(fields)];
      const unsigned bytes = at >= 20 && at <= 23 ? 1 : at == 24 || at == 48 ? 8 : 4;
      std::uint64_t v = 0;
      std::memcpy(&v, s.data() + at, bytes);
      v = rng() % 2 == 0 ? rng() % 300 : v + (rng() % 2 == 0 ? 1 : ~0ull) * (1 + rng() % 64);
      std::memcpy(s.data() + at, &v, bytes);
      const std::uint32_t crc = ferry::detail::crc32c(std::span<const std::byte>(s.data(), 60));
      std::memcpy(s.data() + 60, &crc, 4);
      break;
    }
    case 1:  // the payload (its CRC catches it)
      if (s.size() > 64) s[64 + rng() % (s.size() - 64)] ^= static_cast<std::byte>(1 + rng() % 255);
      break;
    default:
      damage(s, rng);
      break;
  }
  if (rng() % 6 == 0) s.resize(rng() % (s.size() + 1));
  return s;
}

bool exercise_index(const ferry::Device& device, const fs::path& path, const Bytes& bytes,
                    bool unchanged) {
  write_file(path, bytes);
  auto loaded = ferry::BinaryIndex::load(device, path);
  if (!loaded.ok()) {
    if (unchanged) return fail("index", "an unchanged file was refused", loaded.status());
    // Damage is data_corrupt, whatever it hit; a claim past memory is out_of_memory.
    const ErrorCode code = loaded.status().code();
    if (code != ErrorCode::data_corrupt && code != ErrorCode::out_of_memory) {
      return fail("index", "damage reported with another code", loaded.status());
    }
    return true;
  }
  // Accepted: the file is consistent (its CRCs matched); a search must work on it.
  std::uint64_t header_rows = 0;
  std::memcpy(&header_rows, bytes.data() + 24, 8);
  if (loaded->size() != header_rows) {
    return fail("index", "loaded a row count other than the header's", ferry::Status());
  }
  if (loaded->size() > 0) {
    // One query of the index's input type (a crafted header may name any of them): zeros.
    const ferry::BinaryIndexOptions& o = loaded->options();
    const Bytes query(std::size_t{o.dims} * (o.input_type == ferry::ElementType::float32 ? 4 : 2));
    auto found = loaded->search(std::span<const std::byte>(query), 1, {3, 1, false});
    if (!found.ok()) return fail("index", "searching a loaded file", found.status());
  }
  return true;
}

// ---- Vector files -----------------------------------------------------------------------------

struct VectorFile {
  std::string extension;
  Bytes bytes;
  bool vector_matrix = true;  // read_vectors takes it (else only read_npy_array)
};
struct VectorCorpus {
  std::vector<VectorFile> files;
};

VectorCorpus vector_corpus(const fs::path& dir) {
  using ferry::vector_files::VectorElement;
  VectorCorpus corpus;
  std::mt19937_64 rng(42);
  struct Case {
    const char* extension;
    VectorElement element;
    std::uint64_t rows, dims;
    std::uint8_t ndim;
  };
  const Case cases[] = {{".npy", VectorElement::float32, 7, 5, 2},
                        {".npy", VectorElement::uint8, 3, 64, 2},
                        {".npy", VectorElement::int64, 1, 9, 1},
                        {".npy", VectorElement::bfloat16, 4, 3, 2},
                        {".fvecs", VectorElement::float32, 6, 4, 2},
                        {".bvecs", VectorElement::uint8, 5, 16, 2},
                        {".ivecs", VectorElement::int32, 3, 2, 2}};
  for (const Case& c : cases) {
    Bytes data(c.rows * c.dims * ferry::vector_files::element_bytes(c.element));
    for (auto& b : data) b = static_cast<std::byte>(rng());
    const fs::path path = dir / (std::string("corpus") + c.extension);
    const ferry::vector_files::VectorView view{c.element, c.rows, c.dims, data, c.ndim};
    if (!ferry::vector_files::write_vectors(path, view).ok()) std::abort();
    const bool matrix = c.ndim == 2 && (c.element == VectorElement::float32 ||
                                        c.element == VectorElement::uint8);
    corpus.files.push_back({c.extension, file_bytes(path), matrix});
  }
  return corpus;
}

// .npy headers as text: the parts a reader trusts.
void mutate_npy_header(Bytes& s, std::mt19937_64& rng) {
  if (s.size() < 12) return;
  std::string text(reinterpret_cast<const char*>(s.data()), s.size());
  const std::size_t open = text.find('(');
  const std::size_t close = text.find(')');
  static const char* const kShapes[] = {"(99999999999999999999, 3)", "(0, 5)", "(18446744073709551615, 2)",
                                        "(4294967296, 4294967296)", "(1, 1, 1)", "()", "(-1, 2)",
                                        "(7,)", "(3, 5", "(2, 0x10)", "(1099511627776, 1)"};
  static const char* const kDescrs[] = {"'<f8'", "'>f4'", "'|b1'", "'<V2'", "'<c16'", "'|O'",
                                        "'<f4", "[('a', '<f4')]", "'<i8'", "''"};
  switch (rng() % 4) {
    case 0:
      if (open != std::string::npos && close != std::string::npos && close > open) {
        text.replace(open, close - open + 1, kShapes[rng() % std::size(kShapes)]);
      }
      break;
    case 1: {
      const std::size_t at = text.find("'descr': ");
      if (at != std::string::npos) {
        const std::size_t end = text.find(',', at);
        text.replace(at + 9, end - at - 9, kDescrs[rng() % std::size(kDescrs)]);
      }
      break;
    }
    case 2: {
      const std::size_t at = text.find("False");
      if (at != std::string::npos) text.replace(at, 5, rng() % 2 == 0 ? "True" : "Fals");
      break;
    }
    default: {  // the header length field (version 1.0: 2 bytes at 8)
      std::uint16_t length = 0;
      std::memcpy(&length, text.data() + 8, 2);
      length = static_cast<std::uint16_t>(rng() % 3 == 0 ? rng() : length + (rng() % 9) - 4);
      std::memcpy(text.data() + 8, &length, 2);
      break;
    }
  }
  s.assign(reinterpret_cast<const std::byte*>(text.data()),
           reinterpret_cast<const std::byte*>(text.data()) + text.size());
}

Bytes mutate_vectors(const std::string& extension, const Bytes& base, std::mt19937_64& rng) {
  Bytes s = base;
  if (extension == ".npy" && rng() % 2 == 0) {
    mutate_npy_header(s, rng);
  } else if (extension != ".npy" && rng() % 2 == 0 && s.size() >= 4) {
    // A record's dimension: the first or a later one.
    const std::int32_t dims[] = {0, -1, 1, 3, 0x7fffffff, static_cast<std::int32_t>(0x80000000u), 17};
    std::int32_t first = 0;
    std::memcpy(&first, s.data(), 4);
    const std::size_t record = 4 + static_cast<std::size_t>(first) * (extension == ".bvecs" ? 1 : 4);
    const std::size_t at = rng() % 2 == 0 || record >= s.size() ? 0 : record * (rng() % (s.size() / record));
    std::memcpy(s.data() + at, &dims[rng() % std::size(dims)], 4);
  } else {
    damage(s, rng);
  }
  if (rng() % 8 == 0) s.resize(rng() % (s.size() + 1));
  return s;
}

bool check_matrix(const char* what, const ferry::Result<ferry::vector_files::VectorMatrix>& read,
                  std::uint64_t file_size, bool unchanged) {
  if (!read.ok()) {
    if (unchanged) return fail("vectors", what, read.status());
    const ErrorCode code = read.status().code();
    if (code != ErrorCode::data_corrupt && code != ErrorCode::invalid_argument &&
        code != ErrorCode::out_of_memory) {
      return fail("vectors", "damage reported with an unexpected code", read.status());
    }
    return true;
  }
  const auto& m = *read;
  if (m.bytes().size() != m.rows() * m.row_bytes() || m.bytes().size() > file_size) {
    return fail("vectors", "a matrix larger than its file", ferry::Status());
  }
  (void)touch(m.bytes());
  return true;
}

bool exercise_vectors(const fs::path& dir, const VectorFile& base, const Bytes& bytes,
                      bool unchanged) {
  const std::string& extension = base.extension;
  const fs::path path = dir / ("mutant" + extension);
  write_file(path, bytes);
  if (!check_matrix("read_vectors refused an unchanged file",
                    ferry::vector_files::read_vectors(path), bytes.size(),
                    unchanged && base.vector_matrix)) {
    return false;
  }
  if (extension == ".npy" &&
      !check_matrix("read_npy_array refused an unchanged file",
                    ferry::vector_files::read_npy_array(path), bytes.size(), unchanged)) {
    return false;
  }
  return true;
}

// ---- IBP stream files, as `ferry ibp decode` reads them ------------------------------------------

bool exercise_stream_file(const fs::path& dir, const Bytes& bytes) {
  const fs::path path = dir / "mutant.ibp";
  write_file(path, bytes);
  auto file = ferry::vector_files::read_file_bytes(path);
  if (!file.ok()) return fail("ibp file", "read_file_bytes", file.status());
  auto layout = ferry::ibp::validate_for_decode(file->bytes, 2);
  if (!layout.ok()) {
    const ErrorCode code = layout.status().code();
    if (code != ErrorCode::data_corrupt && code != ErrorCode::out_of_memory) {
      return fail("ibp file", "validate_for_decode", layout.status());
    }
    return true;
  }
  if (layout->raw_bytes() > (64u << 20)) return true;  // valid and large: not decoded here
  Bytes out(layout->raw_bytes());
  const ferry::Status decoded = ferry::ibp::decode(file->bytes, out, true, 2);
  if (!decoded.ok()) return fail("ibp file", "decode after validate_for_decode", decoded);
  return true;
}

Bytes ibp_stream(std::mt19937_64& rng) {
  const auto data = ferry::test::ibp_tensor(ferry::test::IbpFamily::small_ints, 4, 40 * 37 - 5, 37, rng);
  ferry::ibp::EncodeParams p;
  p.element_size = 4;
  p.row_elements = 37;
  p.elements = 40 * 37 - 5;
  p.group_rows = 6;
  p.threads = 1;
  return ferry::ibp::encode(data, p).value();
}

}  // namespace

// files_fuzz [seconds] [iterations]: stops at whichever comes first (defaults: 8 s, 20000), the
// time and iterations shared out over the three kinds of file.
int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 8.0;
  const long iterations = argc > 2 ? std::atol(argv[2]) : 20000;
  ferry::test::TempDir dir("ferry-files-fuzz");
  auto device = ferry::Device::open("cpu");
  if (!device.ok()) return fail("setup", "opening the CPU device", device.status()) ? 0 : 1;
  const IndexCorpus indexes = index_corpus(*device, dir.path());
  const VectorCorpus vectors = vector_corpus(dir.path());
  std::mt19937_64 rng(43);
  const Bytes stream = ibp_stream(rng);
  for (const Bytes& file : indexes.files) {
    if (!exercise_index(*device, dir / "mutant.bix", file, true)) return 1;
  }
  for (const VectorFile& file : vectors.files) {
    if (!exercise_vectors(dir.path(), file, file.bytes, true)) return 1;
  }
  if (!exercise_stream_file(dir.path(), stream)) return 1;

  const auto start = std::chrono::steady_clock::now();
  long counts[3] = {0, 0, 0};
  long done = 0;
  for (; done < iterations; ++done) {
    if (done % 16 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
      break;
    }
    bool ok = true;
    switch (done % 3) {
      case 0: {
        const Bytes& base = indexes.files[rng() % indexes.files.size()];
        const Bytes mutant = mutate_index(base, rng);
        ok = exercise_index(*device, dir / "mutant.bix", mutant, mutant == base);
        break;
      }
      case 1: {
        const VectorFile& base = vectors.files[rng() % vectors.files.size()];
        const Bytes mutant = mutate_vectors(base.extension, base.bytes, rng);
        ok = exercise_vectors(dir.path(), base, mutant, mutant == base.bytes);
        break;
      }
      default: {
        Bytes mutant = stream;
        damage(mutant, rng);
        if (rng() % 2 == 0) ferry::test::restamp_ibp(mutant);
        ok = exercise_stream_file(dir.path(), mutant);
        break;
      }
    }
    if (!ok) {
      std::fprintf(stderr, "files_fuzz: iteration %ld failed\n", done);
      return 1;
    }
    ++counts[done % 3];
  }
  std::printf("files_fuzz: %ld index files, %ld vector files, %ld IBP stream files, no finding\n",
              counts[0], counts[1], counts[2]);
  return 0;
}
