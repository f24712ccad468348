// Teaches doctest to print ferry's enums and statuses by name in failed assertions.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace doctest {

template <>
struct StringMaker<ferry::ErrorCode> {
  static String convert(ferry::ErrorCode code) {
    const std::string name(ferry::to_string(code));
    return String(name.c_str());
  }
};

template <>
struct StringMaker<ferry::Backend> {
  static String convert(ferry::Backend backend) {
    const std::string name(ferry::to_string(backend));
    return String(name.c_str());
  }
};

template <>
struct StringMaker<ferry::Status> {
  static String convert(const ferry::Status& status) {
    const std::string text = status.to_string();
    return String(text.c_str());
  }
};

}  // namespace doctest
