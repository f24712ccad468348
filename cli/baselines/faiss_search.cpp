#include "baselines/faiss_search.hpp"

#if defined(FERRY_CLI_HAVE_FAISS)

#include <faiss/IndexBinaryFlat.h>
#include <faiss/impl/FaissException.h>
#include <omp.h>

namespace ferry::cli {

namespace {
// FAISS's row index type: a member of the index classes before 1.8, of the namespace since.
#if FAISS_VERSION_MAJOR == 1 && FAISS_VERSION_MINOR < 8
using Label = faiss::IndexBinary::idx_t;
#else
using Label = faiss::idx_t;
#endif
}  // namespace

FaissSearchBaseline measure_faiss_search(std::span<const std::byte> database,
                                         std::span<const std::byte> queries, std::uint32_t bits,
                                         std::uint32_t k, unsigned threads,
                                         std::span<const std::uint32_t> sample,
                                         const RepeatSettings& settings) {
  FaissSearchBaseline out;
  out.version = "FAISS " + std::to_string(FAISS_VERSION_MAJOR) + "." +
                std::to_string(FAISS_VERSION_MINOR) + "." + std::to_string(FAISS_VERSION_PATCH) +
                " (linked at build time)";
  const std::size_t code_bytes = bits / 8;
  const auto rows = static_cast<Label>(database.size() / code_bytes);
  const auto count = static_cast<Label>(queries.size() / code_bytes);
  try {
    faiss::IndexBinaryFlat index(static_cast<Label>(bits));
    index.add(rows, reinterpret_cast<const std::uint8_t*>(database.data()));
    std::vector<std::int32_t> distances(static_cast<std::size_t>(count) * k);
    std::vector<Label> labels(distances.size());
    omp_set_num_threads(static_cast<int>(threads));
    auto search = [&] {
      index.search(count, reinterpret_cast<const std::uint8_t*>(queries.data()), k,
                   distances.data(), labels.data());
      return ok_status();
    };
    // The first search gives the sampled distances; when it took over 2 s it is the timing
    // too (Debian's build takes tens of seconds for a million rows), else `settings` follow.
    const Result<double> first_run = wall_time(search);
    const double first = first_run.ok() ? *first_run : 0;
    for (std::uint32_t q : sample) {
      out.sample_distances.insert(out.sample_distances.end(),
                                  distances.begin() + std::ptrdiff_t{q} * k,
                                  distances.begin() + std::ptrdiff_t{q} * k + k);
    }
    Result<Timing> timing = !first_run.ok() ? Result<Timing>(first_run.status())
                            : first > 2.0 ? Result<Timing>(Timing{1, first, first, first})
                                        : repeat(settings, [&](std::uint64_t) {
                                            return wall_time(search);
                                          });
    if (!timing.ok()) {
      out.reason = timing.status().message();
      return out;
    }
    out.timing = *timing;
    out.available = true;
  } catch (const std::exception& error) {  // FAISS reports errors as exceptions
    out.reason = std::string("FAISS: ") + error.what();
  }
  return out;
}

}  // namespace ferry::cli

#else  // built without FAISS

namespace ferry::cli {

FaissSearchBaseline measure_faiss_search(std::span<const std::byte>, std::span<const std::byte>,
                                         std::uint32_t, std::uint32_t, unsigned,
                                         std::span<const std::uint32_t>, const RepeatSettings&) {
  return {.reason = "FAISS was not found when ferry was built (Debian: libfaiss-dev)"};
}

}  // namespace ferry::cli

#endif
