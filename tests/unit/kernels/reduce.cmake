loom_add_test(kernels_reduce_test
  SOURCES reduce_test.cpp reduce_ops_test.cpp
  LIBS loom_kernels
  LABELS sanitize)
