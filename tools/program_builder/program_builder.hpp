// FunctionBuilder / ProgramBuilder: a convenience layer over ProgramWriter for
// tools, tests and benchmarks that assemble programs by hand (the compiler
// writes programs through the same ProgramWriter).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loom/program.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::tools {

class ProgramBuilder;

// Builds one function: values, instructions, a memory plan and the ABI
// reflection. Value indices returned here are the function's.
class FunctionBuilder {
 public:
  // A function argument.
  uint32_t input(std::string name, DType dtype, Shape shape);
  // A constant backed by program parameter `parameter`.
  uint32_t constant(uint32_t parameter);
  // An intermediate or result tensor.
  uint32_t value(std::string name, DType dtype, Shape shape);
  // Marks `value` as a result, in order.
  void output(uint32_t value);

  void kernel_call(std::string op, std::vector<uint32_t> inputs,
                   std::vector<uint32_t> outputs,
                   std::vector<AttributeDef> attributes = {});
  void delegate_call(uint32_t delegate, std::vector<uint32_t> inputs,
                     std::vector<uint32_t> outputs);

 private:
  friend class ProgramBuilder;
  FunctionBuilder(ProgramBuilder* owner, FunctionDef* def) : owner_(owner), def_(def) {}
  ProgramBuilder* owner_;
  FunctionDef* def_;
};

// Where the bytes of an external parameter are found when the program is
// loaded: the entry of the parameter's name in `scope` of the .irpa archive
// at `archive`, a path relative to the program file's folder (no '..').
struct ArchiveRef {
  std::string scope;
  std::string archive;
};

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string producer = "loom");

  // Adds an inline parameter holding a copy of `tensor`; returns its index.
  uint32_t add_parameter(std::string name, const Tensor& tensor);
  // Adds an external parameter whose bytes are `tensor`'s but live in an
  // archive: the program records name, dtype, shape, size and the bytes'
  // xxh3 checksum (checked at load), not the bytes.
  uint32_t add_external_parameter(std::string name, const Tensor& tensor, ArchiveRef where);
  // The same without the bytes at hand: `checksum` is their xxh3-64, 0 to
  // skip the check at load (weights that are swapped or splatted).
  uint32_t add_external_parameter(std::string name, DType dtype, Shape shape, ArchiveRef where,
                                  uint64_t checksum = 0);
  // Adds an artifact with `content`; returns its index.
  uint32_t add_artifact(std::string loader_key, uint32_t format_version,
                        std::string file_name, std::span<const std::byte> content);
  // Adds a delegate whose variants are artifact indices, preferred first.
  uint32_t add_delegate(std::string name, std::vector<uint32_t> variants);
  // Starts a function; the builder stays valid until finish().
  FunctionBuilder add_function(std::string name);

  // Computes memory plans (every intermediate gets an arena slot, reused once
  // its last reader has run) and reflection, and returns the writer.
  Result<ProgramWriter> finish();

 private:
  friend class FunctionBuilder;
  ProgramWriter writer_;
};

}  // namespace loom::tools
