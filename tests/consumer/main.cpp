// The smallest program against ferry as a library: open the CPU backend, send bytes up and back
// through staging pools, check them. Exit status 0 only when every byte came back.
#include <cstdio>
#include <vector>

#include "ferry/ferry.hpp"
#include "ferry/version.hpp"

int main() {
  std::printf("ferry %s\n", ferry::kVersionString);
  auto device = ferry::Device::open("cpu");
  if (!device.ok()) return std::printf("%s\n", device.status().to_string().c_str()), 1;
  auto up = device->create_staging_pool({.kind = ferry::MemoryKind::host_upload});
  auto down = device->create_staging_pool({.kind = ferry::MemoryKind::host_readback});
  std::vector<std::byte> data(100'003), back(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7 + 1);
  auto buffer = device->create_buffer(data.size());
  if (!up.ok() || !down.ok() || !buffer.ok()) return std::printf("set-up failed\n"), 1;
  auto landed = ferry::upload(device->queue(ferry::QueueKind::upload), *up, data, *buffer, 0);
  if (!landed.ok()) return std::printf("%s\n", landed.status().to_string().c_str()), 1;
  const ferry::Status status = ferry::download(device->queue(ferry::QueueKind::download), *down,
                                               *buffer, 0, back, {.wait = {*landed}});
  if (!status.ok()) return std::printf("%s\n", status.to_string().c_str()), 1;
  if (back != data) return std::printf("data mismatch\n"), 1;
  std::printf("round trip of %zu bytes: ok\n", data.size());
  return 0;
}
