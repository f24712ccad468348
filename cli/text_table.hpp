// Plain-text tables with aligned columns for terminal output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ferry::cli {

class TextTable {
 public:
  enum class Align { left, right };

  // One header per column; numbers read best right-aligned.
  void add_column(std::string header, Align align = Align::left);
  // Cells beyond the column count are ignored; missing cells print empty.
  void add_row(std::vector<std::string> cells);
  // Writes the header, a rule and the rows, each line prefixed by `indent`.
  void print(std::ostream& out, const std::string& indent = "") const;
  bool empty() const { return rows_.empty(); }

 private:
  struct Column {
    std::string header;
    Align align;
  };
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ferry::cli
