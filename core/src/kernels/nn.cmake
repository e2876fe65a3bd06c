target_sources(loom_kernels PRIVATE matmul.cpp nn_common.cpp nn_conv.cpp nn_conv_transpose.cpp
                                    nn_norm.cpp nn_pool.cpp nn_registry.cpp)
