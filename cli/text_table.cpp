#include "text_table.hpp"

#include <algorithm>

namespace ferry::cli {

void TextTable::add_column(std::string header, Align align) {
  columns_.push_back({std::move(header), align});
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::print(std::ostream& out, const std::string& indent) const {
  std::vector<std::size_t> widths(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto print_line = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cells[c];
      const std::string pad(widths[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      line += columns_[c].align == Align::right ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();  // no trailing blanks
    out << line << '\n';
  };
  std::vector<std::string> headers;
  std::vector<std::string> rules;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    headers.push_back(columns_[c].header);
    rules.emplace_back(widths[c], '-');
  }
  print_line(headers);
  print_line(rules);
  for (const auto& row : rows_) print_line(row);
}

}  // namespace ferry::cli
