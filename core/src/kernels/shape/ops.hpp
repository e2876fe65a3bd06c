// The shape family's operators, one run/infer pair each (kernel.hpp's
// contract); shape/registry.cpp registers them under their ONNX names.
#pragma once

#include "kernels/kernel.hpp"

namespace loom::kernels::shape {

#define LOOM_SHAPE_DECLARE_OP(name)                                                 \
  Status name##_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs, \
                    const Attributes& attributes);                                  \
  Result<std::vector<TensorType>> name##_infer(std::span<const TensorType> inputs,  \
                                               const Attributes& attributes)

// shape/reshape.cpp: ops that change only the shape, or make new tensors.
LOOM_SHAPE_DECLARE_OP(reshape);
LOOM_SHAPE_DECLARE_OP(flatten);
LOOM_SHAPE_DECLARE_OP(squeeze);
LOOM_SHAPE_DECLARE_OP(unsqueeze);
LOOM_SHAPE_DECLARE_OP(shape);
LOOM_SHAPE_DECLARE_OP(size);
LOOM_SHAPE_DECLARE_OP(constant_of_shape);
LOOM_SHAPE_DECLARE_OP(range);
// shape/move.cpp: ops that move elements.
LOOM_SHAPE_DECLARE_OP(transpose);
LOOM_SHAPE_DECLARE_OP(concat);
// Split without sizes (no 'split' attribute/operand) splits into equal parts,
// one per output. run() counts its outputs; infer() cannot see them and reads
// the count from the attribute 'num_outputs' (the opset-18 name), which a
// caller inferring an older Split must add (the node's output count).
LOOM_SHAPE_DECLARE_OP(split);
LOOM_SHAPE_DECLARE_OP(slice);
LOOM_SHAPE_DECLARE_OP(gather);
LOOM_SHAPE_DECLARE_OP(expand);
LOOM_SHAPE_DECLARE_OP(tile);
LOOM_SHAPE_DECLARE_OP(depth_to_space);
LOOM_SHAPE_DECLARE_OP(space_to_depth);
// shape/generate.cpp: EyeLike and the window functions.
LOOM_SHAPE_DECLARE_OP(eye_like);
LOOM_SHAPE_DECLARE_OP(hann_window);
LOOM_SHAPE_DECLARE_OP(hamming_window);
LOOM_SHAPE_DECLARE_OP(blackman_window);
// shape/spectral.cpp: DFT, STFT, MelWeightMatrix.
LOOM_SHAPE_DECLARE_OP(dft);
LOOM_SHAPE_DECLARE_OP(stft);
LOOM_SHAPE_DECLARE_OP(mel_weight_matrix);
// shape/select.cpp: output shapes decided by operand values.
LOOM_SHAPE_DECLARE_OP(nonzero);
LOOM_SHAPE_DECLARE_OP(compress);
LOOM_SHAPE_DECLARE_OP(unique);
LOOM_SHAPE_DECLARE_OP(non_max_suppression);
// shape/pad.cpp
LOOM_SHAPE_DECLARE_OP(pad);
// shape/resize.cpp
LOOM_SHAPE_DECLARE_OP(resize);
LOOM_SHAPE_DECLARE_OP(upsample);

// shape/index.cpp: index-driven movement.
LOOM_SHAPE_DECLARE_OP(gather_elements);
LOOM_SHAPE_DECLARE_OP(scatter_elements);
LOOM_SHAPE_DECLARE_OP(gather_nd);
LOOM_SHAPE_DECLARE_OP(scatter_nd);
LOOM_SHAPE_DECLARE_OP(one_hot);
LOOM_SHAPE_DECLARE_OP(reverse_sequence);
LOOM_SHAPE_DECLARE_OP(trilu);

#undef LOOM_SHAPE_DECLARE_OP

}  // namespace loom::kernels::shape
