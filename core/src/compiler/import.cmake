# The ONNX importer and the graph passes it runs (import.hpp).
target_sources(loom_compiler PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/import.cpp
  ${CMAKE_CURRENT_LIST_DIR}/import_attributes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shape_inference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batchnorm_fold.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dead_nodes.cpp)
