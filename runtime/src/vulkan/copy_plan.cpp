#include "vulkan/copy_plan.hpp"

#include <algorithm>
#include <string>

#include "core/checked.hpp"

namespace ferry::vulkan {

using detail::round_down;

namespace {

constexpr std::uint64_t kBlock = 16;

// Block granularity at least; Vulkan guarantees the offset alignment is a power of two.
std::uint64_t window_alignment(const CopyLimits& limits) {
  return std::max(limits.offset_alignment, kBlock);
}

// Under 2^31 bytes, so that block indices fit the shader's 32-bit push constants.
std::uint64_t max_window(const CopyLimits& limits) {
  return round_down(std::min<std::uint64_t>(limits.max_window_bytes, std::uint64_t{1} << 31),
                    window_alignment(limits));
}

}  // namespace

bool shader_can_copy(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t size,
                     const CopyLimits& limits) {
  return src_offset % kBlock == 0 && dst_offset % kBlock == 0 && size >= kBlock &&
         max_window(limits) >= window_alignment(limits) + kBlock && limits.workgroup_size != 0 &&
         limits.unroll != 0;
}

CopyPlan plan_shader_copy(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t size,
                          const CopyLimits& limits) {
  CopyPlan plan;
  if (!shader_can_copy(src_offset, dst_offset, size, limits)) return plan;
  const std::uint64_t alignment = window_alignment(limits);
  const std::uint64_t window_limit = max_window(limits);
  const std::uint64_t bulk = round_down(size, kBlock);
  const std::uint64_t per_group = std::uint64_t{limits.workgroup_size} * limits.unroll;
  for (std::uint64_t done = 0; done < bulk;) {
    const std::uint64_t src = src_offset + done;
    const std::uint64_t dst = dst_offset + done;
    CopyDispatch dispatch;
    dispatch.src_window_offset = round_down(src, alignment);
    dispatch.dst_window_offset = round_down(dst, alignment);
    const std::uint64_t lead = std::max(src - dispatch.src_window_offset,
                                        dst - dispatch.dst_window_offset);  // < alignment
    const std::uint64_t piece = std::min(bulk - done, round_down(window_limit - lead, kBlock));
    dispatch.src_window_size = src - dispatch.src_window_offset + piece;
    dispatch.dst_window_size = dst - dispatch.dst_window_offset + piece;
    dispatch.src_first = static_cast<std::uint32_t>((src - dispatch.src_window_offset) / kBlock);
    dispatch.dst_first = static_cast<std::uint32_t>((dst - dispatch.dst_window_offset) / kBlock);
    dispatch.count = static_cast<std::uint32_t>(piece / kBlock);
    dispatch.group_count = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
        (dispatch.count + per_group - 1) / per_group, 1,
        std::max<std::uint32_t>(limits.max_group_count, 1)));
    plan.dispatches.push_back(dispatch);
    done += piece;
  }
  plan.tail_offset = bulk;
  return plan;
}

Result<CopySettings> parse_copy_settings(std::string_view spec) {
  auto bad = [&](const std::string& why) {
    return Status(ErrorCode::invalid_argument,
                  "FERRY_VULKAN_COPIES: '" + std::string(spec) + "': " + why +
                      " (engine, shader or shader,groups=N)");
  };
  CopySettings settings;
  const std::size_t comma = spec.find(',');
  const std::string_view mode = spec.substr(0, comma);
  if (mode == "engine") {
    if (comma != std::string_view::npos) return bad("engine takes no options");
    return settings;
  }
  if (mode != "shader") return bad("unknown mode '" + std::string(mode) + "'");
  settings.shader = true;
  if (comma == std::string_view::npos) return settings;
  const std::string_view option = spec.substr(comma + 1);
  constexpr std::string_view kGroups = "groups=";
  if (!option.starts_with(kGroups) || option.size() == kGroups.size() ||
      option.size() > kGroups.size() + 5) {
    return bad("expected groups=N after shader");
  }
  std::uint32_t groups = 0;
  for (const char c : option.substr(kGroups.size())) {
    if (c < '0' || c > '9') return bad("groups=N takes a number");
    groups = groups * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (groups < 1 || groups > 65535) return bad("groups must be 1..65535");
  settings.group_cap = groups;
  return settings;
}

}  // namespace ferry::vulkan
