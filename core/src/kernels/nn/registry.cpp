#include "kernels/nn/nn.hpp"
#include "kernels/ops.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

void register_nn_kernels(KernelRegistry& r) {
  r.add({"AveragePool", &nn::average_pool_run, &nn::average_pool_infer});
  r.add({"BatchNormalization", &nn::batch_norm_run, &nn::batch_norm_infer});
  r.add({"Conv", &nn::conv_run, &nn::conv_infer});
  r.add({"ConvInteger", &nn::conv_integer_run, &nn::conv_integer_infer});
  r.add({"ConvTranspose", &nn::conv_transpose_run, &nn::conv_transpose_infer});
  r.add({"Gemm", &ops::gemm_run, &ops::gemm_infer});
  r.add({"GlobalAveragePool", &nn::global_average_pool_run, &nn::global_average_pool_infer});
  r.add({"GlobalLpPool", &nn::global_lp_pool_run, &nn::global_lp_pool_infer});
  r.add({"GlobalMaxPool", &nn::global_max_pool_run, &nn::global_max_pool_infer});
  r.add({"GRU", &nn::gru_run, &nn::gru_infer});
  r.add({"InstanceNormalization", &nn::instance_norm_run, &nn::instance_norm_infer});
  r.add({"LayerNormalization", &nn::layer_norm_run, &nn::layer_norm_infer});
  r.add({"GroupNormalization", &nn::group_norm_run, &nn::group_norm_infer});
  r.add({"Col2Im", &nn::col2im_run, &nn::col2im_infer});
  r.add({"LpNormalization", &nn::lp_norm_run, &nn::lp_norm_infer});
  r.add({"LpPool", &nn::lp_pool_run, &nn::lp_pool_infer});
  r.add({"LRN", &nn::lrn_run, &nn::lrn_infer});
  r.add({"LSTM", &nn::lstm_run, &nn::lstm_infer});
  r.add({"GridSample", &nn::grid_sample_run, &nn::grid_sample_infer});
  r.add({"Det", &nn::det_run, &nn::det_infer});
  r.add({"MatMul", &ops::matmul_run, &ops::matmul_infer});
  r.add({"MatMulInteger", &nn::matmul_integer_run, &nn::matmul_integer_infer});
  r.add({"MaxPool", &nn::max_pool_run, &nn::max_pool_infer});
  r.add({"MaxUnpool", &nn::max_unpool_run, &nn::max_unpool_infer});
  r.add({"MeanVarianceNormalization", &nn::mean_variance_norm_run,
         &nn::mean_variance_norm_infer});
  r.add({"QLinearConv", &nn::qlinear_conv_run, &nn::qlinear_conv_infer});
  r.add({"QLinearMatMul", &nn::qlinear_matmul_run, &nn::qlinear_matmul_infer});
  r.add({"RNN", &nn::rnn_run, &nn::rnn_infer});
  r.add({"RoiAlign", &nn::roi_align_run, &nn::roi_align_infer});
}

}  // namespace loom::kernels
