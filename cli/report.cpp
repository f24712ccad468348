#include "report.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iterator>

#include "ferry/version.hpp"
namespace ferry::cli {

namespace {

constexpr std::size_t kTextWidth = 100;

// Per unit, in the order of enum Unit: what follows a field's value in text (table headers name
// their unit instead), and the unit in JSON where the key does not say it all.
struct UnitNames {
  std::string_view suffix, json;
};
constexpr UnitNames kUnitNames[] = {
    {"", ""}, {"", ""}, {"", ""},                                         // text, count, flag
    {"", "bytes"}, {" GB/s", "GB/s (1e9 bytes per second)"},              // bytes, gbps
    {" ms", "milliseconds"}, {" us", "microseconds"}, {" s", "seconds"},  // ms, us, seconds
    {"", ""}, {"", "ratio"},                                              // number, ratio
    {"", "fraction (shown as a percentage in text)"}};                    // percent
static_assert(std::size(kUnitNames) == static_cast<std::size_t>(Unit::percent) + 1);

const UnitNames& names(Unit unit) { return kUnitNames[static_cast<int>(unit)]; }

std::string format_fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// `fields[from..]`, labels padded to the widest of all `fields` (so a header printed in two parts
// stays aligned).
void render_fields(const std::vector<Field>& fields, std::ostream& out, std::size_t from = 0) {
  std::size_t width = 0;
  for (const Field& field : fields)
    width = std::max(width, field.json_only ? 0 : field.label.size());
  for (std::size_t i = from; i < fields.size(); ++i) {
    const Field& field = fields[i];
    if (field.json_only) continue;
    std::string value = format_value(field.value, field.unit);
    if (value != "-") value += names(field.unit).suffix;
    std::string lead = "  " + field.label;
    lead.resize(width + 2, ' ');
    out << wrap_text(lead, value, width + 4, kTextWidth);
  }
}

// Columns padded to their widest cell, numbers right-aligned; no trailing blanks.
void render_table(const Section& section, std::ostream& out) {
  std::vector<std::string> lines(section.rows.size() + 2);
  for (std::size_t c = 0; c < section.columns.size(); ++c) {
    const Column& column = section.columns[c];
    if (column.json_only) continue;
    std::vector<std::string> cells = {column.header, ""};
    for (std::size_t r = 0; r < section.rows.size(); ++r) {
      const bool repeated = column.group && r > 0 && section.rows[r - 1][c] == section.rows[r][c];
      cells.push_back(repeated ? "" : format_value(section.rows[r][c], column.unit));
    }
    std::size_t width = 0;
    for (const std::string& cell : cells) width = std::max(width, cell.size());
    cells[1].assign(width, '-');
    const bool left = column.unit == Unit::text || column.unit == Unit::flag;
    for (std::size_t r = 0; r < cells.size(); ++r) {
      const std::string pad(width - cells[r].size(), ' ');
      lines[r] += "  " + (left ? cells[r] + pad : pad + cells[r]);
    }
  }
  for (std::string& line : lines) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

// JSON pieces, two-space indentation: a string, a value, a member, and `items` as an object or
// array (`open` '{' or '[') at nesting depth `depth`.
std::string quote(std::string_view text) { return json_quote(text); }

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.append(1, '\\').append(1, c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

namespace {

std::string json(const Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return quote(*text);
  if (const auto* count = std::get_if<std::uint64_t>(&value)) return std::to_string(*count);
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  const double* number = std::get_if<double>(&value);
  if (number == nullptr || !std::isfinite(*number)) return "null";
  char digits[32];
  std::snprintf(digits, sizeof digits, "%.6g", *number);
  return digits;
}

std::string member(std::string_view key, const std::string& value) {
  return quote(key) + ": " + value;
}

std::string block(char open, const std::vector<std::string>& items, int depth) {
  const char close = open == '{' ? '}' : ']';
  if (items.empty()) return {open, close};
  std::string out(1, open);
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "\n" : ",\n") + std::string(2 * depth + 2, ' ') + items[i];
  return out + "\n" + std::string(2 * depth, ' ') + close;
}

void add_members(std::vector<std::string>& members, const std::vector<Field>& fields) {
  for (const Field& field : fields) {
    if (!std::holds_alternative<std::monostate>(field.value))
      members.push_back(member(field.key, json(field.value)));
  }
}

}  // namespace

std::string format_value(const Value& value, Unit unit) {
  if (std::holds_alternative<std::monostate>(value)) return "";
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "yes" : "no";
  if (const auto* count = std::get_if<std::uint64_t>(&value)) {
    return unit == Unit::bytes ? format_bytes(*count) : std::to_string(*count);
  }
  const double v = std::get<double>(value);
  if (!std::isfinite(v)) return "-";
  switch (unit) {
    case Unit::gbps:
    case Unit::us:
      return format_fixed(v, v < 10 ? 2 : 1);
    case Unit::ms:
      return format_fixed(v, v < 1 ? 3 : 2);
    case Unit::seconds:
      return format_fixed(v, 6);
    case Unit::ratio:
      return format_fixed(v, 2) + "x";
    case Unit::percent:
      return format_fixed(v * 100, 1) + "%";
    default:
      return format_fixed(v, v < 100 ? 2 : 1);
  }
}

void render_text(const Report& report, std::ostream& out) {
  TextShown shown;
  render_text_new(report, shown, out);
  render_text_summary(report, out);
}

void render_text_new(const Report& report, TextShown& shown, std::ostream& out) {
  if (!shown.title) out << report.tool << " (ferry " FERRY_VERSION_STRING ")\n";
  shown.title = true;
  render_fields(report.header, out, shown.header_fields);
  shown.header_fields = report.header.size();
  for (; shown.sections < report.sections.size(); ++shown.sections) {
    const Section& section = report.sections[shown.sections];
    if (section.json_only) continue;
    out << "\n" << wrap_text("", section.title, 0, kTextWidth);
    if (!section.columns.empty()) render_table(section, out);
    render_fields(section.fields, out);
    for (const std::string& note : section.notes) out << wrap_text("", note, 2, kTextWidth);
  }
}

void render_text_summary(const Report& report, std::ostream& out) {
  if (report.summary.empty()) return;
  out << "\nSummary (this run's key ratios; docs/PERFORMANCE.md keeps the targets)\n";
  std::size_t width = 0;
  for (const auto& line : report.summary) width = std::max(width, line.first.size());
  for (const auto& [subject, text] : report.summary) {
    out << "  ratio  " << subject << std::string(width - subject.size(), ' ') << "  " << text
        << "\n";
  }
}

void render_json(const Report& report, std::ostream& out) {
  std::vector<std::string> top = {member("tool", quote(report.tool)),
                                  member("ferry_version", quote(FERRY_VERSION_STRING))};
  add_members(top, report.header);
  std::vector<std::string> sections;
  for (const Section& section : report.sections) {
    std::vector<std::string> members = {member("title", quote(section.title))}, units, rows, notes;
    add_members(members, section.fields);
    for (const Field& field : section.fields) {
      if (!names(field.unit).json.empty())
        units.push_back(member(field.key, quote(names(field.unit).json)));
    }
    for (const Column& column : section.columns) {
      if (!names(column.unit).json.empty())
        units.push_back(member(column.key, quote(names(column.unit).json)));
    }
    if (!units.empty()) members.push_back(member("units", block('{', units, 3)));
    for (const std::vector<Value>& row : section.rows) {
      std::vector<std::string> cells;
      for (std::size_t c = 0; c < section.columns.size(); ++c) {
        if (!std::holds_alternative<std::monostate>(row[c]))
          cells.push_back(member(section.columns[c].key, json(row[c])));
      }
      rows.push_back(block('{', cells, 4));
    }
    if (!section.columns.empty()) members.push_back(member("rows", block('[', rows, 3)));
    for (const std::string& note : section.notes) notes.push_back(quote(note));
    if (!notes.empty()) members.push_back(member("notes", block('[', notes, 3)));
    sections.push_back(member(section.key, block('{', members, 2)));
  }
  top.push_back(member("sections", block('{', sections, 1)));
  std::vector<std::string> summary;
  for (const auto& [subject, text] : report.summary) {
    summary.push_back(
        block('{', {member("subject", quote(subject)), member("ratios", quote(text))}, 2));
  }
  if (!summary.empty()) top.push_back(member("summary", block('[', summary, 1)));
  out << block('{', top, 0) << '\n';
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  for (std::uint64_t whole = bytes; whole >= 1024 && unit < 4; whole /= 1024) ++unit;
  const double scaled = static_cast<double>(bytes) / std::pow(1024.0, unit);
  char text[32];
  std::snprintf(text, sizeof text, scaled == std::floor(scaled) ? "%.0f %s" : "%.1f %s", scaled,
                kUnits[unit]);
  return text;
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

std::string wrap_text(std::string_view lead, std::string_view text, std::size_t indent,
                      std::size_t width) {
  std::string out(lead);
  std::size_t column = out.size();
  bool fresh = true;  // nothing of `text` on this line yet
  auto new_line = [&] {
    out += '\n';
    column = 0;
    fresh = true;
  };
  if (!lead.empty() && column >= indent) new_line();
  for (std::size_t at = 0; at < text.size();) {
    if (text[at] == '\n') new_line();  // a line break of the text's own
    if (text[at] == '\n' || text[at] == ' ') {
      ++at;
      continue;
    }
    const std::string_view word =
        text.substr(at, std::min(text.find(' ', at), text.find('\n', at)) - at);
    at += word.size();
    if (!fresh && column + 1 + word.size() > width) new_line();
    const std::size_t gap = column < indent ? indent - column : fresh ? 0 : 1;
    out.append(gap, ' ').append(word);
    column += gap + word.size();
    fresh = false;
  }
  return out + '\n';
}

}  // namespace ferry::cli
