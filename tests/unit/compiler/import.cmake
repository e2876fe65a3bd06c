# The ONNX importer and its passes (core/src/compiler/import*.cpp).
if(TARGET loom_compiler)
  loom_add_test(compiler_import_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/import_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/import_passes_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/import_errors_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/import_opsets_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/import_contrib_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/import_testdata_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/import_test_util.cpp
    LIBS loom_compiler loom_lowering loom_kernels loom_graph loom_onnx loom_test_onnx_fixtures loom_internals
    LABELS "sanitize"
    NO_DRIVERS)
endif()
