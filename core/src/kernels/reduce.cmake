target_sources(loom_kernels PRIVATE softmax.cpp reduce.cpp reduce_index.cpp einsum.cpp reduce_registry.cpp)
