#include "vulkan/recorder.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

#include "vulkan/buffer.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

// What one command does, for hazard tracking: every buffer it reads, every buffer it writes.
struct CommandAccess {
  VkPipelineStageFlags2 stage = 0;
  VkAccessFlags2 access = 0;  // every access the command makes (for the barrier's dst scope)
  VkAccessFlags2 write_access = 0;
  std::vector<const VulkanBuffer*> read;
  std::vector<const VulkanBuffer*> written;
  bool copy_by_shader = false;  // a CopyCommand the queue's copy shader runs
  // Whether a written buffer is host memory (a lease, a host buffer): only then must the
  // writes be made visible to the host at the end.
  bool writes_host_memory() const {
    return std::any_of(written.begin(), written.end(),
                       [](const VulkanBuffer* buffer) { return buffer->host_visible(); });
  }
};

// Compute shaders reading and writing storage buffers, and copies (an op may copy between its
// bindings, as ibp_decode does its tables into its scratch; a shader copy's tail is a copy).
void add_shader_access(CommandAccess& access) {
  access.stage = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_2_COPY_BIT;
  access.access = VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT |
                  VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT;
  access.write_access = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT;
}

// `copy_shader`: the queue's shader for host<->device copies, or null.
CommandAccess access_of(const backend::Command& command, const CopyShader* copy_shader) {
  CommandAccess access;
  backend::visit_command(
      command,
      [&](const backend::CopyCommand& copy) {
        access.copy_by_shader = copy_shader != nullptr && copy_shader->takes(copy);
        if (access.copy_by_shader) {
          add_shader_access(access);
        } else {
          access.stage = VK_PIPELINE_STAGE_2_COPY_BIT;
          access.access = VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT;
          access.write_access = VK_ACCESS_2_TRANSFER_WRITE_BIT;
        }
        access.read.push_back(static_cast<const VulkanBuffer*>(copy.src));
        access.written.push_back(static_cast<const VulkanBuffer*>(copy.dst));
      },
      [&](const backend::OpCommand& op) {
        // A written binding may also be read: fill's edge words are atomic read-modify-writes.
        add_shader_access(access);
        for (const backend::Binding& binding : op.bindings) {
          const auto* buffer = static_cast<const VulkanBuffer*>(binding.buffer);
          (binding.access == backend::Access::read ? access.read : access.written)
              .push_back(buffer);
        }
      });
  return access;
}

// Accesses since the last barrier.
class HazardTracker {
 public:
  // True when `command` must wait for accesses recorded since the last barrier.
  bool conflicts(const CommandAccess& command) const {
    auto contains = [](const std::vector<const VulkanBuffer*>& set, const VulkanBuffer* buffer) {
      return std::find(set.begin(), set.end(), buffer) != set.end();
    };
    for (const VulkanBuffer* buffer : command.read) {
      if (contains(written_, buffer)) return true;
    }
    for (const VulkanBuffer* buffer : command.written) {
      if (contains(written_, buffer) || contains(read_, buffer)) return true;
    }
    return false;
  }

