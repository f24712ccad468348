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

// memcpy split over up to `threads` threads in pieces of at least 512 KiB; with a trace, each
// piece is a span on the track of the thread that copied it.
void parallel_memcpy(void* dst, const void* src, std::size_t bytes, unsigned threads,
                     DeviceTrace* trace = nullptr);

}  // namespace ferry::detail
