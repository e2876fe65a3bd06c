# Building Loom plugins, the same way in Loom's tree and outside it. Installed
# with the SDK (lib/cmake/Loom/) and included by LoomConfig.cmake, so after
# find_package(Loom) a vendor's project has the functions below.
#
# loom_add_plugin(<name>
#     SOURCES <src>...
#     LOADER_KEYS <key>...
#     [VERSION <x.y.z>]            (default: the calling project's version)
#     [ABI_MIN <major.minor>]      (default: 1.0)
#     [ABI_MAX <major.minor>]      (default: 1.2, what plugin.hpp's sdk::query speaks)
#     [OUTPUT_DIR <dir>])          (default: LOOM_PLUGIN_OUTPUT_DIR if set,
#                                   else <build dir>/lib/loom/plugins)
#
# Builds a MODULE library linked only against the SDK (Loom::sdk), with hidden
# visibility and a linker version script, so that its one exported symbol is
# loom_plugin_query; and writes its manifest <name>.loom-plugin.json beside it
# after each link, with the Loom::loom-manifest tool (which records the
# library's content hash). The target is named loom_plugin_<name with - as _>.
#
# The library is linked with its install RPATH (BUILD_WITH_INSTALL_RPATH): an
# install step that rewrote the RPATH would change the bytes the manifest's
# hash was taken of. A plugin that needs libraries outside the system's
# folders sets INSTALL_RPATH (for example "$ORIGIN") on the target.
#
# loom_install_plugin(<name> [DESTINATION <dir>])  (default: lib/loom/plugins)
#
# Installs the library and its manifest side by side, unchanged.

function(loom_add_plugin name)
  cmake_parse_arguments(P "" "VERSION;ABI_MIN;ABI_MAX;OUTPUT_DIR" "SOURCES;LOADER_KEYS" ${ARGN})
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "loom_add_plugin(${name}): unknown arguments ${P_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "loom_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT P_LOADER_KEYS)
    message(FATAL_ERROR "loom_add_plugin(${name}): LOADER_KEYS is required")
  endif()
  if(NOT P_VERSION)
    set(P_VERSION "${PROJECT_VERSION}")
  endif()
  if(NOT P_VERSION)
    message(FATAL_ERROR "loom_add_plugin(${name}): no VERSION given and the project has none "
                        "(project(... VERSION x.y.z))")
  endif()
  if(NOT P_ABI_MIN)
    set(P_ABI_MIN "1.0")
  endif()
  if(NOT P_ABI_MAX)
    set(P_ABI_MAX "1.2")
  endif()
  if(NOT P_OUTPUT_DIR)
    if(LOOM_PLUGIN_OUTPUT_DIR)
      set(P_OUTPUT_DIR "${LOOM_PLUGIN_OUTPUT_DIR}")
    else()
      set(P_OUTPUT_DIR "${CMAKE_BINARY_DIR}/lib/loom/plugins")
    endif()
  endif()
  if(NOT TARGET Loom::sdk OR NOT TARGET Loom::loom-manifest)
    message(FATAL_ERROR "loom_add_plugin(${name}): targets Loom::sdk and Loom::loom-manifest "
                        "are missing; call find_package(Loom) first")
  endif()

  # One version script for every plugin of the project, written only when
  # its text changes (so reconfiguring relinks nothing).
  set(exports "${CMAKE_BINARY_DIR}/loom_plugin_exports.map")
  file(CONFIGURE OUTPUT "${exports}"
       CONTENT "/* Written by loom_add_plugin: a Loom plugin exports loom_plugin_query only. */\n{\n  global: loom_plugin_query;\n  local: *;\n};\n")

  string(REPLACE "-" "_" target "loom_plugin_${name}")
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "loom_${name}"
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIR}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    BUILD_WITH_INSTALL_RPATH ON
    LINK_DEPENDS "${exports}"
    LOOM_PLUGIN_NAME "${name}"
    LOOM_PLUGIN_MANIFEST "${P_OUTPUT_DIR}/${name}.loom-plugin.json")
  target_link_libraries(${target} PRIVATE Loom::sdk)
  target_link_options(${target} PRIVATE -Wl,--no-undefined "-Wl,--version-script=${exports}")
  set(key_args "")
  foreach(key IN LISTS P_LOADER_KEYS)
    list(APPEND key_args --loader-key "${key}")
  endforeach()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND Loom::loom-manifest
            --library "$<TARGET_FILE:${target}>"
            --name "${name}" --version "${P_VERSION}"
            --abi-min "${P_ABI_MIN}" --abi-max "${P_ABI_MAX}"
            ${key_args}
            --output "${P_OUTPUT_DIR}/${name}.loom-plugin.json"
    VERBATIM)
  # In Loom's tree Loom::loom-manifest is an alias of the tool's target,
  # which must be built first; installed, it is an imported program.
  get_target_property(tool Loom::loom-manifest ALIASED_TARGET)
  if(tool)
    add_dependencies(${target} ${tool})
  endif()
  set_property(GLOBAL APPEND PROPERTY LOOM_PLUGIN_TARGETS ${target})
endfunction()

function(loom_install_plugin name)
  cmake_parse_arguments(P "" "DESTINATION" "" ${ARGN})
  if(NOT P_DESTINATION)
    set(P_DESTINATION "lib/loom/plugins")
  endif()
  string(REPLACE "-" "_" target "loom_plugin_${name}")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "loom_install_plugin(${name}): no target ${target} (loom_add_plugin first)")
  endif()
  get_target_property(manifest ${target} LOOM_PLUGIN_MANIFEST)
  install(TARGETS ${target} LIBRARY DESTINATION "${P_DESTINATION}")
  install(FILES "${manifest}" DESTINATION "${P_DESTINATION}")
endfunction()
