// Records one submission's commands into a command buffer, with synchronization2 barriers:
// - first, for a submission with an op, a global memory barrier ordering everything submitted
//   earlier on the same VkQueue (copies only are ordered by a semaphore wait where needed:
//   queue_hazards.hpp; cross-queue order comes from the submission's semaphore waits);
// - between commands, a barrier only where there is a hazard: a command reads or writes a buffer
//   written earlier in the submission, or writes one read earlier (buffer granularity, over every
//   binding of every op);
// - last, where the submission wrote host memory, a barrier making those writes visible to the
//   host (HOST_READ), so that a download into host memory can be read once the submission's
//   signal is seen (device memory is never read by the host; other submissions see it through
//   their semaphore waits).
#pragma once

#include <volk.h>

#include <optional>
#include <span>

#include "core/backend.hpp"
#include "vulkan/context.hpp"
#include "vulkan/copy_shader.hpp"
#include "vulkan/op_pipelines.hpp"
#include "vulkan/queue_hazards.hpp"
#include "vulkan/timestamps.hpp"

namespace ferry::vulkan {

// How the submission of `commands` is ordered after what `hazards` remembers of its VkQueue: the
// start barrier (any op), or a wait on an earlier progress value (copies, by the memory they
// touch).
QueueHazards::Plan plan_order(const QueueHazards& hazards,
                              std::span<const backend::Command> commands);

// Fails (recording nothing usable) when an op's pipeline cannot record it; core checked support
// and record-time limits before, so that is an internal or a native error. `copy_shader`: where
// not null, host<->device copies it takes run on it (copy_shader.hpp). `timed`: timestamps
// written first and last, each once everything before it has completed (so the spans of one
// queue's submissions do not overlap: each starts when the one before has ended, or later;
// without the start barrier a copy may begin before the first, and its span shows less).
Status record_commands(const DeviceContext& context, const OpPipelines& pipelines,
                       const CopyShader* copy_shader, VkCommandBuffer command_buffer,
                       std::span<const backend::Command> commands, bool start_barrier,
                       const std::optional<TimestampPair>& timed = std::nullopt);

}  // namespace ferry::vulkan
