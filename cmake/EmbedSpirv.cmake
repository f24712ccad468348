# Turns a SPIR-V binary into a C++ header holding it as a 4-byte-aligned uint32_t array.
# Run as a script (no python needed):
#   cmake -DINPUT=fill.spv -DOUTPUT=fill.spv.h -DSYMBOL=fill_spv -DSOURCE=fill.comp -P EmbedSpirv.cmake
foreach(required INPUT OUTPUT SYMBOL)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "EmbedSpirv.cmake: -D${required}=... is required")
  endif()
endforeach()

file(SIZE "${INPUT}" byte_count)
math(EXPR word_remainder "${byte_count} % 4")
if(byte_count EQUAL 0 OR NOT word_remainder EQUAL 0)
  message(FATAL_ERROR "${INPUT}: ${byte_count} bytes is not a whole number of SPIR-V words")
endif()
math(EXPR word_count "${byte_count} / 4")

file(READ "${INPUT}" hex HEX)
# SPIR-V files are written in the host's byte order (little endian here); the magic number
# 0x07230203 read little endian starts the file.
string(SUBSTRING "${hex}" 0 8 magic)
if(NOT magic STREQUAL "03022307")
  message(FATAL_ERROR "${INPUT}: not a little-endian SPIR-V module (starts with ${magic})")
endif()
# Each group of 4 bytes b0 b1 b2 b3 becomes the word 0xb3b2b1b0; 8 words per line.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u, " words "${hex}")
string(REPEAT "0x........u, " 8 eight_words)  # CMake regexes have no {n}
string(REGEX REPLACE "(${eight_words})" "\\1\n    " words "${words}")
string(REGEX REPLACE " \n" "\n" words "${words}")
string(REGEX REPLACE "[ \n]+$" "" words "${words}")

if(NOT DEFINED SOURCE)
  set(SOURCE "${INPUT}")
endif()
get_filename_component(source_name "${SOURCE}" NAME)
set(content "// Generated at build time from ${source_name} by cmake/EmbedSpirv.cmake. Do not edit.
#pragma once

#include <cstdint>
#include <span>

namespace ferry::shaders {

alignas(4) inline constexpr std::uint32_t ${SYMBOL}_words[${word_count}] = {
    ${words}
};
inline constexpr std::span<const std::uint32_t> ${SYMBOL}{${SYMBOL}_words};

}  // namespace ferry::shaders
")
# Rewrite only on change so dependants do not rebuild needlessly.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
  if(previous STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${content}")
