# The ops, read from runtime/src/ops/op_list.hpp (the one list of ops), and ferry_add_op(), which
# adds every file of one op, found by its name in each folder, to the ferry target
# (docs/ARCHITECTURE.md, "Adding an op").

# Sets <out_var> to the ops' names, in list order.
function(ferry_list_ops out_var)
  set(op_list ${PROJECT_SOURCE_DIR}/runtime/src/ops/op_list.hpp)
  # An edited op list re-runs CMake, so a new op's files join the build.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${op_list})
  file(READ ${op_list} text)
  # Entries read "  X(name, Type)" (lines end in a backslash, which a CMake list cannot hold).
  string(REGEX MATCHALL "\n  X\\([a-z0-9_]+," entries "${text}")
  set(names)
  foreach(entry IN LISTS entries)
    string(REGEX REPLACE "^\n  X\\(([a-z0-9_]+),$" "\\1" name "${entry}")
    list(APPEND names ${name})
  endforeach()
  if(NOT names)
    message(FATAL_ERROR "no op found in runtime/src/ops/op_list.hpp")
  endif()
  set(${out_var} ${names} PARENT_SCOPE)
endfunction()

# Adds op <op>'s files to the ferry target: its core part (runtime/src/ops/<op>.cpp, and
# <op>_cpu.cpp when its CPU reference has a file of its own), its Vulkan
# pure planning (vulkan/ops/<op>_plan.cpp, built whatever FERRY_VULKAN says, for its unit tests),
# and, when those backends are built, its Vulkan pipeline (vulkan/ops/<op>.cpp) with its shader
# (shaders/<op>.comp, and any shaders/<op>_<variant>.comp, compiled and embedded) and its CUDA
# kernel (cuda_backend/ops/<op>.cu, <op>_kernel.cpp). Call it where the ferry target is defined.
function(ferry_add_op op)
  set(root ${PROJECT_SOURCE_DIR})
  target_sources(ferry PRIVATE ${root}/runtime/src/ops/${op}.cpp)
  if(EXISTS ${root}/runtime/src/ops/${op}_cpu.cpp)
    target_sources(ferry PRIVATE ${root}/runtime/src/ops/${op}_cpu.cpp)
  endif()
  if(EXISTS ${root}/runtime/src/vulkan/ops/${op}_plan.cpp)
    target_sources(ferry PRIVATE ${root}/runtime/src/vulkan/ops/${op}_plan.cpp)
  endif()
  if(FERRY_VULKAN)
    ferry_compile_shader(${root}/shaders/${op}.comp ${op}_spv shader_header)
    target_sources(ferry PRIVATE ${root}/runtime/src/vulkan/ops/${op}.cpp ${shader_header})
    # Variants that need optional device capabilities (a module of their own, made only where
    # the device has them): shaders/<op>_<variant>.comp, embedded as <op>_<variant>_spv.
    file(GLOB variants CONFIGURE_DEPENDS ${root}/shaders/${op}_*.comp)
    foreach(variant IN LISTS variants)
      get_filename_component(name ${variant} NAME_WE)
      ferry_compile_shader(${variant} ${name}_spv variant_header)
      target_sources(ferry PRIVATE ${variant_header})
    endforeach()
  endif()
  if(FERRY_WITH_CUDA)
    target_sources(ferry PRIVATE ${root}/cuda_backend/ops/${op}.cu
                                 ${root}/cuda_backend/ops/${op}_kernel.cpp)
  endif()
endfunction()
