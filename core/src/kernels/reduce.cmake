target_sources(loom_kernels PRIVATE softmax.cpp reduce_registry.cpp)
