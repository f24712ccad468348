// Ops and what each device can run (Device::supports): every op is supported, or refused when
// recorded with the same reason; the refusal changes nothing. ctest also runs this (with the
// normalize, ingress and binary_quantize tests) on Vulkan with
// FERRY_VULKAN_HIDE_FEATURES=shaderInt64, where normalize is refused and the tests needing it are
// skipped and counted, while binary_quantize, which needs no optional feature, runs.
#include <algorithm>
#include <optional>
#include <string>

#include "device_io.hpp"
#include "harness.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::Status;
using ferry_test::BackendUnderTest;

TEST_CASE("ops: every op is supported, or refused when recorded with the reason supports() gives") {
  const std::vector<std::string_view> ops = ferry::list_ops();
  CHECK(std::find(ops.begin(), ops.end(), "fill") != ops.end());
  CHECK(std::find(ops.begin(), ops.end(), "normalize") != ops.end());
  CHECK(std::find(ops.begin(), ops.end(), "binary_quantize") != ops.end());

  ferry_test::for_each_backend([&](BackendUnderTest& t) {
    CHECK_ERROR(t.device.supports("no such op"), ErrorCode::invalid_argument);
    for (const std::string_view op : ops) {
      const Status supported = t.device.supports(op);
      INFO("op " << op << ": " << supported.to_string());
      CHECK((supported.ok() || supported.code() == ErrorCode::unavailable));
      // CPU and CUDA run every op; a Vulkan device may lack a shader's optional features.
      if (t.backend != ferry::Backend::vulkan) CHECK_OK(supported);
    }

    Buffer target = REQUIRE_VALUE(t.device.create_buffer(32 * 32 * 3 * 4));
    Buffer source = REQUIRE_VALUE(t.device.create_buffer(4096));
    const Status fill_support = t.device.supports("fill");
    CommandList fills;
    const Status filled = ferry::fill(fills, target, 0, 4096, 7);
    CHECK(filled.code() == fill_support.code());
    if (!fill_support.ok()) CHECK(filled.message().find(fill_support.message()) != std::string::npos);

    ferry::NormalizeParams params;
    params.input = {1, 32, 32, 3, ferry::ImageLayout::nhwc};
    const Status normalize_support = t.device.supports("normalize");
    CommandList normalizes;
    const Status normalized = ferry::normalize(normalizes, source, 0, target, 0, params);
    CHECK(normalized.code() == normalize_support.code());
    CHECK(normalizes.empty() == !normalize_support.ok());
    ferry::IngressOptions options;
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto pipeline = ferry::IngressPipeline::create(
        t.device, options, [](std::uint64_t) -> ferry::Result<std::optional<ferry::HostBatch>> {
          return std::optional<ferry::HostBatch>();
        });
    CHECK(pipeline.status().code() == normalize_support.code());
    if (!normalize_support.ok()) {
      MESSAGE("normalize refused on " << ferry::to_string(t.backend) << ": "
                                      << normalize_support.message());
      CHECK(normalized.message().find(normalize_support.message()) != std::string::npos);
      CHECK(pipeline.status().message().find(normalize_support.message()) != std::string::npos);
    }
    // binary_quantize's shader needs no optional feature: every device runs it.
    CHECK_OK(t.device.supports("binary_quantize"));
    ferry::BinaryQuantizeParams quantize;
    quantize.rows = 4;
    quantize.dims = 100;
    CommandList quantizes;
    CHECK_OK(ferry::binary_quantize(quantizes, source, 0, target, 0, quantize));
    CHECK(quantizes.size() == 1);
    // A refusal changes nothing: the device and its queues go on.
    CHECK_OK(ferry_test::fill_and_wait(t.device, target, 0, 64, 3));
  });
}
