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
loom_add_test(compiler_driver_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/partition_test.cpp ${CMAKE_CURRENT_LIST_DIR}/driver_test.cpp
  LIBS loom_compiler loom_host loom_runtime loom_tensor_files loom_program_file loom_internals
  LABELS sanitize)
target_compile_definitions(compiler_driver_test PRIVATE LOOM_TEST_PLUGIN_DIR="${LOOM_TEST_PLUGIN_DIR}")
add_dependencies(compiler_driver_test loom_fake_plugins)
