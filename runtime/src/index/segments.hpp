// Where BinaryIndex keeps rows (codes, or kept vectors): a list of segments, each a device buffer
// or a host block of a fixed number of rows, allocated as rows arrive. The first segments are on
// the device while they fit the device budget; every later one is in host memory (so the device
// holds rows [0, device_rows()) and the host the rest). Segments grow geometrically up to their
// limit (BinaryIndexMemory::device_segment_bytes, segment_bytes for host blocks), so an index
// built by many small adds has few segments. Host rows are never re-copied; a lone device
// segment regrows as one buffer (its rows copied on the device) while the limit allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ferry/buffer.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry::index {

// Host memory the device reads in place: ordinary memory registered with the device
// (Device::register_host_memory) where it can, else a host_upload buffer.
class PinnedBlock {
 public:
  static Result<std::unique_ptr<PinnedBlock>> allocate(const Device& device, std::uint64_t bytes);
  ~PinnedBlock();
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;

  std::span<std::byte> bytes() const { return bytes_; }
  const Buffer& buffer() const { return buffer_; }

 private:
  PinnedBlock() = default;
  struct FreeAligned {
    void operator()(std::byte* p) const noexcept;
  };
  Device device_;
  std::unique_ptr<std::byte, FreeAligned> memory_;  // set when registered
  Buffer buffer_;
  std::span<std::byte> bytes_;
};

// Which host memory a store uses for rows past its device budget.
enum class HostMemory : std::uint8_t {
  pageable,  // ordinary memory (codes: streamed through the staging pool at search time)
  pinned,    // a PinnedBlock (kept vectors: the rescore op reads them in place)
};

struct Segment {
  std::uint64_t first_row = 0;
  std::uint64_t capacity = 0;  // rows
  Buffer device;                          // a device segment
  std::unique_ptr<std::byte[]> pageable;  // or a host segment of pageable memory
  std::unique_ptr<PinnedBlock> pinned;    // or a host segment of pinned memory

  bool on_device() const { return device.valid(); }
  std::uint64_t end_row() const { return first_row + capacity; }
  // The host bytes of a host segment (empty for a device segment).
  std::span<std::byte> host_bytes(std::uint64_t row_bytes) const;
  // The memory ops read: the device buffer, or the pinned block's buffer.
  const Buffer& buffer() const { return on_device() ? device : pinned->buffer(); }
};

// A run of rows within one segment.
struct SegmentPiece {
  std::size_t segment = 0;
  std::uint64_t local_row = 0;
  std::uint64_t rows = 0;
};

class SegmentStore {
 public:
  // Limits of every segment: rows below 2^32 - 1 (what hamming_topk and rescore index).
  static constexpr std::uint64_t kMaxSegmentRows = 0xFFFFFFFEull;

  SegmentStore() = default;
  // Device segments hold at most device_segment_bytes, host ones host_segment_bytes (at least
  // one row each).
  SegmentStore(std::uint64_t row_bytes, std::uint64_t device_budget,
               std::uint64_t device_segment_bytes, std::uint64_t host_segment_bytes,
               HostMemory host_memory);

  // Makes sure rows [0, rows) have a place, allocating segments past the current capacity.
  // `what` names the store in errors ("codes", "kept vectors"). With `regrow_copies`, a store
  // that is one device segment grows by a larger device buffer holding its rows (twice as large,
  // or as the rows need, within the limits), their copy recorded into `regrow_copies`, which the
  // caller submits: the store stays one buffer, which a search takes in one pass. Where that
  // buffer cannot be had, a segment is added as without.
  Status reserve(const Device& device, std::uint64_t rows, const char* what,
                 CommandList* regrow_copies = nullptr);
  // Forgets segments past the first `count`, and puts back a segment regrown since the last
  // commit() (an add that failed gives back what it allocated).
  void truncate(std::size_t count);
  // Keeps what reserve() regrew: the buffer it replaced is released.
  void commit() { replaced_ = {}; }

  // The pieces of rows [first, first + rows), in order, one per segment they touch.
  std::vector<SegmentPiece> pieces(std::uint64_t first, std::uint64_t rows) const;

  std::uint64_t row_bytes() const { return row_bytes_; }
  std::uint64_t capacity() const;
  // Rows whose place is on the device (all of them while no host segment exists).
  std::uint64_t device_capacity() const;
  std::uint64_t device_bytes() const { return device_bytes_; }
  std::uint64_t host_bytes() const;
  const std::vector<Segment>& segments() const { return segments_; }

 private:
  std::uint64_t row_bytes_ = 0;
  std::uint64_t device_budget_ = 0;
  std::uint64_t max_device_rows_ = 1;  // per segment
  std::uint64_t max_host_rows_ = 1;
  HostMemory host_memory_ = HostMemory::pageable;
  std::uint64_t device_bytes_ = 0;
  std::vector<Segment> segments_;
  // The lone device segment's buffer and capacity before reserve() regrew it, until commit().
  struct Replaced {
    Buffer buffer;
    std::uint64_t capacity = 0;
  } replaced_;

  // reserve()'s regrowth; false (nothing changed) where it does not apply or has no buffer.
  bool regrow(const Device& device, std::uint64_t rows, CommandList& copies);
};

}  // namespace ferry::index
