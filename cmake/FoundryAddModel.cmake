# foundry_add_model(): compile a torch.export model with foundryc at build time and link it.
#
#   find_package(foundry REQUIRED)   # after `cmake --install`: includes this file
#   # (or, from a source tree: include(FoundryAddModel) with foundryc's cmake/ in CMAKE_MODULE_PATH)
#   foundry_add_model(<target> <model.pt2 | extracted archive folder>
#                     [NAME <c prefix>]          # the C API's prefix (foundryc --name); default: <target>
#                     [OUTPUT_DIR <dir>]         # default: ${CMAKE_CURRENT_BINARY_DIR}/<target>
#                     [OPTIONS <foundryc options>...])
#   target_link_libraries(app PRIVATE <target>)
#
# <target> is an INTERFACE library: linking it adds OUTPUT_DIR to the include path (model.h),
# links OUTPUT_DIR/model.so and relinks when it changes. foundryc runs when the model changes:
# it writes a depfile naming the model's files. OUTPUT_DIR also holds weights.bin, which
# NAME_create() reads at run time (the target's FOUNDRY_MODEL_DIR property names the folder).
# The foundryc executable: the FOUNDRYC variable, else foundryc found on the PATH.
#
# model.so has no SONAME, so it is linked by its absolute path, which the program records: several
# models link into one program, and the program finds them where they were built (not relocatable).
include_guard(GLOBAL)

function(foundry_add_model target model)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "NAME;OUTPUT_DIR" "OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "foundry_add_model: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NAME)
    string(TOLOWER "${target}" ARG_NAME)
    string(MAKE_C_IDENTIFIER "${ARG_NAME}" ARG_NAME)
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/${target})
  endif()
  cmake_path(ABSOLUTE_PATH model BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
  cmake_path(ABSOLUTE_PATH ARG_OUTPUT_DIR BASE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR} NORMALIZE)
  if(NOT FOUNDRYC)
    find_program(FOUNDRYC foundryc REQUIRED)
  endif()

  set(dir ${ARG_OUTPUT_DIR})
  # foundryc replaces the output folder as a whole: the depfile lives beside it.
  set(depfile ${dir}.d)
  add_custom_command(
    OUTPUT ${dir}/model.so ${dir}/model.h
    COMMAND ${FOUNDRYC} ${model} -o ${dir} --name ${ARG_NAME} --depfile ${depfile} ${ARG_OPTIONS}
    DEPENDS ${model}
    DEPFILE ${depfile}
    COMMENT "Compiling ${model} with foundryc"
    VERBATIM)
  add_custom_target(${target}_foundryc DEPENDS ${dir}/model.so ${dir}/model.h)

  add_library(${target} INTERFACE)
  target_include_directories(${target} INTERFACE ${dir})
  # Given to the linker as it is: CMake would shorten the path (a build-relative path, or -lmodel),
  # and the program would then look for the library relative to its working directory.
  target_link_libraries(${target} INTERFACE "-Wl,${dir}/model.so")
  set_target_properties(${target} PROPERTIES INTERFACE_LINK_DEPENDS ${dir}/model.so FOUNDRY_MODEL_DIR ${dir})
  add_dependencies(${target} ${target}_foundryc)
endfunction()
