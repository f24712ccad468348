# Build-time shader pipeline: GLSL -> glslangValidator -> spirv-opt -O -> spirv-val -> a header
# in the build tree holding the SPIR-V as a uint32_t array. No SPIR-V is ever kept in the source
# tree. Edits to a shader or to any file it #includes rebuild it (glslang writes a depfile).

find_program(FERRY_GLSLANG_VALIDATOR glslangValidator REQUIRED)
find_program(FERRY_SPIRV_OPT spirv-opt REQUIRED)
find_program(FERRY_SPIRV_VAL spirv-val REQUIRED)

set(FERRY_SPIRV_TARGET_ENV vulkan1.3)
set(FERRY_EMBED_SPIRV_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/EmbedSpirv.cmake)

# ferry_compile_shader(<source> <symbol> <header-out-var>)
# Compiles <source> (relative to the current source dir) and generates
# ${PROJECT_BINARY_DIR}/generated/ferry/shaders/<source name>.spv.h declaring
# ferry::shaders::<symbol> (a std::span<const std::uint32_t>). Sets <header-out-var> to its path.
function(ferry_compile_shader source symbol header_var)
  get_filename_component(source_path "${source}" ABSOLUTE)
  get_filename_component(source_name "${source}" NAME)
  set(spv_dir ${CMAKE_CURRENT_BINARY_DIR}/spv)
  set(unoptimized ${spv_dir}/${source_name}.unopt.spv)
  set(optimized ${spv_dir}/${source_name}.spv)
  set(depfile ${spv_dir}/${source_name}.d)
  set(header ${PROJECT_BINARY_DIR}/generated/ferry/shaders/${source_name}.spv.h)

  add_custom_command(
    OUTPUT ${unoptimized}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${spv_dir}
    COMMAND ${FERRY_GLSLANG_VALIDATOR} --quiet --target-env ${FERRY_SPIRV_TARGET_ENV}
            --depfile ${depfile} -o ${unoptimized} ${source_path}
    MAIN_DEPENDENCY ${source_path}
    DEPFILE ${depfile}
    COMMENT "glslangValidator ${source_name}"
    VERBATIM)

  add_custom_command(
    OUTPUT ${header}
    COMMAND ${FERRY_SPIRV_OPT} -O ${unoptimized} -o ${optimized}
    COMMAND ${FERRY_SPIRV_VAL} --target-env ${FERRY_SPIRV_TARGET_ENV} ${optimized}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${optimized} -DOUTPUT=${header} -DSYMBOL=${symbol}
            -DSOURCE=${source_path} -P ${FERRY_EMBED_SPIRV_SCRIPT}
    DEPENDS ${unoptimized} ${FERRY_EMBED_SPIRV_SCRIPT}
    BYPRODUCTS ${optimized}
    COMMENT "spirv-opt, spirv-val, embed ${source_name}"
    VERBATIM)

  set(${header_var} ${header} PARENT_SCOPE)
endfunction()
