// Queue-family planning of the Vulkan backend (pure function, no GPU): NVIDIA H100 and lavapipe
// tables measured on the test GPU (docs/PERFORMANCE.md), plus compute-only and degenerate devices.
#include <doctest/doctest.h>

#include <vector>

#include "common/printers.hpp"
#include "vulkan/queue_families.hpp"

namespace {

using ferry::ErrorCode;
using ferry::QueueAssignment;
using ferry::QueueFamilyInfo;
using ferry::QueueKind;
using ferry::vulkan::plan_queues;
using ferry::vulkan::QueuePlan;

QueueFamilyInfo family(std::uint32_t index, std::uint32_t count, bool graphics, bool compute,
                       bool transfer) {
  QueueFamilyInfo info;
  info.index = index;
  info.queue_count = count;
  info.graphics = graphics;
  info.compute = compute;
  info.transfer = transfer;
  return info;
}

void check_queue(const QueuePlan& plan, QueueKind kind, std::uint32_t family, std::uint32_t index,
                 bool shared) {
  CAPTURE(static_cast<int>(kind));
  const QueueAssignment& queue = plan[kind];
  CHECK(queue.kind == kind);
  CHECK(queue.family == family);
  CHECK(queue.index == index);
  CHECK(queue.shared == shared);
}

// Every assigned queue must be created, and nothing more.
void check_creation_matches(const QueuePlan& plan) {
  for (const QueueAssignment& queue : plan.queues) {
    bool created = false;
    for (const auto& family : plan.families) {
      if (family.family == queue.family) created = queue.index < family.queue_count;
    }
    CHECK(created);
  }
  for (std::size_t i = 1; i < plan.families.size(); ++i) {
    CHECK(plan.families[i - 1].family < plan.families[i].family);
  }
}

}  // namespace

TEST_CASE("queue families: NVIDIA H100 uses the two-queue transfer-only family for copies") {
  const std::vector<QueueFamilyInfo> families = {
      family(0, 16, true, true, true),   // graphics + compute + transfer
      family(1, 2, false, false, true),  // transfer only: the copy engines
      family(2, 8, false, true, true),   // async compute
      family(3, 7, false, false, true),
      family(4, 1, false, false, true),
  };
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 0, 0, false);
  check_queue(*plan, QueueKind::upload, 1, 0, false);
  check_queue(*plan, QueueKind::download, 1, 1, false);
  REQUIRE(plan->families.size() == 2);
  CHECK(plan->families[0].family == 0);
  CHECK(plan->families[0].queue_count == 1);
  CHECK(plan->families[1].family == 1);
  CHECK(plan->families[1].queue_count == 2);
  CHECK(plan->family_indices() == std::vector<std::uint32_t>{0, 1});
  check_creation_matches(*plan);
}

TEST_CASE("queue families: copy queues prefer families whose timestamps keep more bits") {
  auto with_bits = [](QueueFamilyInfo info, std::uint32_t bits) {
    info.timestamp_valid_bits = bits;
    return info;
  };
  // Transfer-only families of 32, 64 and 0 bits (in that order): the 64-bit one serves both copy
  // queues.
  const std::vector<QueueFamilyInfo> families = {
      with_bits(family(0, 4, true, true, true), 64),
      with_bits(family(1, 1, false, false, true), 32),
      with_bits(family(2, 2, false, false, true), 64),
      with_bits(family(3, 2, false, false, true), 0),
  };
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 0, 0, false);
  check_queue(*plan, QueueKind::upload, 2, 0, false);
  check_queue(*plan, QueueKind::download, 2, 1, false);
  check_creation_matches(*plan);

  // One queue in the 64-bit family: download takes the next best, a 32-bit family, not the
  // family without timestamps; equal bits keep the device's order.
  const std::vector<QueueFamilyInfo> fewer = {
      with_bits(family(0, 4, true, true, true), 64),
      with_bits(family(1, 1, false, false, true), 0),
      with_bits(family(2, 1, false, false, true), 32),
      with_bits(family(3, 1, false, false, true), 64),
      with_bits(family(4, 1, false, false, true), 32),
  };
  const auto second = plan_queues(fewer);
  REQUIRE(second.ok());
  check_queue(*second, QueueKind::upload, 3, 0, false);
  check_queue(*second, QueueKind::download, 2, 0, false);
  check_creation_matches(*second);
}

TEST_CASE("queue families: lavapipe's single queue is shared by all three") {
  const std::vector<QueueFamilyInfo> families = {family(0, 1, true, true, true)};
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 0, 0, true);
  check_queue(*plan, QueueKind::upload, 0, 0, true);
  check_queue(*plan, QueueKind::download, 0, 0, true);
  REQUIRE(plan->families.size() == 1);
  CHECK(plan->families[0].queue_count == 1);
  CHECK(plan->family_indices() == std::vector<std::uint32_t>{0});
}

TEST_CASE("queue families: one transfer-only queue serves upload, download shares it") {
  const std::vector<QueueFamilyInfo> families = {
      family(0, 1, true, true, true),
      family(1, 1, false, false, true),
  };
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 0, 0, false);
  check_queue(*plan, QueueKind::upload, 1, 0, true);
  check_queue(*plan, QueueKind::download, 1, 0, true);
  check_creation_matches(*plan);
}

TEST_CASE("queue families: two single-queue transfer-only families give one each") {
  const std::vector<QueueFamilyInfo> families = {
      family(0, 4, true, true, true),
      family(1, 1, false, false, true),
      family(2, 1, false, false, true),
  };
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 0, 0, false);
  check_queue(*plan, QueueKind::upload, 1, 0, false);
  check_queue(*plan, QueueKind::download, 2, 0, false);
  CHECK(plan->family_indices() == std::vector<std::uint32_t>{0, 1, 2});
  check_creation_matches(*plan);
}

