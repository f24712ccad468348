// The result tree every command fills, and its two renderings: aligned text tables for people,
// JSON for machines. Commands say what they measured; how it is shown is decided here only.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ferry::cli {

// How a value reads: one text format per unit (the unit itself is in the column header, or
// follows a field's value) and one JSON form (the number as measured). bytes: "64 KiB" (a count
// in JSON); gbps: 1e9 bytes per second; number: a rate or other plain number; ratio: "1.23x";
// percent: a fraction shown as "95.6%".
enum class Unit : std::uint8_t {
  text, count, flag, bytes, gbps, ms, us, seconds, number, ratio, percent
};

// Empty (a blank cell, left out of JSON), text, a count or flag, or a measured number (NaN: not
// measured, "-" in text, null in JSON).
using Value = std::variant<std::monostate, std::string, std::uint64_t, bool, double>;

struct Column {
  std::string header = {};  // "pool/direct"
  std::string key = {};     // "pool_over_direct"
  Unit unit = Unit::text;
  bool json_only = false;  // raw figures the text leaves out (seconds, repetitions)
  bool group = false;      // text: printed only where it changes from the row above
};

struct Field {
  std::string label = {};  // text: "per-transfer CPU overhead"
  std::string key = {};    // JSON: "submit_overhead_us"
  Value value = {};
  Unit unit = Unit::text;
  bool json_only = false;
};

// A titled part of a report: fields (label and value lines), a table, notes under them.
struct Section {
  std::string title = {};
  std::string key = {};  // the JSON member under "sections"
  std::vector<Field> fields = {};
  std::vector<Column> columns = {};
  std::vector<std::vector<Value>> rows = {};  // one Value per column
  std::vector<std::string> notes = {};
  bool json_only = false;

  void add_row(std::vector<Value> row) { rows.push_back(std::move(row)); }
};

struct Report {
  std::string tool = {};              // "ferry bench transfer"
  std::vector<Field> header = {};     // date, command, device, settings, method
  std::deque<Section> sections = {};  // a deque: add_section() keeps earlier references valid
  // Lines "  ratio  <subject>  <text>" under "Summary": the run's key ratios, one greppable
  // prefix for scripts (scripts/device-run.sh copies them into its summary).
  std::vector<std::pair<std::string, std::string>> summary = {};

  Section& add_section(std::string title, std::string key) {
    sections.push_back({std::move(title), std::move(key), {}, {}, {}, {}, false});
    return sections.back();
  }
  // The header's "method" (how the figures were measured), and its settings as JSON members.
  void add_method(std::string text, std::initializer_list<std::pair<const char*, Value>> settings) {
    header.push_back({"method", "method", std::move(text)});
    for (const auto& [key, value] : settings) header.push_back({"", key, value, Unit::text, true});
  }
};

void render_text(const Report& report, std::ostream& out);
// How much of a report has been printed as text, for a bench that prints as it measures.
struct TextShown {
  bool title = false;
  std::size_t header_fields = 0;
  std::size_t sections = 0;
};
// The title (once), then the header fields and sections added since `shown`, which moves on.
// A section printed is not printed again: print a section once it is complete.
void render_text_new(const Report& report, TextShown& shown, std::ostream& out);
void render_text_summary(const Report& report, std::ostream& out);
void render_json(const Report& report, std::ostream& out);

// A value as a table cell shows it: "1.23x", "95.6%", "64 KiB", "-" for NaN.
std::string format_value(const Value& value, Unit unit);
inline std::string ratio_text(double ratio) { return format_value(ratio, Unit::ratio); }
std::string format_bytes(std::uint64_t bytes);  // 65536: "64 KiB", 1610612736: "1.5 GiB"
std::string utc_timestamp();                    // "2026-11-22 03:48:05 UTC"
// `text` as a JSON string literal, quotes included.
std::string json_quote(std::string_view text);
// `lead` (e.g. "  --sizes LIST"), then `text` word-wrapped to `width` columns, every line of it
// from column `indent` (on a line of its own when `lead` reaches that column); newlines in
// `text` kept. Ends with a newline.
std::string wrap_text(std::string_view lead, std::string_view text, std::size_t indent,
                      std::size_t width = 100);

}  // namespace ferry::cli
