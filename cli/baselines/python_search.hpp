// The Python baselines of `ferry bench search` (baselines/search_python.py: FAISS from the
// faiss-cpu wheel, PyTorch on CUDA), run as a child process on the same codes, written to a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::cli {

struct PythonSearchBaseline {
  bool available = false;
  std::string reason = {};   // why not, when unavailable
  std::string version = {};  // what ran, as the script says
  double median_seconds = 0;
  double best_seconds = 0;
  std::uint64_t reps = 0;
  std::vector<std::int32_t> sample_distances = {};  // k per sampled query
};

// Whether python3 can import `modules` ("faiss, numpy"), or why not.
std::string python_missing(std::string_view modules);

// search_python.py `baseline` ("faiss" or "torch") over `codes_file` (the database rows, then the
// queries).
PythonSearchBaseline measure_python_search(std::string_view baseline,
                                           const std::filesystem::path& codes_file,
                                           std::uint32_t bits, std::uint64_t rows,
                                           std::uint32_t queries, std::uint32_t k,
                                           unsigned threads, int device, std::uint64_t min_time_ms,
                                           std::span<const std::uint32_t> sample);

}  // namespace ferry::cli
