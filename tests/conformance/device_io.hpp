// Plain, synchronous writes and reads of device memory through host buffers: used to set up and
// check state around the operation under test (each call submits one copy and waits for it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

ferry::Status write_bytes(const ferry::Device& device, const ferry::BufferRef& dst,
                          std::uint64_t offset, std::span<const std::byte> data);

ferry::Result<std::vector<std::byte>> read_bytes(const ferry::Device& device,
                                                 const ferry::BufferRef& src, std::uint64_t offset,
                                                 std::uint64_t size);

// A new device buffer holding `data`.
ferry::Result<ferry::Buffer> device_buffer_with(const ferry::Device& device,
                                                std::span<const std::byte> data);

// Records one fill, submits it on the compute queue and waits.
ferry::Status fill_and_wait(const ferry::Device& device, const ferry::BufferRef& dst,
                            std::uint64_t offset, std::uint64_t size, std::uint32_t pattern);

// Submits one copy on `kind` and waits for it.
ferry::Status copy_and_wait(const ferry::Device& device, ferry::QueueKind kind,
                            const ferry::BufferRef& src, std::uint64_t src_offset,
                            const ferry::BufferRef& dst, std::uint64_t dst_offset,
                            std::uint64_t size);

}  // namespace ferry_test
