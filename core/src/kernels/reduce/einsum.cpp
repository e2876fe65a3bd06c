// Einsum (opset 12): any valid equation. Subscripts are letters (A-Z, a-z);
// "..." stands for the leading-broadcast dimensions, which broadcast across
// operands NumPy style (right-aligned, size 1 stretches). With "->" the
// output is what follows it; without, it is the ellipsis dimensions and then
// every letter that occurs exactly once, in ASCII order. A letter repeated
// within one operand takes its diagonal; letters not in the output are
// summed over.
//
// The kernel walks the full index space of every label once (a reference,
// not a fast path): each operand's offset is the sum over its labels of
// index * stride, where a label repeated in an operand adds its strides.
#include <algorithm>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::reduce {
namespace {

constexpr int kLetters = 52;  // ids 0-25 'A'-'Z', 26-51 'a'-'z'; ellipsis dims from 52

struct Term {
  std::vector<int> labels;  // letters; -1 marks the ellipsis
  bool ellipsis = false;
};

struct Spec {
  std::vector<std::vector<int>> in_labels;  // per operand, one label per dimension
  std::vector<int> out_labels;
  std::vector<int> loop_labels;  // output labels first, then the summed ones
  std::vector<int64_t> size;     // per label id
  Shape out_shape;
};

Status bad(std::string_view equation, const std::string& why) {
  return invalid_argument("Einsum: equation '" + std::string(equation) + "': " + why);
}

Result<Term> parse_term(std::string_view eq, std::string_view t) {
  Term term;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c >= 'A' && c <= 'Z') {
      term.labels.push_back(c - 'A');
    } else if (c >= 'a' && c <= 'z') {
      term.labels.push_back(26 + (c - 'a'));
    } else if (c == '.') {
      if (t.substr(i, 3) != "..." || term.ellipsis) {
        return bad(eq, "'.' must appear as one '...' per term");
      }
      term.ellipsis = true;
      term.labels.push_back(-1);
      i += 2;
    } else {
      return bad(eq, std::string("unexpected character '") + c + "'");
    }
  }
  return term;
}

