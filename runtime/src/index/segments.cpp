#include "index/segments.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "core/checked.hpp"
#include "core/describe.hpp"
#include "core/state.hpp"

namespace ferry::index {
namespace {

// Registered host memory: the address and size a multiple of this (above every device's
// minImportedHostPointerAlignment seen: 4 KiB on NVIDIA and Mesa).
constexpr std::uint64_t kRegisterAlignment = 64 << 10;
// The smallest segment worth a block of its own, unless the segments' limit is smaller; a device
// one is larger, so that a small index is one buffer, which a search takes in one pass.
constexpr std::uint64_t kMinHostSegmentBytes = 64 << 10;
constexpr std::uint64_t kMinDeviceSegmentBytes = 1 << 20;

}  // namespace

void PinnedBlock::FreeAligned::operator()(std::byte* p) const noexcept { std::free(p); }

Result<std::unique_ptr<PinnedBlock>> PinnedBlock::allocate(const Device& device,
                                                           std::uint64_t bytes) {
  std::unique_ptr<PinnedBlock> block(new (std::nothrow) PinnedBlock());
  if (!block) return Status(ErrorCode::out_of_memory, "no host memory for a pinned block");
  block->device_ = device;
  const std::optional<std::uint64_t> rounded = detail::checked_round_up(bytes, kRegisterAlignment);
  if (!rounded) {
    return Status(ErrorCode::out_of_memory, "a pinned block of " + detail::describe_bytes(bytes));
  }
  block->memory_.reset(static_cast<std::byte*>(std::aligned_alloc(kRegisterAlignment, *rounded)));
  if (!block->memory_) {
    return Status(ErrorCode::out_of_memory,
                  "no host memory for a pinned block of " + detail::describe_bytes(*rounded));
  }
  Result<Buffer> registered =
      device.register_host_memory(std::span(block->memory_.get(), *rounded));
  if (registered.ok()) {
    block->buffer_ = std::move(registered).value();
    block->bytes_ = std::span(block->memory_.get(), bytes);
    return block;
  }
  // Devices that cannot register host memory (no VK_EXT_external_memory_host) read a host_upload
  // buffer in place instead; anything else is a real failure.
  const ErrorCode code = registered.status().code();
  if (code != ErrorCode::unavailable && code != ErrorCode::invalid_argument) {
    return registered.status();
  }
  block->memory_.reset();
  FERRY_ASSIGN_OR_RETURN(block->buffer_, device.create_buffer(bytes, MemoryKind::host_upload));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> span, block->buffer_.host_span());
  block->bytes_ = span.first(bytes);
  return block;
}

PinnedBlock::~PinnedBlock() {
  if (!memory_ || !buffer_) return;
  // Registered memory must outlive its Buffer, which a completed submission not yet retired may
  // still hold: retire those first. If anything still holds it, keep the memory (a leak rather
  // than memory freed under a live registration).
  std::shared_ptr<detail::BufferState> state = buffer_.state();
  buffer_.release();
  if (state.use_count() > 1 && device_.state()) device_.state()->retire();
  if (state.use_count() > 1) {
    (void)memory_.release();
    return;
  }
  state.reset();
}

std::span<std::byte> Segment::host_bytes(std::uint64_t row_bytes) const {
  if (pinned) return pinned->bytes();
  if (pageable) return std::span(pageable.get(), capacity * row_bytes);
  return {};
}

SegmentStore::SegmentStore(std::uint64_t row_bytes, std::uint64_t device_budget,
                           std::uint64_t device_segment_bytes, std::uint64_t host_segment_bytes,
                           HostMemory host_memory)
    : row_bytes_(row_bytes),
      device_budget_(device_budget),
      max_device_rows_(
          std::clamp<std::uint64_t>(device_segment_bytes / row_bytes, 1, kMaxSegmentRows)),
      max_host_rows_(std::clamp<std::uint64_t>(host_segment_bytes / row_bytes, 1, kMaxSegmentRows)),
      host_memory_(host_memory) {}

std::uint64_t SegmentStore::capacity() const {
  return segments_.empty() ? 0 : segments_.back().end_row();
}

std::uint64_t SegmentStore::device_capacity() const {
  std::uint64_t rows = 0;
  for (const Segment& segment : segments_) {
    if (segment.on_device()) rows = segment.end_row();
  }
  return rows;
}

std::uint64_t SegmentStore::host_bytes() const {
  std::uint64_t bytes = 0;
  for (const Segment& segment : segments_) {
    if (!segment.on_device()) bytes += segment.capacity * row_bytes_;
  }
  return bytes;
}

