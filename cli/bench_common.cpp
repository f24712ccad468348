#include "bench_common.hpp"

#include <cstring>
#include <fstream>
#include <string>

namespace ferry::cli {

void fill_random(std::span<std::byte> bytes, std::uint64_t seed) {
  std::uint64_t state = seed;
  auto next = [&state] {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    const std::uint64_t word = next();
    std::memcpy(bytes.data() + i, &word, 8);
  }
  if (i < bytes.size()) {
    const std::uint64_t word = next();
    std::memcpy(bytes.data() + i, &word, bytes.size() - i);
  }
}

std::uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

Result<std::vector<Buffer>> create_buffers(const Device& device, std::size_t count,
                                           std::uint64_t bytes, MemoryKind kind) {
  std::vector<Buffer> buffers;
  for (std::size_t i = 0; i < count; ++i) {
    FERRY_ASSIGN_OR_RETURN(Buffer buffer, device.create_buffer(bytes, kind));
    buffers.push_back(std::move(buffer));
  }
  return buffers;
}

}  // namespace ferry::cli
