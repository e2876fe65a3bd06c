target_sources(loom_kernels PRIVATE elementwise.cpp elementwise_registry.cpp)
