#include "kernels/ops.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

void register_reduce_kernels(KernelRegistry& r) {
  using namespace reduce;
  r.add({"ReduceSum", &reduce_sum_run, &reduce_sum_infer});
  r.add({"ReduceMean", &reduce_mean_run, &reduce_mean_infer});
  r.add({"ReduceMax", &reduce_max_run, &reduce_max_infer});
  r.add({"ReduceMin", &reduce_min_run, &reduce_min_infer});
  r.add({"ReduceProd", &reduce_prod_run, &reduce_prod_infer});
  r.add({"ReduceL1", &reduce_l1_run, &reduce_l1_infer});
  r.add({"ReduceL2", &reduce_l2_run, &reduce_l2_infer});
  r.add({"ReduceLogSum", &reduce_log_sum_run, &reduce_log_sum_infer});
  r.add({"ReduceLogSumExp", &reduce_log_sum_exp_run, &reduce_log_sum_exp_infer});
  r.add({"ReduceSumSquare", &reduce_sum_square_run, &reduce_sum_square_infer});
  r.add({"ArgMax", &argmax_run, &argmax_infer});
  r.add({"ArgMin", &argmin_run, &argmin_infer});
  r.add({"TopK", &topk_run, &topk_infer});
  r.add({"CumSum", &cumsum_run, &cumsum_infer});
  r.add({"Einsum", &einsum_run, &einsum_infer});
  r.add({"Softmax", &ops::softmax_run, &ops::softmax_infer});
  r.add({"LogSoftmax", &log_softmax_run, &log_softmax_infer});
  r.add({"Hardmax", &hardmax_run, &hardmax_infer});
  r.add({"NegativeLogLikelihoodLoss", &nll_loss_run, &nll_loss_infer});
  r.add({"SoftmaxCrossEntropyLoss", &softmax_cross_entropy_loss_run, &softmax_cross_entropy_loss_infer});
}

}  // namespace loom::kernels
