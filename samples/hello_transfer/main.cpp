// hello_transfer: the smallest complete use of ferry.
//
// Uploads a host array through a staging pool on the upload queue, stamps part of it with the
// fill kernel on the compute queue, and downloads it on the download queue. The three queues are
// chained by one timeline, with no host round trip in between; the host waits once at the end.
//
//   hello_transfer [auto|cpu|vulkan|cuda] [--trace FILE]
//
// --trace writes a trace of the device's work to FILE (ui.perfetto.dev opens it).
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

int fail(const ferry::Status& status) {
  std::fprintf(stderr, "hello_transfer: %s\n", status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ferry;
  const char* backend = argc > 1 ? argv[1] : "auto";
  DeviceOptions options;
  if (argc == 4 && std::strcmp(argv[2], "--trace") == 0) {
    options.trace_path = argv[3];
  } else if (argc > 2) {
    std::fprintf(stderr, "usage: hello_transfer [auto|cpu|vulkan|cuda] [--trace FILE]\n");
    return 2;
  }

  auto device = Device::open(backend, 0, options);
  if (!device.ok()) return fail(device.status());
  std::printf("device: %s (%s)\n", device->info().name.c_str(),
              std::string(to_string(device->backend())).c_str());

  constexpr std::size_t kBytes = 3'000'001;  // odd on purpose
  std::vector<std::byte> input(kBytes);
  std::iota(reinterpret_cast<unsigned char*>(input.data()),
            reinterpret_cast<unsigned char*>(input.data()) + kBytes, static_cast<unsigned char>(0));

  auto upload_pool = device->create_staging_pool({.kind = MemoryKind::host_upload});
  auto readback_pool = device->create_staging_pool({.kind = MemoryKind::host_readback});
  auto buffer = device->create_buffer(kBytes);
  auto steps = device->create_timeline();
  if (!upload_pool.ok()) return fail(upload_pool.status());
  if (!readback_pool.ok()) return fail(readback_pool.status());
  if (!buffer.ok()) return fail(buffer.status());
  if (!steps.ok()) return fail(steps.status());

  // 1: upload (signals step 1).
  auto uploaded = upload(device->queue(QueueKind::upload), *upload_pool, input, *buffer, 0,
                         {.wait = {}, .signal = {{*steps, 1}}});
  if (!uploaded.ok()) return fail(uploaded.status());

  // 2: stamp bytes [10, 21) with a pattern on the compute queue once the upload is done.
  CommandList stamp;
  if (Status s = ferry::fill(stamp, *buffer, 10, 11, 0xA1B2C3D4); !s.ok()) return fail(s);
  auto stamped = device->queue(QueueKind::compute)
                     .submit(std::move(stamp), {.wait = {{*steps, 1}}, .signal = {{*steps, 2}}});
  if (!stamped.ok()) return fail(stamped.status());

  // 3: download after step 2; download() returns when the bytes are in `output`.
  std::vector<std::byte> output(kBytes);
  if (Status s = download(device->queue(QueueKind::download), *readback_pool, *buffer, 0, output,
                          {.wait = {{*steps, 2}}, .signal = {}});
      !s.ok()) {
    return fail(s);
  }

  // Check against what the host expects.
  std::vector<std::byte> expected = input;
  const unsigned char pattern[4] = {0xD4, 0xC3, 0xB2, 0xA1};
  for (std::size_t i = 0; i < 11; ++i) expected[10 + i] = std::byte{pattern[i % 4]};
  const bool same = std::memcmp(expected.data(), output.data(), kBytes) == 0;
  std::printf("round trip of %zu bytes through upload -> fill -> download: %s\n", kBytes,
              same ? "correct" : "WRONG");
  return same ? 0 : 1;
}
