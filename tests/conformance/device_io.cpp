#include "device_io.hpp"

#include <cstring>

#include "harness.hpp"

namespace ferry_test {

using ferry::Buffer;
using ferry::CommandList;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::Result;
using ferry::Status;

Status copy_and_wait(const ferry::Device& device, QueueKind kind, const ferry::BufferRef& src,
                     std::uint64_t src_offset, const ferry::BufferRef& dst,
                     std::uint64_t dst_offset, std::uint64_t size) {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(commands.copy(src, src_offset, dst, dst_offset, size));
  FERRY_ASSIGN_OR_RETURN(const ferry::TimelinePoint done,
                         device.queue(kind).submit(std::move(commands)));
  return done.wait(kLongWait);
}

Status write_bytes(const ferry::Device& device, const ferry::BufferRef& dst, std::uint64_t offset,
                   std::span<const std::byte> data) {
  FERRY_ASSIGN_OR_RETURN(Buffer staging,
                         device.create_buffer(data.size(), MemoryKind::host_upload));
  FERRY_ASSIGN_OR_RETURN(const std::span<std::byte> host, staging.host_span());
  std::memcpy(host.data(), data.data(), data.size());
  return copy_and_wait(device, QueueKind::upload, staging, 0, dst, offset, data.size());
}

Result<std::vector<std::byte>> read_bytes(const ferry::Device& device, const ferry::BufferRef& src,
                                          std::uint64_t offset, std::uint64_t size) {
  FERRY_ASSIGN_OR_RETURN(Buffer staging, device.create_buffer(size, MemoryKind::host_readback));
  FERRY_RETURN_IF_ERROR(copy_and_wait(device, QueueKind::download, src, offset, staging, 0, size));
  FERRY_ASSIGN_OR_RETURN(const std::span<std::byte> host, staging.host_span());
  return std::vector<std::byte>(host.begin(), host.end());
}

Result<Buffer> device_buffer_with(const ferry::Device& device, std::span<const std::byte> data) {
  FERRY_ASSIGN_OR_RETURN(Buffer buffer, device.create_buffer(data.size(), MemoryKind::device));
  FERRY_RETURN_IF_ERROR(write_bytes(device, buffer, 0, data));
  return buffer;
}

Status fill_and_wait(const ferry::Device& device, const ferry::BufferRef& dst, std::uint64_t offset,
                     std::uint64_t size, std::uint32_t pattern) {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(ferry::fill(commands, dst, offset, size, pattern));
  FERRY_ASSIGN_OR_RETURN(const ferry::TimelinePoint done,
                         device.queue(QueueKind::compute).submit(std::move(commands)));
  return done.wait(kLongWait);
}

}  // namespace ferry_test
