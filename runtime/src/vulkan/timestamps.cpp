#include "vulkan/timestamps.hpp"

#include <string>

#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

// Submissions timed at once per queue; more in flight go untimed (and are missing from the trace).
constexpr std::uint32_t kPairs = 1024;
// How often calibrated timestamps are taken again: drift between the clocks stays small, and a
// 32-bit counter at 1 GHz (4.3 s per wrap) is never more than half a wrap from its calibration.
constexpr std::int64_t kCalibrateEveryNs = 1'000'000'000;

}  // namespace

Status QueueTimer::create(const DeviceContext& context, QueueKind kind, std::uint32_t valid_bits,
                          backend::ExecutionTimes* times) {
  if (valid_bits == 0) {
    return Status(ErrorCode::unavailable,
                  "its queue family has no timestamps (timestampValidBits 0)");
  }
  if (!context.host_query_reset) {
    return Status(ErrorCode::unavailable, "the device has no hostQueryReset");
  }
  if (!(context.timestamp_period > 0)) {
    return Status(ErrorCode::unavailable, "the device reports no timestampPeriod");
  }
  VkQueryPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = 2 * kPairs;
  FERRY_VK_RETURN_IF_ERROR(context.vk.vkCreateQueryPool(context.device, &info, nullptr, &pool_));
  context.vk.vkResetQueryPool(context.device, pool_, 0, info.queryCount);
  context_ = &context;
  kind_ = kind;
  times_ = times;
  clock_.period_ns = context.timestamp_period;
  clock_.valid_bits = valid_bits;
  free_.reserve(kPairs);
  for (std::uint32_t pair = kPairs; pair-- > 0;) free_.push_back(2 * pair);
  return Status();
}

void QueueTimer::destroy() noexcept {
  if (pool_ != VK_NULL_HANDLE) context_->vk.vkDestroyQueryPool(context_->device, pool_, nullptr);
  pool_ = VK_NULL_HANDLE;
  pending_.clear();
  free_.clear();
}

std::optional<TimestampPair> QueueTimer::take() {
  if (!active() || free_.empty()) return std::nullopt;
  const std::uint32_t first = free_.back();
  free_.pop_back();
  return TimestampPair{pool_, first};
}

void QueueTimer::give_back(const TimestampPair& pair) { free_.push_back(pair.first); }

void QueueTimer::submitted(const TimestampPair& pair, std::uint64_t progress, std::uint64_t id,
                           std::int64_t dispatch_ns) {
  pending_.push_back({progress, id, pair.first, dispatch_ns});
}

void QueueTimer::refresh_calibration(std::int64_t now_ns) {
  if (calibrated_ && now_ns - clock_.host_ns < kCalibrateEveryNs) return;
  VkCalibratedTimestampInfoEXT domains[2]{};
  domains[0].sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT;
  domains[0].timeDomain = VK_TIME_DOMAIN_DEVICE_EXT;
  domains[1].sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT;
  domains[1].timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
  std::uint64_t stamps[2] = {};
  std::uint64_t max_deviation = 0;
  if (context_->get_calibrated_timestamps(context_->device, 2, domains, stamps, &max_deviation) !=
      VK_SUCCESS) {
    return;  // keeps the last calibration (or falls back to the first submission's)
  }
  clock_.device_ticks = stamps[0] & valid_mask(clock_.valid_bits);
  clock_.host_ns = static_cast<std::int64_t>(stamps[1]);
  calibrated_ = true;
}

void QueueTimer::collect(std::uint64_t completed) {
  const VolkDeviceTable& vk = context_->vk;
  while (!pending_.empty() && pending_.front().progress <= completed) {
    const Pending done = pending_.front();
    pending_.pop_front();
    // [start, available, end, available]: both written once the submission completed.
    std::uint64_t results[4] = {};
    const VkResult read = vk.vkGetQueryPoolResults(
        context_->device, pool_, done.first, 2, sizeof results, results, 2 * sizeof(std::uint64_t),
        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
    if (read == VK_SUCCESS && results[1] != 0 && results[3] != 0) {
      const std::uint64_t mask = valid_mask(clock_.valid_bits);
      if (context_->get_calibrated_timestamps != nullptr) {
        refresh_calibration(detail::trace_now_ns());
      }
      if (context_->get_calibrated_timestamps == nullptr || !calibrated_) {
        // No calibrated timestamps: no submission starts before its dispatch, so the clocks'
        // offset is at least each one's dispatch less its start. The running maximum of those
        // bounds converges to the offset (up to the quickest start seen), and each span is
        // placed with every bound known when it is reported.
        if (!calibrated_ ||
            device_to_host_ns(clock_, results[0] & mask, done.dispatch_ns) < done.dispatch_ns) {
          clock_.device_ticks = results[0] & mask;
          clock_.host_ns = done.dispatch_ns;
          calibrated_ = true;
        }
      }
      const HostSpan span =
          device_span_to_host(clock_, results[0] & mask, results[2] & mask, done.dispatch_ns);
      times_->submission_ran(kind_, done.id, span.start_ns, span.end_ns);
    }
    vk.vkResetQueryPool(context_->device, pool_, done.first, 2);
    free_.push_back(done.first);
  }
}

}  // namespace ferry::vulkan