  void add(const CommandAccess& command) {
    stages_ |= command.stage;
    write_access_ |= command.write_access;
    read_.insert(read_.end(), command.read.begin(), command.read.end());
    written_.insert(written_.end(), command.written.begin(), command.written.end());
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

// Records an op with its pipeline. A listed op without a pipeline does not compile
// (op_pipelines.hpp).
Status record_op(const OpPipelines& pipelines, VkCommandBuffer command_buffer,
                 const backend::OpCommand& op) {
  return std::visit(
      [&](const auto& args) {
        return pipeline_for<std::decay_t<decltype(args)>>(pipelines).record(command_buffer, args,
                                                                             op.bindings);
      },
      op.args);
}

// The memory a copy touches on one side (queue_hazards.hpp).
MemoryAccess copy_side(const backend::BackendBuffer* buffer, std::uint64_t offset,
                       std::uint64_t size, bool write) {
  const auto* vulkan_buffer = static_cast<const VulkanBuffer*>(buffer);
  return copy_memory(vulkan_buffer->host_visible(), vulkan_buffer->host_address(),
                     reinterpret_cast<std::uint64_t>(vulkan_buffer->handle()), offset, size, write);
}

// Records between vkBeginCommandBuffer and vkEndCommandBuffer.
Status record_body(const DeviceContext& context, const OpPipelines& pipelines,
                   const CopyShader* copy_shader, VkCommandBuffer command_buffer,
                   std::span<const backend::Command> commands, bool start_barrier) {
  const VolkDeviceTable& vk = context.vk;
  if (start_barrier) {  // earlier submissions on this VkQueue, whatever they did
    VkMemoryBarrier2 start{};
    start.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
    start.srcStageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
    start.srcAccessMask = VK_ACCESS_2_MEMORY_WRITE_BIT;
    start.dstStageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
    start.dstAccessMask = VK_ACCESS_2_MEMORY_READ_BIT | VK_ACCESS_2_MEMORY_WRITE_BIT;
    record_memory_barrier(vk, command_buffer, start);
  }

  // Stages and accesses of the whole submission (only those its queue supports).
  std::vector<CommandAccess> accesses;
  accesses.reserve(commands.size());
  CommandAccess all;
  bool writes_host_memory = false;
  for (const backend::Command& command : commands) {
    accesses.push_back(access_of(command, copy_shader));
    all.stage |= accesses.back().stage;
    all.access |= accesses.back().access;
    all.write_access |= accesses.back().write_access;
    writes_host_memory = writes_host_memory || accesses.back().writes_host_memory();
  }

  HazardTracker hazards;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (hazards.conflicts(accesses[i])) {
      record_memory_barrier(vk, command_buffer, hazards.barrier(all));
    }
    hazards.add(accesses[i]);

    FERRY_RETURN_IF_ERROR(backend::visit_command(
        commands[i],
        [&](const backend::CopyCommand& copy) {
          if (accesses[i].copy_by_shader) {
            copy_shader->record(command_buffer, copy);
            return Status();
          }
          VkBufferCopy region{};
          region.srcOffset = copy.src_offset;
          region.dstOffset = copy.dst_offset;
          region.size = copy.size;
          vk.vkCmdCopyBuffer(command_buffer, static_cast<const VulkanBuffer*>(copy.src)->handle(),
                             static_cast<const VulkanBuffer*>(copy.dst)->handle(), 1, &region);
          return Status();
        },
        [&](const backend::OpCommand& op) { return record_op(pipelines, command_buffer, op); }));
  }

  // Device memory is never read by the host directly (ferry maps only host memory), and later
  // submissions see it through their semaphore waits: the host barrier only where host memory
  // was written (a download's lease), not after every upload and kernel.
  if (writes_host_memory) {
    VkMemoryBarrier2 to_host{};
    to_host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
    to_host.srcStageMask = all.stage;
    to_host.srcAccessMask = all.write_access;
    to_host.dstStageMask = VK_PIPELINE_STAGE_2_HOST_BIT;
    to_host.dstAccessMask = VK_ACCESS_2_HOST_READ_BIT;
    record_memory_barrier(vk, command_buffer, to_host);
  }
  return Status();
}

}  // namespace

QueueHazards::Plan plan_order(const QueueHazards& hazards,
                              std::span<const backend::Command> commands) {
  std::vector<MemoryAccess> accesses;
  accesses.reserve(2 * commands.size());
  bool copies_only = true;
  for (const backend::Command& command : commands) {
    backend::visit_command(
        command,
        [&](const backend::CopyCommand& copy) {
          accesses.push_back(copy_side(copy.src, copy.src_offset, copy.size, false));
          accesses.push_back(copy_side(copy.dst, copy.dst_offset, copy.size, true));
        },
        [&](const backend::OpCommand&) { copies_only = false; });
    if (!copies_only) return hazards.plan(false, {});
  }
  return hazards.plan(true, std::move(accesses));
}

Status record_commands(const DeviceContext& context, const OpPipelines& pipelines,
                       const CopyShader* copy_shader, VkCommandBuffer command_buffer,
                       std::span<const backend::Command> commands, bool start_barrier,
                       const std::optional<TimestampPair>& timed) {
  const VolkDeviceTable& vk = context.vk;
  VkCommandBufferBeginInfo begin_info{};
  begin_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin_info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FERRY_VK_RETURN_IF_ERROR(vk.vkBeginCommandBuffer(command_buffer, &begin_info));
  if (timed) {
    vk.vkCmdWriteTimestamp2(command_buffer, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, timed->pool,
                            timed->first);
  }
  Status recorded =
      record_body(context, pipelines, copy_shader, command_buffer, commands, start_barrier);
  if (recorded.ok() && timed) {
    vk.vkCmdWriteTimestamp2(command_buffer, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, timed->pool,
                            timed->first + 1);
  }
  if (recorded.ok()) {
    FERRY_VK_RETURN_IF_ERROR(vk.vkEndCommandBuffer(command_buffer));
    return recorded;
  }
  // Leave it in the initial state so that it can be recorded again.
  (void)vk.vkResetCommandBuffer(command_buffer, 0);
  return recorded;
}

}  // namespace ferry::vulkan
