# find_package(foundry): the foundryc compiler and foundry_add_model() for CMake projects.
#
# `cmake --install` puts it in <prefix>/lib/cmake/foundry/ beside FoundryAddModel.cmake and
# foundry-config-version.cmake, with foundryc in <prefix>/bin. Sets FOUNDRYC (the compiler, unless
# already set), foundry_VERSION and FOUNDRY_PYTHON_DIR (the folder holding the Python loader
# foundry_model.py: <prefix>/share/foundry/python, or the source tree's python/); see
# FoundryAddModel.cmake for foundry_add_model(). From a source tree
# (-Dfoundry_DIR=<foundryc source>/cmake), FOUNDRYC comes from the PATH or the cache.
#
#   find_package(foundry REQUIRED)
#   foundry_add_model(my_model model.pt2 NAME my_model)
#   target_link_libraries(app PRIVATE my_model)
get_filename_component(_foundry_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT FOUNDRYC)
  find_program(FOUNDRYC foundryc HINTS "${_foundry_prefix}/bin" NO_DEFAULT_PATH)
  if(NOT FOUNDRYC)
    find_program(FOUNDRYC foundryc)
  endif()
endif()
if(EXISTS "${_foundry_prefix}/share/foundry/python/foundry_model.py")
  set(FOUNDRY_PYTHON_DIR "${_foundry_prefix}/share/foundry/python")
elseif(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../python/foundry_model.py")
  get_filename_component(FOUNDRY_PYTHON_DIR "${CMAKE_CURRENT_LIST_DIR}/../python" ABSOLUTE)
endif()
unset(_foundry_prefix)
if(NOT FOUNDRYC)
  set(foundry_FOUND FALSE)
  set(foundry_NOT_FOUND_MESSAGE "foundryc was not found beside ${CMAKE_CURRENT_LIST_FILE} nor on the PATH")
  return()
endif()
execute_process(COMMAND "${FOUNDRYC}" --version OUTPUT_VARIABLE _foundry_version OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE _foundry_rc)
if(_foundry_rc EQUAL 0 AND _foundry_version MATCHES "foundryc ([0-9.]+)")
  set(foundry_VERSION "${CMAKE_MATCH_1}")
endif()
unset(_foundry_version)
unset(_foundry_rc)
include("${CMAKE_CURRENT_LIST_DIR}/FoundryAddModel.cmake")
