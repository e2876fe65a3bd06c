// Built only while the importer (import.cmake) is absent from the tree, so
// that loom_compiler links; compile_onnx_file then reports the importer as
// missing. Goes away with the importer's sources.
#include "compiler/import.hpp"

namespace loom::compiler {

Result<ImportedModel> import_onnx(const onnx_io::Model& model, const ImportOptions&,
                                  const kernels::KernelRegistry&) {
  return Status(StatusCode::kUnimplemented, model.source() + ": this build has no ONNX importer");
}

}  // namespace loom::compiler
