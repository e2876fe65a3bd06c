target_sources(loom_kernels PRIVATE shape_registry.cpp)
