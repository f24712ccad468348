#include "core/host_workers.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "core/trace.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ferry::detail {
namespace {

class HostWorkers {
 public:
  explicit HostWorkers(unsigned count) {
    threads_.reserve(count);
    for (unsigned i = 0; i < count; ++i) {
      // Fewer helpers only make copies slower (the caller always works too), so a thread the
      // system cannot give is not an error. Not subject to fault injection: the pool lives for
      // the whole process, and one injected failure would shrink it for every later test.
      try {
        threads_.emplace_back([this, i] {
          name_this_thread("ferry host worker " + std::to_string(i + 1));
          run();
        });
      } catch (const std::system_error&) {
        break;
      }
    }
  }
  ~HostWorkers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

HostWorkers& workers() {
  // Enough threads to outrun one copy engine: ~55 GB/s of DMA against 4-10 GB/s of memcpy per
  // thread into pinned memory (the H100 host measured the low end: 8 threads gave ~34 GB/s).
  static HostWorkers pool(std::clamp(std::thread::hardware_concurrency(), 1u, 16u) - 1);
  return pool;
}

}  // namespace

unsigned host_worker_count() { return workers().size(); }

void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& body) {
  if (count == 0) return;
  const unsigned helpers =
      static_cast<unsigned>(std::min<std::size_t>({count - 1, threads > 0 ? threads - 1 : 0,
                                                   host_worker_count()}));
  if (helpers == 0) {
    for (std::size_t i = 0; i < count; ++i) body(i);
    return;
  }
  // Work is claimed from a shared counter, so the caller keeps working until all is taken.
  struct Shared {
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::condition_variable done;
    unsigned running = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->running = helpers;
  auto drain = [shared, count, &body] {
    for (std::size_t i; (i = shared->next.fetch_add(1)) < count;) body(i);
  };
  for (unsigned h = 0; h < helpers; ++h) {
    workers().post([shared, drain] {
      drain();
      std::lock_guard lock(shared->mutex);
      if (--shared->running == 0) shared->done.notify_all();
    });
  }
  drain();
  std::unique_lock lock(shared->mutex);
  shared->done.wait(lock, [&] { return shared->running == 0; });
}

namespace {

// memcpy, or the same with non-temporal stores where the CPU has them (SSE2: every x86-64).
void copy_bytes(std::byte* dst, const std::byte* src, std::size_t bytes, HostStores stores) {
#if defined(__SSE2__)
  if (stores == HostStores::streaming) {
    // Up to the first 16-byte boundary, then whole 16-byte stores, then the tail.
    const std::size_t head =
        std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
    std::memcpy(dst, src, head);
    std::size_t at = head;
    for (; at + 16 <= bytes; at += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at)));
    }
    std::memcpy(dst + at, src + at, bytes - at);
    _mm_sfence();  // the stores are visible before anything the caller does next (a submit)
    return;
  }
#endif
  (void)stores;
  std::memcpy(dst, src, bytes);
}

}  // namespace

HostStores staging_stores(bool upload_overlaps_next_copy) {
  enum class Forced { no, cached, streaming };
  static const Forced forced = [] {
    const char* value = std::getenv("FERRY_HOST_STORES");
    const std::string_view text = value != nullptr ? value : "";
    return text == "cached" ? Forced::cached : text == "streaming" ? Forced::streaming : Forced::no;
  }();
  if (forced != Forced::no) return forced == Forced::cached ? HostStores::cached : HostStores::streaming;
  return upload_overlaps_next_copy ? HostStores::cached : HostStores::streaming;
}

void parallel_memcpy(void* dst, const void* src, std::size_t bytes, unsigned threads,
                     DeviceTrace* trace, HostStores stores) {
  constexpr std::size_t kPiece = 512u << 10;  // below this, waking a thread costs more than it saves
  const std::size_t pieces = std::max<std::size_t>(1, std::min<std::size_t>(bytes / kPiece, threads > 0 ? threads : 1));
  if (pieces <= 1) {
    TraceScope traced(trace, "memcpy");
    traced.arg("bytes", static_cast<std::int64_t>(bytes));
    copy_bytes(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes, stores);
    return;
  }
  // Pieces aligned to 4 KiB so threads do not share cache lines or pages at the seams.
  const std::size_t step = (bytes / pieces + 4095) & ~std::size_t{4095};
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  parallel_for(pieces, static_cast<unsigned>(pieces), [&](std::size_t i) {
    const std::size_t begin = i * step;
    if (begin >= bytes) return;
    TraceScope traced(trace, "memcpy piece");
    traced.arg("bytes", static_cast<std::int64_t>(std::min(step, bytes - begin)));
    copy_bytes(d + begin, s + begin, std::min(step, bytes - begin), stores);
  });
}

}  // namespace ferry::detail
