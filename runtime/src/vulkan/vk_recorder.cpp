#include "vulkan/vk_recorder.hpp"

#include <algorithm>
#include <vector>

#include "vulkan/vk_buffer.hpp"
#include "vulkan/vk_status.hpp"

namespace ferry::vulkan {
namespace {

// What one command does, for hazard tracking.
struct CommandAccess {
  VkPipelineStageFlags2 stage = 0;
  VkAccessFlags2 access = 0;  // every access the command makes (for the barrier's dst scope)
  VkAccessFlags2 write_access = 0;
  const VulkanBuffer* read = nullptr;
  const VulkanBuffer* written = nullptr;
};

CommandAccess access_of(const backend::Command& command) {
  CommandAccess access;
  if (const auto* copy = std::get_if<backend::CopyCommand>(&command)) {
    access.stage = VK_PIPELINE_STAGE_2_COPY_BIT;
    access.access = VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT;
    access.write_access = VK_ACCESS_2_TRANSFER_WRITE_BIT;
    access.read = static_cast<const VulkanBuffer*>(copy->src);
    access.written = static_cast<const VulkanBuffer*>(copy->dst);
  } else if (const auto* fill = std::get_if<backend::FillCommand>(&command)) {
    // The edge words are read-modify-write (atomics).
    access.stage = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
    access.access = VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
    access.write_access = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
    access.written = static_cast<const VulkanBuffer*>(fill->dst);
  } else {
    const auto& normalize = std::get<backend::NormalizeCommand>(command);
    access.stage = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
    access.access = VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
    access.write_access = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
    access.read = static_cast<const VulkanBuffer*>(normalize.src);
    access.written = static_cast<const VulkanBuffer*>(normalize.dst);
  }
  return access;
}

// Accesses since the last barrier.
class HazardTracker {
 public:
  // True when `command` must wait for accesses recorded since the last barrier.
  bool conflicts(const CommandAccess& command) const {
    auto contains = [](const std::vector<const VulkanBuffer*>& set, const VulkanBuffer* buffer) {
      return buffer != nullptr && std::find(set.begin(), set.end(), buffer) != set.end();
    };
    return contains(written_, command.read) || contains(written_, command.written) ||
           contains(read_, command.written);
  }

  void add(const CommandAccess& command) {
    stages_ |= command.stage;
    write_access_ |= command.write_access;
    if (command.read != nullptr) read_.push_back(command.read);
    if (command.written != nullptr) written_.push_back(command.written);
  }

  // A barrier from everything since the last barrier to every later command; resets the
  // tracking. The second scope is all of `later` (the stages and accesses of the whole
  // submission), not just the next command: later commands rely on this barrier too.
  VkMemoryBarrier2 barrier(const CommandAccess& later) {
    VkMemoryBarrier2 barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
    barrier.srcStageMask = stages_;
    barrier.srcAccessMask = write_access_;
    barrier.dstStageMask = later.stage;
    barrier.dstAccessMask = later.access;
    stages_ = 0;
    write_access_ = 0;
    read_.clear();
    written_.clear();
    return barrier;
  }