Result<Spec> analyze(std::string_view equation, const std::vector<std::span<const int64_t>>& shapes) {
  std::string eq;
  for (char c : equation) {
    if (c != ' ') eq.push_back(c);
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    LOOM_ASSIGN_OR_RETURN(Term t, parse_term(equation, std::string_view(lhs).substr(
                                                           start, comma == std::string::npos
                                                                      ? std::string::npos
                                                                      : comma - start)));
    terms.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size()) {
    return bad(equation, "has " + std::to_string(terms.size()) + " operand terms but the node has " +
                             std::to_string(shapes.size()) + " inputs");
  }
  // Ellipsis widths, and the widest one: the broadcast dimensions.
  std::vector<size_t> ell(terms.size(), 0);
  size_t width = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const size_t letters = terms[k].labels.size() - (terms[k].ellipsis ? 1 : 0);
    const size_t rank = shapes[k].size();
    if (terms[k].ellipsis ? rank < letters : rank != letters) {
      return bad(equation, "term " + std::to_string(k) + " has " + std::to_string(letters) +
                               " subscripts but input " + std::to_string(k) + " has shape " +
                               shape_to_string(shapes[k]));
    }
    ell[k] = rank - letters;
    width = std::max(width, ell[k]);
  }
  Spec s;
  s.size.assign(kLetters + width, -1);
  std::vector<int> count(kLetters + width, 0);
  for (size_t k = 0; k < terms.size(); ++k) {
    std::vector<int>& labels = s.in_labels.emplace_back();
    for (int l : terms[k].labels) {
      if (l >= 0) {
        labels.push_back(l);
        continue;
      }
      for (size_t j = 0; j < ell[k]; ++j) labels.push_back(kLetters + static_cast<int>(width - ell[k] + j));
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      const int l = labels[d];
      const int64_t dim = shapes[k][d];
      ++count[l];
      if (s.size[l] < 0 || s.size[l] == dim) {
        s.size[l] = dim;
      } else if (l >= kLetters && (s.size[l] == 1 || dim == 1)) {
        s.size[l] = std::max(s.size[l], dim);  // ellipsis dimensions broadcast
      } else {
        return bad(equation, "a subscript has size " + std::to_string(s.size[l]) +
                                 " in one place and " + std::to_string(dim) + " in input " +
                                 std::to_string(k) + " of shape " + shape_to_string(shapes[k]));
      }
    }
  }
  if (arrow != std::string::npos) {
    LOOM_ASSIGN_OR_RETURN(Term out, parse_term(equation, std::string_view(eq).substr(arrow + 2)));
    for (int l : out.labels) {
      if (l < 0) {
        for (size_t j = 0; j < width; ++j) s.out_labels.push_back(kLetters + static_cast<int>(j));
        continue;
      }
      if (count[l] == 0) return bad(equation, "an output subscript occurs in no input");
      if (std::find(s.out_labels.begin(), s.out_labels.end(), l) != s.out_labels.end()) {
        return bad(equation, "an output subscript occurs twice");
      }
      s.out_labels.push_back(l);
    }
    if (width > 0 && !out.ellipsis) {
      // NumPy (the ONNX reference) does not sum broadcast dimensions away.
      return bad(equation, "the inputs have '...' dimensions but the output has no '...'");
    }
  } else {
    for (size_t j = 0; j < width; ++j) s.out_labels.push_back(kLetters + static_cast<int>(j));
    for (int l = 0; l < kLetters; ++l) {
      if (count[l] == 1) s.out_labels.push_back(l);
    }
  }
  s.loop_labels = s.out_labels;
  for (int l = 0; l < static_cast<int>(count.size()); ++l) {
    if (count[l] > 0 && std::find(s.out_labels.begin(), s.out_labels.end(), l) == s.out_labels.end()) {
      s.loop_labels.push_back(l);
    }
  }
  for (int l : s.out_labels) s.out_shape.push_back(s.size[l]);
  Shape loop_shape;
  for (int l : s.loop_labels) loop_shape.push_back(s.size[l]);
  if (!element_count(loop_shape).ok()) {
    return bad(equation, "the index space " + shape_to_string(loop_shape) + " is too large");
  }
  return s;
}

template <typename T, typename A>
void contract(const Spec& s, std::span<const TensorRef> inputs, T* y, int64_t out_count) {
  const size_t nl = s.loop_labels.size();
  const size_t nin = inputs.size();
  // stride[k][i]: how far operand k moves when loop label i advances.
  std::vector<std::vector<int64_t>> stride(nin + 1, std::vector<int64_t>(nl, 0));
  for (size_t k = 0; k <= nin; ++k) {
    const std::vector<int>& labels = k < nin ? s.in_labels[k] : s.out_labels;
    const Shape& shape = k < nin ? Shape(inputs[k].shape.begin(), inputs[k].shape.end()) : s.out_shape;
    const std::vector<int64_t> st = strides_of(shape);
    for (size_t d = 0; d < labels.size(); ++d) {
      if (shape[d] == 1 && s.size[labels[d]] != 1) continue;  // broadcast
      const size_t i = static_cast<size_t>(
          std::find(s.loop_labels.begin(), s.loop_labels.end(), labels[d]) - s.loop_labels.begin());
      stride[k][i] += st[d];
    }
  }
  std::vector<A> acc(static_cast<size_t>(out_count), A(0));
  int64_t total = 1;
  for (int l : s.loop_labels) total *= s.size[l];
  std::vector<int64_t> idx(nl, 0), off(nin + 1, 0);
  for (int64_t it = 0; it < total; ++it) {
    A p = A(1);
    for (size_t k = 0; k < nin; ++k) {
      const T v = static_cast<const T*>(inputs[k].data)[off[k]];
      if constexpr (std::is_same_v<A, double>) {
        p *= to_double(v);
      } else if constexpr (std::is_signed_v<T>) {
        p *= static_cast<uint64_t>(static_cast<int64_t>(v));  // wraps like NumPy
      } else {
        p *= static_cast<uint64_t>(v);
      }
    }
    acc[off[nin]] += p;
    for (size_t i = nl; i-- > 0;) {
      const int64_t dim = s.size[s.loop_labels[i]];
      if (++idx[i] < dim) {
        for (size_t k = 0; k <= nin; ++k) off[k] += stride[k][i];
        break;
      }
      for (size_t k = 0; k <= nin; ++k) off[k] -= stride[k][i] * (dim - 1);
      idx[i] = 0;
    }
  }
  for (int64_t o = 0; o < out_count; ++o) {
    if constexpr (std::is_same_v<A, double>) {
      y[o] = from_double<T>(acc[o]);
    } else {
      y[o] = static_cast<T>(acc[o]);
    }
  }
}

