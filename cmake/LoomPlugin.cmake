# loom_add_plugin(<name>
#     SOURCES <src>...
#     LOADER_KEYS <key>...
#     [VERSION <x.y.z>]            (default: the project's version)
#     [ABI_MIN <major.minor>]      (default: 1.0)
#     [ABI_MAX <major.minor>]      (default: 1.1, what plugin.hpp's sdk::query speaks)
#     [OUTPUT_DIR <dir>])          (default: LOOM_PLUGIN_OUTPUT_DIR)
#
# Builds every plugin the same way: a MODULE library with hidden visibility
# whose one exported symbol is loom_plugin_query, linked only against the SDK,
# plus its manifest <name>.loom-plugin.json beside it, written after each link
# by the loom-manifest tool (which records the library's content hash).
# The target is named loom_plugin_<name with - replaced by _>.
function(loom_add_plugin name)
  cmake_parse_arguments(P "" "VERSION;ABI_MIN;ABI_MAX;OUTPUT_DIR" "SOURCES;LOADER_KEYS" ${ARGN})
  if(NOT P_SOURCES)
    message(FATAL_ERROR "loom_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT P_LOADER_KEYS)
    message(FATAL_ERROR "loom_add_plugin(${name}): LOADER_KEYS is required")
  endif()
  if(NOT P_VERSION)
    set(P_VERSION "${PROJECT_VERSION}")
  endif()
  if(NOT P_ABI_MIN)
    set(P_ABI_MIN "1.0")
  endif()
  if(NOT P_ABI_MAX)
    set(P_ABI_MAX "1.1")
  endif()
  if(NOT P_OUTPUT_DIR)
    set(P_OUTPUT_DIR "${LOOM_PLUGIN_OUTPUT_DIR}")
  endif()
  string(REPLACE "-" "_" target "loom_plugin_${name}")
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "loom_${name}"
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIR}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${target} PRIVATE Loom::sdk)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  set(key_args "")
  foreach(key IN LISTS P_LOADER_KEYS)
    list(APPEND key_args --loader-key "${key}")
  endforeach()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND loom-manifest
            --library "$<TARGET_FILE:${target}>"
            --name "${name}" --version "${P_VERSION}"
            --abi-min "${P_ABI_MIN}" --abi-max "${P_ABI_MAX}"
            ${key_args}
            --output "${P_OUTPUT_DIR}/${name}.loom-plugin.json"
    VERBATIM)
  add_dependencies(${target} loom-manifest)
  set_property(GLOBAL APPEND PROPERTY LOOM_PLUGIN_TARGETS ${target})
endfunction()
