// Runs the `ferry` program from a test with its stdout and stderr captured in files of a TempDir
// (tests/cli/: ferry search, ferry ibp).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/temp_dir.hpp"

namespace ferry::test {

struct Ran {
  int exit = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// Runs `program` followed by each of `args` single-quoted and then `suffix` as typed, through the
// shell.
inline Ran run_program(const TempDir& dir, const std::string& program,
                       const std::vector<std::string>& args, const std::string& suffix = "") {
  std::string command = program;
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += suffix;
  command += " > '" + (dir / "stdout").string() + "' 2> '" + (dir / "stderr").string() + "'";
  const int status = std::system(command.c_str());
  Ran ran;
  ran.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.out = slurp(dir / "stdout");
  ran.err = slurp(dir / "stderr");
  return ran;
}

}  // namespace ferry::test
