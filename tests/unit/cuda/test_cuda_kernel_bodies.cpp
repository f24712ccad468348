// The CUDA backend's fill and copy kernels run their per-thread bodies on the host here, for
// every alignment of the range and sizes around the 16-byte vector edges, so their edge logic
// is checked on machines without a GPU. Built only with the CUDA backend.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/copy_thread.cuh"
#include "ops/fill_thread.cuh"

namespace {

using ferry::cuda::ByteRangeSplit;
using ferry::cuda::split_byte_range;

constexpr unsigned char kGuard = 0xA5;

// 16-byte aligned host storage, like the device and pinned allocations the kernels get.
class AlignedBytes {
 public:
  explicit AlignedBytes(std::size_t size) : storage_((size + 15) / 16) {
    std::memset(data(), kGuard, storage_.size() * 16);
  }
  unsigned char* data() { return reinterpret_cast<unsigned char*>(storage_.data()); }

 private:
  std::vector<uint4> storage_;
};

// Runs a kernel body for every thread of a grid, in any order (threads write disjoint bytes).
template <typename Body>
void run_grid(std::uint64_t thread_count, Body body) {
  for (std::uint64_t thread = thread_count; thread-- > 0;) body(thread, thread_count);
}

unsigned char expected_fill_byte(std::uint32_t pattern, std::uint64_t index) {
  const std::uint8_t bytes[4] = {static_cast<std::uint8_t>(pattern & 0xFF),
                                 static_cast<std::uint8_t>((pattern >> 8) & 0xFF),
                                 static_cast<std::uint8_t>((pattern >> 16) & 0xFF),
                                 static_cast<std::uint8_t>((pattern >> 24) & 0xFF)};
  return bytes[index % 4];
}

}  // namespace

TEST_CASE("CUDA kernels: a byte range splits into head, 16-byte vectors and tail") {
  for (std::uintptr_t misalignment = 0; misalignment < 16; ++misalignment) {
    for (std::uint64_t size = 0; size < 64; ++size) {
      const ByteRangeSplit split = split_byte_range(4096 + misalignment, size);
      CHECK(split.head + 16 * split.vectors + split.tail == size);
      CHECK(split.tail < 16);
      if (split.vectors > 0) CHECK((4096 + misalignment + split.head) % 16 == 0);
    }
  }
}

TEST_CASE("CUDA kernels: fill writes the pattern from the range start at any offset and size") {
  const std::uint32_t patterns[] = {0x04030201u, 0xDEADBEEFu, 0u, 0xFFFFFFFFu};
  const std::uint64_t sizes[] = {1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100,
                                 255, 256, 257, 1000, 4099};
  const std::uint64_t thread_counts[] = {16, 37, 256};
  for (std::uint32_t pattern : patterns) {
    for (std::uint64_t offset = 0; offset < 20; ++offset) {
      for (std::uint64_t size : sizes) {
        for (std::uint64_t threads : thread_counts) {
          AlignedBytes memory(offset + size + 32);
          unsigned char* dst = memory.data() + offset;
          const ByteRangeSplit split = split_byte_range(reinterpret_cast<std::uintptr_t>(dst), size);
          run_grid(threads, [&](std::uint64_t thread, std::uint64_t count) {
            ferry::cuda::fill_thread(dst, pattern, split, thread, count);
          });
          std::uint64_t wrong = 0;
          for (std::uint64_t i = 0; i < offset; ++i) wrong += memory.data()[i] != kGuard;
          for (std::uint64_t i = 0; i < size; ++i) wrong += dst[i] != expected_fill_byte(pattern, i);
          for (std::uint64_t i = 0; i < 32; ++i) wrong += dst[size + i] != kGuard;
          INFO("pattern " << pattern << ", offset " << offset << ", size " << size << ", threads "
                          << threads);
          CHECK(wrong == 0);
        }
      }
    }
  }
}

TEST_CASE("CUDA kernels: copy moves every byte for any pair of alignments") {
  const std::uint64_t sizes[] = {1, 3, 15, 16, 17, 33, 64, 100, 257, 1000};
  for (std::uint64_t src_offset = 0; src_offset < 18; ++src_offset) {
    for (std::uint64_t dst_offset = 0; dst_offset < 18; ++dst_offset) {
      for (std::uint64_t size : sizes) {
        AlignedBytes source(src_offset + size);
        AlignedBytes target(dst_offset + size + 32);
        unsigned char* src = source.data() + src_offset;
        for (std::uint64_t i = 0; i < size; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
        unsigned char* dst = target.data() + dst_offset;
        const auto dst_address = reinterpret_cast<std::uintptr_t>(dst);
        const bool vectorized = dst_address % 16 == reinterpret_cast<std::uintptr_t>(src) % 16;
        const ByteRangeSplit split = split_byte_range(dst_address, size);
        run_grid(37, [&](std::uint64_t thread, std::uint64_t count) {
          ferry::cuda::copy_thread(dst, src, size, vectorized, split, thread, count);
        });
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < dst_offset; ++i) wrong += target.data()[i] != kGuard;
        for (std::uint64_t i = 0; i < size; ++i) wrong += dst[i] != src[i];
        for (std::uint64_t i = 0; i < 32; ++i) wrong += dst[size + i] != kGuard;
        INFO("src offset " << src_offset << ", dst offset " << dst_offset << ", size " << size);
        CHECK(wrong == 0);
      }
    }
  }
}
