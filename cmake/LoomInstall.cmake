# What `cmake --install <build> --prefix P` puts under P (README, "Install"):
#   bin/            loom, loom-plugin-host (installed by tools/), loom-manifest
#   include/loom/   the runtime's public headers, version.hpp, the SDK headers,
#                   graph/graph_generated.h (the graph.fbs reader)
#   lib/            libloom.so -> libloom.so.<major> -> libloom.so.<version>,
#                   libloom-conformance.so (the same way; the conformance suite),
#                   libloom-compiler.so (the same way; the compile side)
#   lib/loom/plugins/   the shipped plugins and their manifests
#   lib/cmake/Loom/ LoomConfig.cmake, LoomConfigVersion.cmake, LoomTargets*.cmake,
#                   LoomPlugin.cmake (loom_add_plugin)
#   lib/pkgconfig/  loom.pc (the runtime), loom-sdk.pc (headers only),
#                   loom-conformance.pc (the suite; needs loom),
#                   loom-compiler.pc (the compile side; needs loom)
#   share/loom/schemas/graph.fbs
# Everything is relocatable: the package files find the prefix from their
# own place (CMake's PACKAGE_PREFIX_DIR, pkg-config's ${pcfiledir}).
include(CMakePackageConfigHelpers)
set(LOOM_INSTALL_CMAKEDIR "lib/cmake/Loom")

install(TARGETS loom-manifest EXPORT LoomTargets RUNTIME DESTINATION bin)

# The SDK: every header under sdk/include (new ones are picked up), the
# generated graph reader and its schema, the plugin build functions.
install(TARGETS loom_sdk loom_graph_schema EXPORT LoomTargets)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/sdk/include/" DESTINATION include)
install(FILES "${LOOM_GRAPH_GENERATED_HEADER}" DESTINATION include/loom/graph)
install(FILES "${PROJECT_SOURCE_DIR}/schemas/graph.fbs" DESTINATION share/loom/schemas)
install(FILES "${PROJECT_SOURCE_DIR}/sdk/cmake/LoomPlugin.cmake"
        DESTINATION "${LOOM_INSTALL_CMAKEDIR}")

# The runtime: libloom.so and its headers. compiler.hpp (loom_compiler) and
# onnx_initializers.hpp (loom_onnx) belong to the compile side, which libloom
# does not contain. core/src (loom_internals) is never installed.
if(TARGET loom_shared)
  install(TARGETS loom_shared EXPORT LoomTargets LIBRARY DESTINATION lib)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/core/include/" DESTINATION include
          PATTERN "compiler.hpp" EXCLUDE
          PATTERN "onnx_initializers.hpp" EXCLUDE)
  install(FILES "${LOOM_VERSION_INCLUDE_DIR}/loom/version.hpp" DESTINATION include/loom)
endif()

# The compile side's library and its header; onnx_initializers.hpp stays
# private to Loom's own tools.
if(TARGET loom_compiler_shared)
  install(TARGETS loom_compiler_shared EXPORT LoomTargets LIBRARY DESTINATION lib)
  install(FILES "${PROJECT_SOURCE_DIR}/core/include/loom/compiler.hpp" DESTINATION include/loom)
endif()

# The conformance suite's library and its one header (loom/conformance.hpp);
# `loom conformance` is its command-line front end.
if(TARGET loom_conformance_shared)
  install(TARGETS loom_conformance_shared EXPORT LoomTargets LIBRARY DESTINATION lib)
  install(FILES "${PROJECT_SOURCE_DIR}/conformance/include/loom/conformance.hpp"
          DESTINATION include/loom)
endif()

# The shipped plugins (not the test fakes), each with its manifest.
foreach(name cpu-simd fpga-stub vulkan-compute)
  string(REPLACE "-" "_" target "loom_plugin_${name}")
  if(TARGET ${target})
    loom_install_plugin(${name} DESTINATION "${LOOM_PLUGIN_SUBDIR}")
  endif()
endforeach()

install(EXPORT LoomTargets NAMESPACE Loom:: DESTINATION "${LOOM_INSTALL_CMAKEDIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/LoomConfig.cmake.in"
  "${CMAKE_BINARY_DIR}/package/LoomConfig.cmake"
  INSTALL_DESTINATION "${LOOM_INSTALL_CMAKEDIR}"
  PATH_VARS LOOM_PLUGIN_SUBDIR)
# 0.x: the SONAME's major is the compatibility promise here too.
write_basic_package_version_file("${CMAKE_BINARY_DIR}/package/LoomConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMajorVersion)
install(FILES "${CMAKE_BINARY_DIR}/package/LoomConfig.cmake"
              "${CMAKE_BINARY_DIR}/package/LoomConfigVersion.cmake"
        DESTINATION "${LOOM_INSTALL_CMAKEDIR}")

configure_file("${PROJECT_SOURCE_DIR}/cmake/loom-sdk.pc.in"
               "${CMAKE_BINARY_DIR}/package/loom-sdk.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/package/loom-sdk.pc" DESTINATION lib/pkgconfig)
if(TARGET loom_shared)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/loom.pc.in"
                 "${CMAKE_BINARY_DIR}/package/loom.pc" @ONLY)
  install(FILES "${CMAKE_BINARY_DIR}/package/loom.pc" DESTINATION lib/pkgconfig)
endif()
if(TARGET loom_compiler_shared)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/loom-compiler.pc.in"
                 "${CMAKE_BINARY_DIR}/package/loom-compiler.pc" @ONLY)
  install(FILES "${CMAKE_BINARY_DIR}/package/loom-compiler.pc" DESTINATION lib/pkgconfig)
endif()
if(TARGET loom_conformance_shared)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/loom-conformance.pc.in"
                 "${CMAKE_BINARY_DIR}/package/loom-conformance.pc" @ONLY)
  install(FILES "${CMAKE_BINARY_DIR}/package/loom-conformance.pc" DESTINATION lib/pkgconfig)
endif()
