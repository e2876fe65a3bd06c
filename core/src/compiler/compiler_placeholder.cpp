// Replaced by the compile driver (compile_onnx_file) as it lands.
namespace loom::compiler {}
