target_sources(loom_kernels PRIVATE matmul.cpp nn_registry.cpp)
