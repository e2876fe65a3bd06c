#include "kernels/registry_families.hpp"
#include "kernels/shape/ops.hpp"

namespace loom::kernels {

void register_shape_kernels(KernelRegistry& r) {
  using namespace shape;
  r.add({"Reshape", &reshape_run, &reshape_infer});
  r.add({"Flatten", &flatten_run, &flatten_infer});
  r.add({"Squeeze", &squeeze_run, &squeeze_infer});
  r.add({"Unsqueeze", &unsqueeze_run, &unsqueeze_infer});
  r.add({"Shape", &shape_run, &shape_infer});
  r.add({"Size", &size_run, &size_infer});
  r.add({"ConstantOfShape", &constant_of_shape_run, &constant_of_shape_infer});
  r.add({"Range", &range_run, &range_infer});
  r.add({"Transpose", &transpose_run, &transpose_infer});
  r.add({"Concat", &concat_run, &concat_infer});
  r.add({"Split", &split_run, &split_infer});
  r.add({"Slice", &slice_run, &slice_infer});
  r.add({"Gather", &gather_run, &gather_infer});
  r.add({"Expand", &expand_run, &expand_infer});
  r.add({"Tile", &tile_run, &tile_infer});
  r.add({"DepthToSpace", &depth_to_space_run, &depth_to_space_infer});
  r.add({"SpaceToDepth", &space_to_depth_run, &space_to_depth_infer});
  r.add({"Pad", &pad_run, &pad_infer});
  r.add({"Resize", &resize_run, &resize_infer});
  r.add({"Upsample", &upsample_run, &upsample_infer});
  r.add({"GatherElements", &gather_elements_run, &gather_elements_infer});
  r.add({"ScatterElements", &scatter_elements_run, &scatter_elements_infer});
  // Scatter (opsets 9-10) is ScatterElements without 'reduction'.
  r.add({"Scatter", &scatter_elements_run, &scatter_elements_infer});
  r.add({"GatherND", &gather_nd_run, &gather_nd_infer});
  r.add({"ScatterND", &scatter_nd_run, &scatter_nd_infer});
  r.add({"OneHot", &one_hot_run, &one_hot_infer});
  r.add({"ReverseSequence", &reverse_sequence_run, &reverse_sequence_infer});
  r.add({"Trilu", &trilu_run, &trilu_infer});
  r.add({"EyeLike", &eye_like_run, &eye_like_infer});
  r.add({"HannWindow", &hann_window_run, &hann_window_infer});
  r.add({"DFT", &dft_run, &dft_infer});
  r.add({"STFT", &stft_run, &stft_infer});
  r.add({"MelWeightMatrix", &mel_weight_matrix_run, &mel_weight_matrix_infer});
  r.add({"HammingWindow", &hamming_window_run, &hamming_window_infer});
  r.add({"BlackmanWindow", &blackman_window_run, &blackman_window_infer});
  r.add({"NonZero", &nonzero_run, &nonzero_infer});
  r.add({"Compress", &compress_run, &compress_infer});
  r.add({"Unique", &unique_run, &unique_infer});
  r.add({"NonMaxSuppression", &non_max_suppression_run, &non_max_suppression_infer});
}

}  // namespace loom::kernels