bool SegmentStore::regrow(const Device& device, std::uint64_t rows, CommandList& copies) {
  if (segments_.size() != 1 || !segments_[0].on_device() || replaced_.buffer.valid()) return false;
  Segment& segment = segments_[0];
  const std::uint64_t old_bytes = segment.capacity * row_bytes_;
  const std::uint64_t budget_rows = device_budget_ / row_bytes_;  // the segment's own included
  const std::uint64_t count =
      std::min({max_device_rows_, budget_rows, std::max(rows, 2 * segment.capacity)});
  if (count < rows) return false;
  Result<Buffer> buffer = device.create_buffer(count * row_bytes_);
  if (!buffer.ok()) return false;  // an allocation it could do without: a segment is added
  if (!copies.copy(segment.device, 0, buffer.value(), 0, old_bytes).ok()) return false;
  replaced_ = {std::move(segment.device), segment.capacity};
  segment.device = std::move(buffer).value();
  segment.capacity = count;
  device_bytes_ += count * row_bytes_ - old_bytes;
  return true;
}

Status SegmentStore::reserve(const Device& device, std::uint64_t rows, const char* what,
                             CommandList* regrow_copies) {
  if (capacity() < rows && regrow_copies != nullptr && regrow(device, rows, *regrow_copies)) {
    return Status();
  }
  while (capacity() < rows) {
    const std::uint64_t have = capacity();
    const bool host_started = !segments_.empty() && !segments_.back().on_device();
    const std::uint64_t budget_rows =
        device_budget_ > device_bytes_ ? (device_budget_ - device_bytes_) / row_bytes_ : 0;
    const bool on_device = !host_started && budget_rows > 0;
    const std::uint64_t max_rows = on_device ? max_device_rows_ : max_host_rows_;
    const std::uint64_t min_rows = std::clamp<std::uint64_t>(
        (on_device ? kMinDeviceSegmentBytes : kMinHostSegmentBytes) / row_bytes_, 1, max_rows);
    // Geometric growth (a new segment as large as everything before it), within the limits.
    std::uint64_t count = std::min(max_rows, std::max({rows - have, have, min_rows}));
    if (on_device) count = std::min(count, budget_rows);
    // count * row_bytes <= max(the segments' limit, row_bytes): it fits.
    std::uint64_t bytes = count * row_bytes_;
    Segment segment;
    segment.first_row = have;
    segment.capacity = count;
    if (on_device) {
      Result<Buffer> buffer = device.create_buffer(bytes);
      if (!buffer.ok() && count > rows - have) {
        // Growth ahead of the rows is a bet: the rows themselves may still fit.
        segment.capacity = count = rows - have;
        bytes = count * row_bytes_;
        buffer = device.create_buffer(bytes);
      }
      if (!buffer.ok()) {
        return buffer.status().with_context(std::string("a device segment of ") + what + " (" +
                                            detail::describe_bytes(bytes) + ")");
      }
      segment.device = std::move(buffer).value();
      device_bytes_ += bytes;
    } else if (host_memory_ == HostMemory::pinned) {
      Result<std::unique_ptr<PinnedBlock>> block = PinnedBlock::allocate(device, bytes);
      if (!block.ok()) {
        return block.status().with_context(std::string("a host segment of ") + what + " (" +
                                           detail::describe_bytes(bytes) + ")");
      }
      segment.pinned = std::move(block).value();
    } else {
      segment.pageable.reset(new (std::nothrow) std::byte[bytes]);
      if (!segment.pageable) {
        return Status(ErrorCode::out_of_memory, std::string("no host memory for a segment of ") +
                                                    what + " (" + detail::describe_bytes(bytes) +
                                                    ")");
      }
    }
    segments_.push_back(std::move(segment));
  }
  return Status();
}

void SegmentStore::truncate(std::size_t count) {
  while (segments_.size() > count) {
    if (segments_.back().on_device()) device_bytes_ -= segments_.back().capacity * row_bytes_;
    segments_.pop_back();
  }
  if (replaced_.buffer.valid() && !segments_.empty()) {
    Segment& segment = segments_[0];
    device_bytes_ -= (segment.capacity - replaced_.capacity) * row_bytes_;
    segment.device = std::move(replaced_.buffer);
    segment.capacity = replaced_.capacity;
  }
  replaced_ = {};
}

std::vector<SegmentPiece> SegmentStore::pieces(std::uint64_t first, std::uint64_t rows) const {
  std::vector<SegmentPiece> out;
  const std::uint64_t end = first + rows;
  for (std::size_t s = 0; s < segments_.size() && first < end; ++s) {
    const Segment& segment = segments_[s];
    if (segment.end_row() <= first) continue;
    const std::uint64_t take = std::min(end, segment.end_row()) - first;
    out.push_back({s, first - segment.first_row, take});
    first += take;
  }
  return out;
}

}  // namespace ferry::index
