loom_add_test(kernels_nn_test
  SOURCES nn_conv_test.cpp nn_matmul_test.cpp nn_pool_norm_test.cpp
  LIBS loom_kernels
  LABELS sanitize)
