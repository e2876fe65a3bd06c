# Tests of the compiler's back half: graph codec, partitioner, emission and
# the pipeline against the fake plugin's compile entries.
if(NOT TARGET loom_compiler)
  return()
endif()
loom_add_test(compiler_codec_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/codec_test.cpp
  LIBS loom_graph loom_graph_schema loom_internals
  LABELS sanitize
  NO_DRIVERS)
# Also open-shape programs end to end (open_shapes_test.cpp, open_shapes_targets_test.cpp): compiled from
# ONNX models built in code, run on the shipped plugins.
loom_add_test(compiler_driver_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/partition_test.cpp ${CMAKE_CURRENT_LIST_DIR}/driver_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/open_shapes_test.cpp ${CMAKE_CURRENT_LIST_DIR}/open_shapes_targets_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/control_flow_test.cpp ${CMAKE_CURRENT_LIST_DIR}/import_test_util.cpp
  LIBS loom_compiler loom_lowering loom_host loom_runtime loom_tensor_files loom_program_file
       loom_kernels loom_graph loom_onnx loom_test_onnx_fixtures loom_internals
  LABELS sanitize)
target_compile_definitions(compiler_driver_test PRIVATE LOOM_TEST_PLUGIN_DIR="${LOOM_TEST_PLUGIN_DIR}")
add_dependencies(compiler_driver_test loom_fake_plugins loom_plugin_cpu_simd)
foreach(plugin loom_plugin_vulkan_compute loom_plugin_fpga_stub)
  if(TARGET ${plugin})
    add_dependencies(compiler_driver_test ${plugin})
  endif()
endforeach()
