#include "json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace ferry::cli {

namespace {

void write_string(std::ostream& out, std::string_view text) {
  out << '"';
  for (char c : text) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out << escaped;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

}  // namespace

void JsonWriter::newline() {
  out_ << '\n';
  for (std::size_t i = 0; i < levels_.size(); ++i) out_ << "  ";
}

void JsonWriter::before_value() {
  if (after_key_) {  // the key already placed us
    after_key_ = false;
    return;
  }
  if (!levels_.empty()) {
    if (!levels_.back().empty) out_ << ',';
    levels_.back().empty = false;
    newline();
  }
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ << '{';
  levels_.push_back({true, true});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ << '[';
  levels_.push_back({false, true});
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  const bool was_empty = levels_.back().empty;
  levels_.pop_back();
  if (!was_empty) newline();
  out_ << '}';
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  const bool was_empty = levels_.back().empty;
  levels_.pop_back();
  if (!was_empty) newline();
  out_ << ']';
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  before_value();
  write_string(out_, name);
  out_ << ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  before_value();
  write_string(out_, text);
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  before_value();
  out_ << (flag ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::value(std::uint64_t number) {
  before_value();
  out_ << number;
  return *this;
}

JsonWriter& JsonWriter::value(std::int64_t number) {
  before_value();
  out_ << number;
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  before_value();
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", number);
  out_ << text;
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ << "null";
  return *this;
}

void JsonWriter::finish() { out_ << '\n'; }

}  // namespace ferry::cli
