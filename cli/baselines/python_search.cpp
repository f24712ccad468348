#include "baselines/python_search.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <sstream>

namespace ferry::cli {

namespace {

// The script, found next to the sources it was built from.
constexpr const char* kScript = FERRY_CLI_BASELINES_DIR "/search_python.py";

struct Run {
  int exit_status = -1;  // -1: did not start or did not exit normally
  std::string output;    // stdout
};

// `command` through the shell (stderr goes to /dev/null: a missing package is expected).
Run run_command(const std::string& command) {
  Run run;
  std::FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) run.exit_status = WEXITSTATUS(status);
  return run;
}

}  // namespace

std::string python_missing(std::string_view modules) {
  const Run run = run_command("python3 -c 'import " + std::string(modules) + "'");
  if (run.exit_status == 0) return {};
  return "python3 cannot import " + std::string(modules);
}

PythonSearchBaseline measure_python_search(std::string_view baseline,
                                           const std::filesystem::path& codes_file,
                                           std::uint32_t bits, std::uint64_t rows,
                                           std::uint32_t queries, std::uint32_t k,
                                           unsigned threads, int device, std::uint64_t min_time_ms,
                                           std::span<const std::uint32_t> sample) {
  PythonSearchBaseline out;
  std::string sampled;
  for (std::uint32_t q : sample) sampled += (sampled.empty() ? "" : ",") + std::to_string(q);
  std::ostringstream command;
  // OpenMP threads that wait passively, unless the user says otherwise: spinning ones lose whole
  // time slices to any other load on the machine, and FAISS's time then says little.
  command << "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} python3 '" << kScript << "' " << baseline << " --codes '" << codes_file.string()
          << "' --bits " << bits << " --rows " << rows << " --queries " << queries << " --k " << k
          << " --threads " << threads << " --device " << device << " --min-time-ms "
          << min_time_ms << " --sample " << (sampled.empty() ? "''" : sampled);
  const Run run = run_command(command.str());
  if (run.exit_status != 0) {
    out.reason = run.exit_status == 3 ? "its Python package is missing"
                                      : "search_python.py " + std::string(baseline) +
                                            " failed (exit status " +
                                            std::to_string(run.exit_status) + ")";
    return out;
  }
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "version") {
      std::getline(words >> std::ws, out.version);
    } else if (key == "median_seconds") {
      words >> out.median_seconds;
    } else if (key == "best_seconds") {
      words >> out.best_seconds;
    } else if (key == "reps") {
      words >> out.reps;
    } else if (key == "sample_distances") {
      for (std::int32_t d; words >> d;) out.sample_distances.push_back(d);
    }
  }
  out.available = out.median_seconds > 0 && out.sample_distances.size() == sample.size() * k;
  if (!out.available) out.reason = "search_python.py " + std::string(baseline) + ": unexpected output";
  return out;
}

}  // namespace ferry::cli
