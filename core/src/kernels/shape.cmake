target_sources(loom_kernels PRIVATE shape_registry.cpp shape_common.cpp shape_reshape.cpp
                                    shape_move.cpp shape_pad.cpp shape_resize.cpp
                                    shape_index.cpp)