Result<std::string_view> equation_of(const Attributes& a) {
  if (a.find("equation") == nullptr) return invalid_argument("Einsum: attribute 'equation' is missing");
  return a.get_string("equation", "");
}

}  // namespace

Status einsum_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                  const Attributes& a) {
  if (inputs.empty()) return invalid_argument("Einsum: takes at least 1 input, got 0");
  LOOM_RETURN_IF_ERROR(check_arity("Einsum", inputs.size(), 1, inputs.size(), outputs.size(), 1));
  std::vector<std::span<const int64_t>> shapes;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = "Inputs[" + std::to_string(k) + "]";
    LOOM_RETURN_IF_ERROR(check_operand("Einsum", name, inputs[k]));
    if (!supported(inputs[k].dtype)) return unsupported_dtype("Einsum", name, inputs[k].dtype);
    if (inputs[k].dtype != inputs[0].dtype) {
      return invalid_argument("Einsum: input " + name + " has dtype " +
                              std::string(dtype_name(inputs[k].dtype)) + ", input 0 has " +
                              std::string(dtype_name(inputs[0].dtype)));
    }
    shapes.push_back(inputs[k].shape);
  }
  LOOM_RETURN_IF_ERROR(check_operand_dtype("Einsum", "Output", outputs[0], inputs[0].dtype));
  LOOM_ASSIGN_OR_RETURN(std::string_view eq, equation_of(a));
  LOOM_ASSIGN_OR_RETURN(Spec s, analyze(eq, shapes));
  LOOM_RETURN_IF_ERROR(check_output_shape("Einsum", "Output", outputs[0].shape, s.out_shape));
  const int64_t out_count = product(s.out_shape, 0, s.out_shape.size());
  return visit_dtype("Einsum", inputs[0].dtype, [&]<typename T>() -> Status {
    if constexpr (kIsFloatLike<T>) {
      contract<T, double>(s, inputs, static_cast<T*>(outputs[0].data), out_count);
    } else if constexpr (!std::is_same_v<T, bool>) {
      contract<T, uint64_t>(s, inputs, static_cast<T*>(outputs[0].data), out_count);
    }
    return Status();
  });
}

Result<std::vector<TensorType>> einsum_infer(std::span<const TensorType> inputs,
                                             const Attributes& a) {
  if (inputs.empty()) return invalid_argument("Einsum: takes at least 1 input, got 0");
  std::vector<std::span<const int64_t>> shapes;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = "Inputs[" + std::to_string(k) + "]";
    if (!supported(inputs[k].dtype)) return unsupported_dtype("Einsum", name, inputs[k].dtype);
    if (inputs[k].dtype != inputs[0].dtype) {
      return invalid_argument("Einsum: input " + name + " has dtype " +
                              std::string(dtype_name(inputs[k].dtype)) + ", input 0 has " +
                              std::string(dtype_name(inputs[0].dtype)));
    }
    LOOM_RETURN_IF_ERROR(element_count(inputs[k].shape).status().with_context("Einsum: " + name));
    shapes.push_back(inputs[k].shape);
  }
  LOOM_ASSIGN_OR_RETURN(std::string_view eq, equation_of(a));
  LOOM_ASSIGN_OR_RETURN(Spec s, analyze(eq, shapes));
  return std::vector<TensorType>{{inputs[0].dtype, std::move(s.out_shape)}};
}

}  // namespace loom::kernels::reduce
