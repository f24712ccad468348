# Builds and runs tests/consumer against ferry in one way, as a ctest test (cmake -P):
#   MODE=package    install FERRY_BINARY_DIR into WORK_DIR/prefix, then find_package(ferry)
#   MODE=pkgconfig  the same install, then a plain compiler command from `pkg-config ferry`
#   MODE=source     add_subdirectory(FERRY_SOURCE_DIR) in a fresh build; checks that only the
#                   library is built and that generated files stay in ferry's own binary folder
# Also needs: WORK_DIR (emptied first), CXX (the compiler), GENERATOR.
cmake_minimum_required(VERSION 3.25)
set(consumer_dir ${CMAKE_CURRENT_LIST_DIR})
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}): ${what} failed (${status}):\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

function(check_program program)
  run("running ${program}" ${program})
  if(NOT run_output MATCHES "round trip of 100003 bytes: ok")
    message(FATAL_ERROR "consumer (${MODE}): unexpected output:\n${run_output}")
  endif()
  message(STATUS "${run_output}")
endfunction()

if(MODE STREQUAL "package" OR MODE STREQUAL "pkgconfig")
  run("cmake --install" ${CMAKE_COMMAND} --install ${FERRY_BINARY_DIR} --prefix ${prefix})
  foreach(file include/ferry/ferry.hpp include/ferry/version.hpp include/ferry/ops/normalize.hpp
               lib/libferry.a lib/cmake/ferry/ferryConfig.cmake
               lib/cmake/ferry/ferryConfigVersion.cmake lib/pkgconfig/ferry.pc)
    if(NOT EXISTS ${prefix}/${file})
      message(FATAL_ERROR "consumer (${MODE}): the install tree has no ${file}")
    endif()
  endforeach()
endif()

if(MODE STREQUAL "package")
  run("configure" ${CMAKE_COMMAND} -S ${consumer_dir} -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix} -DFERRY_CONSUMER_MODE=package)
  run("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  check_program(${WORK_DIR}/build/consumer)
elseif(MODE STREQUAL "pkgconfig")
  find_program(pkg_config pkg-config REQUIRED)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  run("pkg-config" ${pkg_config} --cflags --libs ferry)
  string(STRIP "${run_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  # Libraries after the source, as a linker reading left to right needs them.
  run("compile and link" ${CXX} ${consumer_dir}/main.cpp -o ${WORK_DIR}/consumer ${flags})
  check_program(${WORK_DIR}/consumer)
elseif(MODE STREQUAL "source")
  run("configure" ${CMAKE_COMMAND} -S ${consumer_dir} -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DFERRY_CONSUMER_MODE=source -DFERRY_SOURCE_DIR=${FERRY_SOURCE_DIR}
      -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=OFF)
  run("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  check_program(${WORK_DIR}/build/consumer)
  # Only the library: no tests, samples or CLI; generated files in ferry's own binary folder.
  foreach(absent ferry/cli ferry/tests ferry/samples generated include)
    if(EXISTS ${WORK_DIR}/build/${absent})
      message(FATAL_ERROR "consumer (source): ${WORK_DIR}/build/${absent} should not exist")
    endif()
  endforeach()
  if(NOT EXISTS ${WORK_DIR}/build/ferry/include/ferry/version.hpp)
    message(FATAL_ERROR "consumer (source): no ferry/include/ferry/version.hpp in ferry's build folder")
  endif()
else()
  message(FATAL_ERROR "check.cmake: MODE must be package, pkgconfig or source (got '${MODE}')")
endif()
