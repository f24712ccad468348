# Install rules: libferry.a, the public headers (with the generated ferry/version.hpp), the CMake
# package (find_package(ferry) gives ferry::ferry), a pkg-config file and, when built, the ferry
# program. docs/ and the README's "Using ferry in your project" say how to consume them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ferry_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)

install(TARGETS ferry EXPORT ferryTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/ferry
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/ferry/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ferry)
install(EXPORT ferryTargets NAMESPACE ferry:: DESTINATION ${ferry_cmake_dir})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ferryConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ferryConfig.cmake
                              INSTALL_DESTINATION ${ferry_cmake_dir})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ferryConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ferryConfig.cmake ${PROJECT_BINARY_DIR}/ferryConfigVersion.cmake
        DESTINATION ${ferry_cmake_dir})

# pkg-config: libferry.a is static, so Libs lists what it needs (threads, dl and, with the CUDA
# backend, the static CUDA runtime) for a plain `pkg-config --libs ferry`.
set(ferry_pc_libs "-L\${libdir} -lferry")
if(FERRY_WITH_CUDA)
  find_package(CUDAToolkit REQUIRED)
  string(APPEND ferry_pc_libs " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt")
endif()
string(APPEND ferry_pc_libs " -pthread")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND ferry_pc_libs " -l${lib}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/ferry.pc.in ${PROJECT_BINARY_DIR}/ferry.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ferry.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(TARGET ferry_cli)
  install(TARGETS ferry_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
