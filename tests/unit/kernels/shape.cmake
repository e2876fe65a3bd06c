loom_add_test(kernels_shape_test
  SOURCES shape_reshape_test.cpp shape_move_test.cpp shape_resize_test.cpp shape_index_test.cpp
  LIBS loom_kernels
  LABELS sanitize)