 private:
  VkPipelineStageFlags2 stages_ = 0;
  VkAccessFlags2 write_access_ = 0;
  std::vector<const VulkanBuffer*> read_;
  std::vector<const VulkanBuffer*> written_;
};

void record_barrier(const VolkDeviceTable& vk, VkCommandBuffer command_buffer,
                    const VkMemoryBarrier2& barrier) {
  VkDependencyInfo dependency{};
  dependency.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO;
  dependency.memoryBarrierCount = 1;
  dependency.pMemoryBarriers = &barrier;
  vk.vkCmdPipelineBarrier2(command_buffer, &dependency);
}

// Records between vkBeginCommandBuffer and vkEndCommandBuffer.
Status record_body(const DeviceContext& context, const Pipelines& pipelines,
                   VkCommandBuffer command_buffer, std::span<const backend::Command> commands) {
  const VolkDeviceTable& vk = context.vk;
  // Earlier submissions on this VkQueue, whatever they did.
  VkMemoryBarrier2 start{};
  start.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
  start.srcStageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  start.srcAccessMask = VK_ACCESS_2_MEMORY_WRITE_BIT;
  start.dstStageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  start.dstAccessMask = VK_ACCESS_2_MEMORY_READ_BIT | VK_ACCESS_2_MEMORY_WRITE_BIT;
  record_barrier(vk, command_buffer, start);

  // Stages and accesses of the whole submission (only those its queue supports).
  CommandAccess all;
  for (const backend::Command& command : commands) {
    const CommandAccess access = access_of(command);
    all.stage |= access.stage;
    all.access |= access.access;
    all.write_access |= access.write_access;
  }

  HazardTracker hazards;
  enum class BoundPipeline { none, fill, normalize };
  BoundPipeline bound = BoundPipeline::none;
  for (const backend::Command& command : commands) {
    const CommandAccess access = access_of(command);
    if (hazards.conflicts(access)) record_barrier(vk, command_buffer, hazards.barrier(all));
    hazards.add(access);

    if (const auto* copy = std::get_if<backend::CopyCommand>(&command)) {
      VkBufferCopy region{};
      region.srcOffset = copy->src_offset;
      region.dstOffset = copy->dst_offset;
      region.size = copy->size;
      vk.vkCmdCopyBuffer(command_buffer, static_cast<const VulkanBuffer*>(copy->src)->handle(),
                         static_cast<const VulkanBuffer*>(copy->dst)->handle(), 1, &region);
    } else if (const auto* fill = std::get_if<backend::FillCommand>(&command)) {
      if (bound != BoundPipeline::fill) {
        pipelines.fill.bind(command_buffer);
        bound = BoundPipeline::fill;
      }
      FERRY_RETURN_IF_ERROR(pipelines.fill.record(
          command_buffer, static_cast<const VulkanBuffer*>(fill->dst)->handle(), fill->offset,
          fill->size, fill->pattern));
    } else {
      const auto& normalize = std::get<backend::NormalizeCommand>(command);
      FERRY_RETURN_IF_ERROR(pipelines.normalize.check_supported());  // before binding
      if (bound != BoundPipeline::normalize) {
        pipelines.normalize.bind(command_buffer);
        bound = BoundPipeline::normalize;
      }
      FERRY_RETURN_IF_ERROR(pipelines.normalize.record(
          command_buffer, static_cast<const VulkanBuffer*>(normalize.src)->handle(),
          static_cast<const VulkanBuffer*>(normalize.dst)->handle(), normalize));
    }
  }

  if (all.write_access != 0) {
    VkMemoryBarrier2 to_host{};
    to_host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
    to_host.srcStageMask = all.stage;
    to_host.srcAccessMask = all.write_access;
    to_host.dstStageMask = VK_PIPELINE_STAGE_2_HOST_BIT;
    to_host.dstAccessMask = VK_ACCESS_2_HOST_READ_BIT;
    record_barrier(vk, command_buffer, to_host);
  }
  return Status();
}

}  // namespace

Status record_commands(const DeviceContext& context, const Pipelines& pipelines,
                       VkCommandBuffer command_buffer,
                       std::span<const backend::Command> commands) {
  const VolkDeviceTable& vk = context.vk;
  VkCommandBufferBeginInfo begin_info{};
  begin_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin_info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FERRY_VK_RETURN_IF_ERROR(vk.vkBeginCommandBuffer(command_buffer, &begin_info));
  Status recorded = record_body(context, pipelines, command_buffer, commands);
  if (recorded.ok()) {
    FERRY_VK_RETURN_IF_ERROR(vk.vkEndCommandBuffer(command_buffer));
    return recorded;
  }
  // Leave it in the initial state so that it can be recorded again.
  (void)vk.vkResetCommandBuffer(command_buffer, 0);
  return recorded;
}

}  // namespace ferry::vulkan
