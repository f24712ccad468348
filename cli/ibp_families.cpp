#include "ibp_families.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "bench_common.hpp"

namespace ferry::cli {

namespace {

const IbpFamily kFamilies[] = {
    {"indices64", "int64 edge indices, uniform < 2^24 (1-D, rows of 4096)", ibp::DType::i64, 8,
     4096},
    {"tokens32", "int32 token ids, Zipf(1.1) over a 50,257 vocabulary (1-D, rows of 4096)",
     ibp::DType::i32, 4, 4096},
    {"bf16-weights", "bf16 weights N(0, 0.02), 4096 per row", ibp::DType::bf16, 2, 4096},
    {"fp16-activations", "fp16 activations, GELU of N(0, 1), 4096 per row", ibp::DType::f16, 2,
     4096},
    {"relu32", "float32 ReLU of N(0, 1) (about half zeros), 4096 per row", ibp::DType::f32, 4,
     4096},
    {"bow-features", "float32 bag-of-words node features, 1433 per row, 1.3% non-zero, "
                     "row-normalized", ibp::DType::f32, 4, 1433},
    {"embeddings32", "float32 embedding table N(0, 0.1), 128 per row", ibp::DType::f32, 4, 128},
};

// Uniform in [0, 1) from a counter.
double uniform(std::uint64_t counter) {
  return static_cast<double>(mix64(counter) >> 11) * 0x1.0p-53;
}

double normal(std::uint64_t counter) {
  const double u1 = std::max(uniform(2 * counter), 1e-300), u2 = uniform(2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::uint16_t to_bfloat16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

std::uint16_t to_float16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const float magnitude = std::fabs(value);
  if (!(magnitude < 65520.0f)) return static_cast<std::uint16_t>(sign | 0x7C00);
  if (magnitude < 0x1.0p-14f) {  // subnormal: a multiple of 2^-24, rounded to nearest even
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(
                                                 std::nearbyint(magnitude * 0x1.0p24f)));
  }
  const std::uint32_t m = bits & 0x7FFFFFFF;
  return static_cast<std::uint16_t>(sign | ((m - 0x38000000 + 0xFFF + ((m >> 13) & 1)) >> 13));
}

}  // namespace

std::vector<const IbpFamily*> ibp_families_named(std::span<const std::string> names) {
  std::vector<const IbpFamily*> named;
  for (const std::string& name : names) {
    for (const IbpFamily& family : kFamilies) {
      if (family.name == name) named.push_back(&family);
    }
  }
  return named;
}

std::vector<std::byte> make_ibp_tensor(const IbpFamily& family, std::uint64_t elements) {
  std::vector<std::byte> data(elements * family.element_size);
  // Zipf(1.1) over 50,257 ids: the inverse CDF on a 2^16-entry table of quantiles.
  std::vector<std::uint32_t> zipf;
  if (family.name == "tokens32") {
    constexpr std::uint32_t kVocab = 50257;
    std::vector<double> cdf(kVocab);
    double sum = 0;
    for (std::uint32_t i = 0; i < kVocab; ++i) cdf[i] = (sum += std::pow(i + 1.0, -1.1));
    zipf.resize(1 << 16);
    for (std::uint32_t q = 0; q < zipf.size(); ++q) {
      const double target = (q + 0.5) / zipf.size() * sum;
      zipf[q] = static_cast<std::uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), target) -
                                           cdf.begin());
    }
  }
  auto fill = [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t i = first; i < end; ++i) {
      std::byte* out = data.data() + i * family.element_size;
      const std::uint64_t seed = i * 0x9E3779B97F4A7C15ull + family.element_size;
      if (family.name == "indices64") {
        const std::uint64_t v = mix64(seed) >> 40;  // < 2^24
        std::memcpy(out, &v, 8);
      } else if (family.name == "tokens32") {
        // Rarely past the table's resolution: a uniform id in the tail.
        const std::uint64_t r = mix64(seed);
        const std::uint32_t v =
            (r & 0xFF) == 0 ? static_cast<std::uint32_t>((r >> 8) % 50257)
                            : zipf[(r >> 16) & 0xFFFF];
        std::memcpy(out, &v, 4);
      } else if (family.name == "bf16-weights") {
        const std::uint16_t v = to_bfloat16(static_cast<float>(0.02 * normal(seed)));
        std::memcpy(out, &v, 2);
      } else if (family.name == "fp16-activations") {
        const double x = normal(seed);
        const double gelu = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        const std::uint16_t v = to_float16(static_cast<float>(gelu));
        std::memcpy(out, &v, 2);
      } else if (family.name == "relu32") {
        const float v = static_cast<float>(std::max(0.0, normal(seed)));
        std::memcpy(out, &v, 4);
      } else if (family.name == "bow-features") {
        // A word present with probability 1.3%, counts 1-3, divided by the row's expected total
        // (about 18.6 words): the values a row-normalized count vector takes.
        const std::uint64_t r = mix64(seed);
        float v = 0.0f;
        if (r % 1000 < 13) v = static_cast<float>(1 + (r >> 32) % 3) / 18.6f;
        std::memcpy(out, &v, 4);
      } else {  // embeddings32
        const float v = static_cast<float>(0.1 * normal(seed));
        std::memcpy(out, &v, 4);
      }
    }
  };
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  const std::uint64_t per = (elements + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    const std::uint64_t first = std::min(elements, t * per), end = std::min(elements, first + per);
    if (first < end) workers.emplace_back(fill, first, end);
  }
  for (std::thread& worker : workers) worker.join();
  return data;
}


}  // namespace ferry::cli
