// parallel_memcpy (core/host_workers.hpp), both ways of storing: every byte of awkward sizes at
// awkward offsets arrives, and nothing outside the target range is written.
#include <doctest/doctest.h>

#include <cstddef>
#include <random>
#include <vector>

#include "core/host_workers.hpp"

using ferry::detail::HostStores;
using ferry::detail::parallel_memcpy;

TEST_CASE("host copies: cached and streaming stores copy exactly the bytes asked") {
  std::mt19937_64 rng(std::random_device{}());
  for (HostStores stores : {HostStores::cached, HostStores::streaming}) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{17},
                              std::size_t{4099}, std::size_t{(1u << 20) + 13},
                              std::size_t{(3u << 20) + 4093}}) {
      for (std::size_t dst_offset : {0, 1, 7, 16, 33}) {
        const std::size_t src_offset = (dst_offset * 5 + 3) % 16;
        INFO("stores " << (stores == HostStores::streaming ? "streaming" : "cached") << ", "
                       << bytes << " bytes, target offset " << dst_offset << ", source offset "
                       << src_offset);
        std::vector<std::byte> src(bytes + 64), dst(bytes + 64, std::byte{0xA5});
        for (std::byte& b : src) b = static_cast<std::byte>(rng());
        parallel_memcpy(dst.data() + dst_offset, src.data() + src_offset, bytes, 4, nullptr, stores);
        bool same = true, untouched = true;
        for (std::size_t i = 0; i < dst.size(); ++i) {
          if (i >= dst_offset && i < dst_offset + bytes) {
            same = same && dst[i] == src[src_offset + i - dst_offset];
          } else {
            untouched = untouched && dst[i] == std::byte{0xA5};
          }
        }
        CHECK(same);
        CHECK(untouched);
      }
    }
  }
}
