loom_add_test(kernels_elementwise_test
  SOURCES elementwise_test.cpp
  LIBS loom_kernels
  LABELS sanitize)
