// Reading what a shared library says about itself, without loading it: the
// ELF header (class, byte order, type, machine), the dynamic section (needed
// libraries, RUNPATH/RPATH, SONAME) and the dynamic symbol table.
//
// Used by `loom doctor` to explain why a plugin would not load before any of
// its code runs. Every offset, size and count read from the file is checked
// against the bytes given: a truncated, corrupted or foreign file gives an
// error naming what is wrong and where, never a read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom::host {

// The fixed part of an ELF file's header, as read from any ELF file.
struct ElfIdentity {
  uint8_t elf_class = 0;  // ELFCLASS32 or ELFCLASS64
  uint8_t data = 0;       // ELFDATA2LSB or ELFDATA2MSB
  uint16_t type = 0;      // ET_DYN for a shared library
  uint16_t machine = 0;   // EM_X86_64, ...
};

// The identity of an object this process could load: its own class, byte
// order and machine, type ET_DYN.
ElfIdentity host_elf_identity();

// "64-bit", "32-bit", "class N".
std::string elf_class_name(uint8_t elf_class);
// "x86-64", "AArch64", ... or "machine N".
std::string elf_machine_name(uint16_t machine);
// "shared object (ET_DYN)", "executable (ET_EXEC)", ...
std::string elf_type_name(uint16_t type);

// Reads the identity of the ELF file in `bytes`; `name` starts every error.
// Errors: not ELF (wrong magic), truncated header.
Result<ElfIdentity> read_elf_identity(std::span<const std::byte> bytes, const std::string& name);

// One entry of the dynamic symbol table.
struct ElfSymbol {
  std::string name;
  uint8_t type = 0;     // STT_FUNC, STT_OBJECT, ...
  uint8_t binding = 0;  // STB_GLOBAL, STB_WEAK, STB_LOCAL
  uint8_t visibility = 0;  // STV_DEFAULT, ...
  bool defined = false;    // st_shndx != SHN_UNDEF
};

// What the dynamic linker reads from a 64-bit little-endian object.
struct ElfDynamicInfo {
  std::vector<std::string> needed;   // DT_NEEDED, in order
  std::vector<std::string> runpath;  // DT_RUNPATH, split at ':'
  std::vector<std::string> rpath;    // DT_RPATH, split at ':'
  bool has_runpath = false;          // DT_RUNPATH present (then DT_RPATH is ignored)
  std::string soname;                // DT_SONAME, or empty
  // The dynamic symbol table (.dynsym); empty when the file has no section
  // headers to find it (symbols_known false).
  std::vector<ElfSymbol> symbols;
  bool symbols_known = false;

  // Whether `name` is a defined, global or weak, default- or
  // protected-visibility function: what dlsym finds.
  bool exports_function(std::string_view name) const;
};

// Parses the program headers, the dynamic segment and the dynamic symbol
// table of a 64-bit little-endian ELF object. Objects of another class or
// byte order are refused (INCOMPATIBLE); a structure that runs past the end
// of `bytes` or points outside the file is DATA_LOSS naming it.
Result<ElfDynamicInfo> read_elf_dynamic(std::span<const std::byte> bytes, const std::string& name);

}  // namespace loom::host
