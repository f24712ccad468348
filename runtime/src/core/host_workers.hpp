// A small process-wide pool of host threads for memcpy-heavy work (staging copies).
#pragma once

#include <cstddef>
#include <functional>

namespace ferry::detail {

class DeviceTrace;

// Number of worker threads (not counting the caller).
unsigned host_worker_count();

// Runs body(i) for i in [0, count) on up to `threads` threads (the caller included) and returns
// when all are done. body must not throw.
void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& body);

// How a copy writes its target. streaming: non-temporal stores, which leave none of the target
// in the CPU's caches, for memory a device reads next by DMA (a staging lease): the device's
// reads then need not be served from, or snoop, the caches holding lines the CPU just wrote.
enum class HostStores { cached, streaming };

// The stores for a host copy into staging memory the device reads next. A device's DMA read of
// lines the CPU has just written runs at about half speed (measured on H200 hosts: 8 MiB at
// 21-33 GB/s against 45-51 untouched; docs/PERFORMANCE.md), which streaming stores avoid, but
// the SSE2 streaming loop copies slower than memcpy. So: streaming when the copy's upload has
// nothing to overlap with (a transfer of one chunk, a staged copy's chunk, whose upload waits for
// it), cached when the next chunk's copy overlaps this chunk's upload. FERRY_HOST_STORES=cached
// or =streaming forces one (a measurement knob, read once).
HostStores staging_stores(bool upload_overlaps_next_copy);

// memcpy split over up to `threads` threads in pieces of at least 512 KiB; with a trace, each
// piece is a span on the track of the thread that copied it.
void parallel_memcpy(void* dst, const void* src, std::size_t bytes, unsigned threads,
                     DeviceTrace* trace = nullptr, HostStores stores = HostStores::cached);

}  // namespace ferry::detail