TEST_CASE("queue families: no transfer-only family falls back to other families, then more queues") {
  SUBCASE("another family") {
    // AMD-like without a transfer-only family: graphics family and a compute family.
    const std::vector<QueueFamilyInfo> families = {
        family(0, 1, true, true, true),
        family(1, 4, false, true, true),
    };
    const auto plan = plan_queues(families);
    REQUIRE(plan.ok());
    check_queue(*plan, QueueKind::compute, 0, 0, false);
    check_queue(*plan, QueueKind::upload, 1, 0, false);
    check_queue(*plan, QueueKind::download, 1, 1, false);
    check_creation_matches(*plan);
  }
  SUBCASE("more queues of the compute family") {
    const std::vector<QueueFamilyInfo> families = {family(0, 3, true, true, true)};
    const auto plan = plan_queues(families);
    REQUIRE(plan.ok());
    check_queue(*plan, QueueKind::compute, 0, 0, false);
    check_queue(*plan, QueueKind::upload, 0, 1, false);
    check_queue(*plan, QueueKind::download, 0, 2, false);
    REQUIRE(plan->families.size() == 1);
    CHECK(plan->families[0].queue_count == 3);
  }
  SUBCASE("two queues of the compute family: download shares upload's") {
    const std::vector<QueueFamilyInfo> families = {family(0, 2, true, true, true)};
    const auto plan = plan_queues(families);
    REQUIRE(plan.ok());
    check_queue(*plan, QueueKind::compute, 0, 0, false);
    check_queue(*plan, QueueKind::upload, 0, 1, true);
    check_queue(*plan, QueueKind::download, 0, 1, true);
  }
}

TEST_CASE("queue families: a compute-only family without the transfer bit still copies") {
  // Compute families may leave out VK_QUEUE_TRANSFER_BIT: they can copy anyway.
  const std::vector<QueueFamilyInfo> families = {family(0, 1, false, true, false)};
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 0, 0, true);
  check_queue(*plan, QueueKind::upload, 0, 0, true);
  check_queue(*plan, QueueKind::download, 0, 0, true);
}

TEST_CASE("queue families: the first compute family is used even when listed after others") {
  const std::vector<QueueFamilyInfo> families = {
      family(0, 2, false, false, true),
      family(1, 1, false, true, true),
  };
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());
  check_queue(*plan, QueueKind::compute, 1, 0, false);
  check_queue(*plan, QueueKind::upload, 0, 0, false);
  check_queue(*plan, QueueKind::download, 0, 1, false);
  CHECK(plan->family_indices() == std::vector<std::uint32_t>{0, 1});
  check_creation_matches(*plan);
}

TEST_CASE("queue families: degenerate devices are rejected with a reason") {
  SUBCASE("no families") {
    const auto plan = plan_queues({});
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().code() == ErrorCode::unavailable);
    CHECK(plan.status().message().find("compute") != std::string::npos);
  }
  SUBCASE("transfer and graphics only") {
    const std::vector<QueueFamilyInfo> families = {
        family(0, 1, true, false, true),
        family(1, 2, false, false, true),
    };
    const auto plan = plan_queues(families);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().code() == ErrorCode::unavailable);
  }
  SUBCASE("a compute family with no queues") {
    const std::vector<QueueFamilyInfo> families = {family(0, 0, true, true, true)};
    CHECK_FALSE(plan_queues(families).ok());
  }
}

TEST_CASE("queue families: FERRY_VULKAN_QUEUES overrides chosen queues and rejects bad specs") {
  const std::vector<QueueFamilyInfo> families = {
      family(0, 16, true, true, true),
      family(1, 2, false, false, true),
      family(2, 8, false, true, true),
      family(3, 7, false, false, true),
      family(4, 1, false, false, true),
  };
  const auto plan = plan_queues(families);
  REQUIRE(plan.ok());

  const auto moved = override_queues(families, *plan, "download=3.0,compute=2.1");
  REQUIRE(moved.ok());
  check_queue(*moved, QueueKind::compute, 2, 1, false);
  check_queue(*moved, QueueKind::upload, 1, 0, false);
  check_queue(*moved, QueueKind::download, 3, 0, false);
  CHECK(moved->family_indices() == std::vector<std::uint32_t>{1, 2, 3});
  check_creation_matches(*moved);

  const auto shared = override_queues(families, *plan, "upload=1.1");
  REQUIRE(shared.ok());
  check_queue(*shared, QueueKind::upload, 1, 1, true);
  check_queue(*shared, QueueKind::download, 1, 1, true);

  // Malformed (wrong on every device): invalid_argument. Well formed but naming a queue this
  // device lacks: failed_precondition (the device is passed over, other devices may fit).
  for (const char* bad : {"upload", "upload=1", "copy=1.0", "upload=a.b", "upload=1.",
                          "upload=99999999999999999999.0", "upload=-1.0"}) {
    CAPTURE(bad);
    const auto result = override_queues(families, *plan, bad);
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == ErrorCode::invalid_argument);
    CHECK(result.status().message().find("FERRY_VULKAN_QUEUES") != std::string::npos);
  }
  for (const char* missing : {"upload=5.0", "upload=4.1", "compute=1.0"}) {
    CAPTURE(missing);
    const auto result = override_queues(families, *plan, missing);
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == ErrorCode::failed_precondition);
  }
  CHECK(override_queues(families, *plan, "upload=1.0,").ok());  // a trailing comma is harmless
}
