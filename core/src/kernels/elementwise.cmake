# The elementwise family: unary (elementwise.cpp), binary/variadic/Where/Pow
# (elementwise_binary.cpp), Cast/Clip/Identity/Dropout/(De)QuantizeLinear
# (elementwise_misc.cpp), shared helpers (elementwise_common.*).
target_sources(loom_kernels PRIVATE elementwise.cpp elementwise_binary.cpp elementwise_common.cpp
                                    elementwise_misc.cpp elementwise_registry.cpp)
