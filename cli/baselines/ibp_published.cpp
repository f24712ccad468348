#include "baselines/ibp_published.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>
#include <vector>

namespace ferry::cli {

namespace {

constexpr int kThresholds = 31;  // 0.70 .. 1.00

std::uint64_t element(const std::byte* data, std::uint64_t index, unsigned size) {
  std::uint64_t value = 0;
  std::memcpy(&value, data + index * size, size);  // little-endian host
  return value;
}

}  // namespace

PublishedIbp published_ibp_size(std::span<const std::byte> data, unsigned element_size,
                                std::uint64_t row_elements, unsigned threads) {
  const unsigned width = 8 * element_size;
  const std::uint64_t elements = data.size() / element_size;
  const std::uint64_t rows = (elements + row_elements - 1) / row_elements;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::uint64_t>(threads, std::max<std::uint64_t>(rows, 1)));
  auto at = [&](std::uint64_t row, std::uint64_t column) -> std::uint64_t {
    const std::uint64_t index = row * row_elements + column;
    return index < elements ? element(data.data(), index, element_size) : 0;
  };

  // Bit counts per column over every row (threads sum their own, then merged).
  std::vector<std::vector<std::uint64_t>> partial(threads);
  std::vector<std::thread> workers;
  {
    const std::uint64_t per = (rows + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::vector<std::uint64_t>& ones = partial[t];
        ones.assign(row_elements * width, 0);
        const std::uint64_t first = std::min(rows, t * per), end = std::min(rows, first + per);
        for (std::uint64_t r = first; r < end; ++r) {
          for (std::uint64_t c = 0; c < row_elements; ++c) {
            const std::uint64_t x = at(r, c);
            for (unsigned b = 0; b < width; ++b) ones[c * width + b] += (x >> b) & 1;
          }
        }
      });
    }
    for (std::thread& worker : workers) worker.join();
  }
  std::vector<std::uint64_t> ones(row_elements * width, 0);
  for (const auto& part : partial)
    for (std::size_t i = 0; i < ones.size(); ++i) ones[i] += part[i];

  // Per threshold and column: the mask (majority share >= t) and values.
  std::vector<std::uint64_t> masks(kThresholds * row_elements), values(row_elements);
  std::vector<unsigned> kept(kThresholds * row_elements);
  for (std::uint64_t c = 0; c < row_elements; ++c) {
    std::uint64_t value = 0;
    for (unsigned b = 0; b < width; ++b) {
      const std::uint64_t o = ones[c * width + b];
      if (2 * o > rows) value |= std::uint64_t{1} << b;
    }
    values[c] = value;
    for (int t = 0; t < kThresholds; ++t) {
      std::uint64_t mask = 0;
      for (unsigned b = 0; b < width; ++b) {
        const std::uint64_t o = ones[c * width + b];
        const std::uint64_t agree = std::max(o, rows - o);
        if (agree * 100 >= static_cast<std::uint64_t>(70 + t) * rows) mask |= std::uint64_t{1} << b;
      }
      masks[t * row_elements + c] = mask;
      kept[t * row_elements + c] = static_cast<unsigned>(__builtin_popcountll(mask));
    }
  }

  // Row sizes per threshold.
  std::vector<std::array<std::uint64_t, kThresholds>> totals(threads);
  const std::uint64_t raw_row_bits = row_elements * width;
  const std::uint64_t pad = width;  // rows padded to a whole element
  {
    std::vector<std::thread> row_workers;
    const std::uint64_t per = (rows + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      row_workers.emplace_back([&, t] {
        std::array<std::uint64_t, kThresholds>& total = totals[t];
        total.fill(0);
        const std::uint64_t first = std::min(rows, t * per), end = std::min(rows, first + per);
        std::array<std::uint64_t, kThresholds> bits{};
        for (std::uint64_t r = first; r < end; ++r) {
          bits.fill(row_elements);  // the escape bitmap
          for (std::uint64_t c = 0; c < row_elements; ++c) {
            const std::uint64_t mismatch = at(r, c) ^ values[c];
            for (int th = 0; th < kThresholds; ++th) {
              const std::uint64_t mask = masks[th * row_elements + c];
              bits[th] += (mismatch & mask) == 0 ? width - kept[th * row_elements + c] : width;
            }
          }
          for (int th = 0; th < kThresholds; ++th) {
            const std::uint64_t padded = (bits[th] + pad - 1) / pad * pad;
            total[th] += std::min(padded, raw_row_bits) / 8;
          }
        }
      });
    }
    for (std::thread& worker : row_workers) worker.join();
  }
  PublishedIbp best;
  for (int th = 0; th < kThresholds; ++th) {
    std::uint64_t bytes = 2 * element_size * row_elements + (rows + 7) / 8;
    for (const auto& total : totals) bytes += total[th];
    if (best.bytes == 0 || bytes < best.bytes) best = {bytes, (70 + th) / 100.0};
  }
  return best;
}

}  // namespace ferry::cli
