# Partitioning, plugin compile, program emission and compile_onnx_file.
target_sources(loom_compiler PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/partition.cpp
  ${CMAKE_CURRENT_LIST_DIR}/emit.cpp
  ${CMAKE_CURRENT_LIST_DIR}/driver.cpp
  ${CMAKE_CURRENT_LIST_DIR}/driver_onnx.cpp)
target_link_libraries(loom_compiler PRIVATE nlohmann_json::nlohmann_json)
