// Names of the vocabulary enums (used in messages, `ferry info` and test output).
#include <doctest/doctest.h>

#include "ferry/types.hpp"

TEST_CASE("backend names are the names Device::open accepts") {
  CHECK(ferry::to_string(ferry::Backend::cpu) == "cpu");
  CHECK(ferry::to_string(ferry::Backend::vulkan) == "vulkan");
  CHECK(ferry::to_string(ferry::Backend::cuda) == "cuda");
}

TEST_CASE("queue and memory kinds have names") {
  CHECK(ferry::to_string(ferry::QueueKind::compute) == "compute");
  CHECK(ferry::to_string(ferry::QueueKind::upload) == "upload");
  CHECK(ferry::to_string(ferry::QueueKind::download) == "download");
  CHECK(ferry::to_string(ferry::MemoryKind::device) == "device");
  CHECK(ferry::to_string(ferry::MemoryKind::host_upload) == "host_upload");
  CHECK(ferry::to_string(ferry::MemoryKind::host_readback) == "host_readback");
}

TEST_CASE("the infinite timeout is the largest duration") {
  CHECK(ferry::kInfinite == ferry::Timeout::max());
  CHECK(static_cast<int>(ferry::QueueKind::download) + 1 == ferry::kQueueKindCount);
}
