# loom_shared_library(<target> OUTPUT_NAME <name> EXPORT_NAME <name>
#                     NAMESPACE <c++ namespace> PARTS <static library>...
#                     [C_VERSION <node> C_SYMBOLS <pattern>...])
# A shared library made of the objects of Loom's static libraries, for
# programs outside the tree: SONAME lib<name>.so.<major>, version
# <project version>, undefined symbols refused at link time, and a version
# script that exports <namespace>:: only (its functions, typeinfo, vtables),
# so the copies of header-only libraries inside (nlohmann_json, flatbuffers,
# Boost, std templates) never stand in for an application's own versions.
# With C_VERSION, the C functions matching C_SYMBOLS (a C API's, such as
# libloom.so's loom/loom.h) are exported too, and every exported symbol gets
# that ELF version node (LOOM_1), so a C application records which version
# of the API it was linked against.
function(loom_shared_library target)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "OUTPUT_NAME;EXPORT_NAME;NAMESPACE;C_VERSION" "PARTS;C_SYMBOLS")
  add_library(${target} SHARED)
  foreach(part IN LISTS A_PARTS)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${part}>)
  endforeach()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${A_OUTPUT_NAME}
    VERSION "${PROJECT_VERSION}"
    SOVERSION "${PROJECT_VERSION_MAJOR}"
    EXPORT_NAME ${A_EXPORT_NAME})
  if(NOT LOOM_FUZZ)  # clang leaves the sanitizer runtime to the program
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  set(ns "${A_NAMESPACE}")
  set(map "${CMAKE_CURRENT_BINARY_DIR}/${target}_exports.map")
  set(node "")
  set(c_symbols "")
  if(A_C_VERSION)
    set(node "${A_C_VERSION} ")
    foreach(symbol IN LISTS A_C_SYMBOLS)
      string(APPEND c_symbols "    ${symbol};\n")
    endforeach()
  endif()
  file(CONFIGURE OUTPUT "${map}" CONTENT [[
@node@{
  global:
@c_symbols@    extern "C++" {
      @ns@::*;
      "typeinfo for @ns@::*";
      "typeinfo name for @ns@::*";
      "vtable for @ns@::*";
      "VTT for @ns@::*";
    };
  local: *;
};
]] @ONLY)
  target_link_options(${target} PRIVATE "-Wl,--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
endfunction()
