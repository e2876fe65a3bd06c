// ELF reading for `loom doctor`: every structure is copied out of the byte
// span with memcpy (no alignment assumed) after a bounds check.
#include "host/discovery/elf_file.hpp"

#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

namespace loom::host {
namespace {

// The most dynamic entries, symbols and program headers read: far more than
// any real library has, small enough to bound the work on a hostile file.
constexpr uint64_t kMaxDynamicEntries = 1 << 16;
constexpr uint64_t kMaxSymbols = 1 << 20;
constexpr size_t kMaxStringLength = 4096;

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  // Copies a T at `offset`; DATA_LOSS naming `what` when it does not fit.
  template <typename T>
  Result<T> read(uint64_t offset, const std::string& what) const {
    if (offset > bytes_.size() || bytes_.size() - offset < sizeof(T)) {
      return truncated(what, offset, sizeof(T));
    }
    T out;
    std::memcpy(&out, bytes_.data() + offset, sizeof(T));
    return out;
  }

  // Whether [offset, offset + size) lies in the file.
  bool contains(uint64_t offset, uint64_t size) const {
    return offset <= bytes_.size() && bytes_.size() - offset >= size;
  }

  Status truncated(const std::string& what, uint64_t offset, uint64_t size) const {
    return data_loss(name_ + ": " + what + " at offset " + std::to_string(offset) + " (" +
                     std::to_string(size) + " bytes) runs past the end of the file (" +
                     std::to_string(bytes_.size()) + " bytes); the file is truncated or corrupt");
  }

  // The NUL-terminated string at `index` of the string table
  // [table, table + table_size).
  Result<std::string> string_at(uint64_t table, uint64_t table_size, uint64_t index,
                                const std::string& what) const {
    if (!contains(table, table_size)) return truncated("string table", table, table_size);
    if (index >= table_size) {
      return data_loss(name_ + ": " + what + " names string " + std::to_string(index) +
                       ", past the string table's " + std::to_string(table_size) + " bytes");
    }
    const char* begin = reinterpret_cast<const char*>(bytes_.data() + table + index);
    const size_t limit = std::min<uint64_t>(table_size - index, kMaxStringLength);
    const void* nul = std::memchr(begin, '\0', limit);
    if (nul == nullptr) {
      return data_loss(name_ + ": " + what + " is not terminated within the string table");
    }
    return std::string(begin, static_cast<const char*>(nul));
  }

  const std::string& name() const { return name_; }

 private:
  std::span<const std::byte> bytes_;
  const std::string& name_;
};

std::vector<std::string> split_colons(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t colon = text.find(':', start);
    if (colon == std::string::npos) colon = text.size();
    if (colon > start) out.push_back(text.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

// The file offset of virtual address `vaddr`, through the PT_LOAD segments.
std::optional<uint64_t> file_offset(const std::vector<Elf64_Phdr>& loads, uint64_t vaddr) {
  for (const Elf64_Phdr& p : loads) {
    if (vaddr >= p.p_vaddr && vaddr - p.p_vaddr < p.p_filesz) {
      const uint64_t delta = vaddr - p.p_vaddr;
      if (p.p_offset > UINT64_MAX - delta) return std::nullopt;
      return p.p_offset + delta;
    }
  }
  return std::nullopt;
}

}  // namespace

ElfIdentity host_elf_identity() {
  ElfIdentity id;
  id.elf_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
  id.data = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  id.type = ET_DYN;
#if defined(__x86_64__)
  id.machine = EM_X86_64;
#elif defined(__aarch64__)
  id.machine = EM_AARCH64;
#elif defined(__i386__)
  id.machine = EM_386;
#elif defined(__arm__)
  id.machine = EM_ARM;
#elif defined(__riscv)
  id.machine = EM_RISCV;
#elif defined(__powerpc64__)
  id.machine = EM_PPC64;
#elif defined(__s390x__)
  id.machine = EM_S390;
#else
#error "host_elf_identity: add this machine's EM_ constant"
#endif
  return id;
}

std::string elf_class_name(uint8_t elf_class) {
  if (elf_class == ELFCLASS64) return "64-bit";
  if (elf_class == ELFCLASS32) return "32-bit";
  return "class " + std::to_string(elf_class);
}

std::string elf_machine_name(uint16_t machine) {
  switch (machine) {
    case EM_X86_64: return "x86-64";
    case EM_386: return "x86 (i386)";
    case EM_AARCH64: return "AArch64";
    case EM_ARM: return "ARM";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "PowerPC64";
    case EM_PPC: return "PowerPC";
    case EM_S390: return "s390";
    case EM_MIPS: return "MIPS";
    default: return "machine " + std::to_string(machine);
  }
}

std::string elf_type_name(uint16_t type) {
  switch (type) {
    case ET_DYN: return "shared object (ET_DYN)";
    case ET_EXEC: return "executable (ET_EXEC)";
    case ET_REL: return "relocatable object (ET_REL, a .o file)";
    case ET_CORE: return "core dump (ET_CORE)";
    default: return "type " + std::to_string(type);
  }
}

Result<ElfIdentity> read_elf_identity(std::span<const std::byte> bytes, const std::string& name) {
  if (bytes.size() < SELFMAG || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) {
    return invalid_argument(name + " is not an ELF file (no \\x7fELF magic at its start" +
                            (bytes.size() < SELFMAG ? ", it has only " +
                                                          std::to_string(bytes.size()) + " bytes"
                                                    : std::string()) +
                            ")");
  }
  // e_type and e_machine sit at the same offsets in 32- and 64-bit headers.
  constexpr size_t kIdentityBytes = EI_NIDENT + 4;
  if (bytes.size() < kIdentityBytes) {
    return data_loss(name + ": the ELF header is truncated (" + std::to_string(bytes.size()) +
                     " bytes)");
  }
  ElfIdentity id;
  id.elf_class = static_cast<uint8_t>(bytes[EI_CLASS]);
  id.data = static_cast<uint8_t>(bytes[EI_DATA]);
  if (id.data != ELFDATA2LSB && id.data != ELFDATA2MSB) {
    return invalid_argument(name + ": unknown ELF byte order " + std::to_string(id.data));
  }
  uint16_t type = 0, machine = 0;
  std::memcpy(&type, bytes.data() + EI_NIDENT, 2);
  std::memcpy(&machine, bytes.data() + EI_NIDENT + 2, 2);
  const bool swap = (id.data == ELFDATA2LSB) != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  if (swap) {
    type = static_cast<uint16_t>((type >> 8) | (type << 8));
    machine = static_cast<uint16_t>((machine >> 8) | (machine << 8));
  }
  id.type = type;
  id.machine = machine;
  return id;
}

bool ElfDynamicInfo::exports_function(std::string_view name) const {
  for (const ElfSymbol& s : symbols) {
    if (s.name == name && s.defined && s.type == STT_FUNC &&
        (s.binding == STB_GLOBAL || s.binding == STB_WEAK) &&
        (s.visibility == STV_DEFAULT || s.visibility == STV_PROTECTED)) {
      return true;
    }
  }
  return false;
}

Result<ElfDynamicInfo> read_elf_dynamic(std::span<const std::byte> bytes, const std::string& name) {
  LOOM_ASSIGN_OR_RETURN(ElfIdentity id, read_elf_identity(bytes, name));
  if (id.elf_class != ELFCLASS64 || id.data != ELFDATA2LSB ||
      __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) {
    return incompatible(name + " is a " + elf_class_name(id.elf_class) +
                        (id.data == ELFDATA2LSB ? " little-endian" : " big-endian") +
                        " object; only 64-bit little-endian objects are read");
  }
  const Reader r(bytes, name);
  LOOM_ASSIGN_OR_RETURN(auto header, r.read<Elf64_Ehdr>(0, "the ELF header"));

  // Program headers: PT_LOAD segments map addresses to file offsets; the
  // dynamic linker finds the dynamic section through PT_DYNAMIC.
  if (header.e_phnum != 0 && header.e_phentsize != sizeof(Elf64_Phdr)) {
    return data_loss(name + ": program header entries are " + std::to_string(header.e_phentsize) +
                     " bytes; 64-bit ELF has " + std::to_string(sizeof(Elf64_Phdr)));
  }
  std::vector<Elf64_Phdr> loads;
  std::optional<Elf64_Phdr> dynamic;
  for (uint32_t i = 0; i < header.e_phnum; ++i) {
    const uint64_t at = header.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr);
    if (at < header.e_phoff) return data_loss(name + ": program header offset overflows");
    LOOM_ASSIGN_OR_RETURN(auto ph, r.read<Elf64_Phdr>(at, "program header " + std::to_string(i)));
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
    if (ph.p_type == PT_DYNAMIC && !dynamic) dynamic = ph;
  }
  ElfDynamicInfo info;
  if (dynamic) {
    if (!r.contains(dynamic->p_offset, dynamic->p_filesz)) {
      return r.truncated("the dynamic segment", dynamic->p_offset, dynamic->p_filesz);
    }
    const uint64_t count = std::min<uint64_t>(dynamic->p_filesz / sizeof(Elf64_Dyn),
                                              kMaxDynamicEntries);
    std::vector<Elf64_Dyn> entries;
    uint64_t strtab = 0, strsz = 0;
    bool have_strtab = false, have_strsz = false;
    for (uint64_t i = 0; i < count; ++i) {
      LOOM_ASSIGN_OR_RETURN(auto d, r.read<Elf64_Dyn>(dynamic->p_offset + i * sizeof(Elf64_Dyn),
                                                      "dynamic entry " + std::to_string(i)));
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr, have_strtab = true;
      if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val, have_strsz = true;
      entries.push_back(d);
    }
    const bool names_strings = std::any_of(entries.begin(), entries.end(), [](const Elf64_Dyn& d) {
      return d.d_tag == DT_NEEDED || d.d_tag == DT_RUNPATH || d.d_tag == DT_RPATH ||
             d.d_tag == DT_SONAME;
    });
    if (names_strings) {
      if (!have_strtab || !have_strsz) {
        return data_loss(name + ": the dynamic section names libraries but has no DT_STRTAB or "
                                "DT_STRSZ");
      }
      const auto table = file_offset(loads, strtab);
      if (!table) {
        return data_loss(name + ": DT_STRTAB address 0x" + [&] {
          char hex[20];
          std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(strtab));
          return std::string(hex);
        }() + " lies in no loaded segment");
      }
      if (!r.contains(*table, strsz)) return r.truncated("the dynamic string table", *table, strsz);
      for (const Elf64_Dyn& d : entries) {
        const char* what = d.d_tag == DT_NEEDED    ? "a DT_NEEDED entry"
                           : d.d_tag == DT_RUNPATH ? "DT_RUNPATH"
                           : d.d_tag == DT_RPATH   ? "DT_RPATH"
                           : d.d_tag == DT_SONAME  ? "DT_SONAME"
                                                   : nullptr;
        if (what == nullptr) continue;
        LOOM_ASSIGN_OR_RETURN(std::string text, r.string_at(*table, strsz, d.d_un.d_val, what));
        if (d.d_tag == DT_NEEDED) info.needed.push_back(std::move(text));
        if (d.d_tag == DT_RUNPATH) info.runpath = split_colons(text), info.has_runpath = true;
        if (d.d_tag == DT_RPATH) info.rpath = split_colons(text);
        if (d.d_tag == DT_SONAME) info.soname = std::move(text);
      }
    }
  }

  // The dynamic symbol table, through the section headers.
  if (header.e_shoff == 0 || header.e_shnum == 0) return info;
  if (header.e_shentsize != sizeof(Elf64_Shdr)) {
    return data_loss(name + ": section header entries are " + std::to_string(header.e_shentsize) +
                     " bytes; 64-bit ELF has " + std::to_string(sizeof(Elf64_Shdr)));
  }
  auto section = [&](uint32_t index) -> Result<Elf64_Shdr> {
    if (index >= header.e_shnum) {
      return data_loss(name + ": section " + std::to_string(index) + " does not exist (" +
                       std::to_string(header.e_shnum) + " sections)");
    }
    const uint64_t at = header.e_shoff + uint64_t{index} * sizeof(Elf64_Shdr);
    if (at < header.e_shoff) return data_loss(name + ": section header offset overflows");
    return r.read<Elf64_Shdr>(at, "section header " + std::to_string(index));
  };
  for (uint32_t i = 0; i < header.e_shnum; ++i) {
    LOOM_ASSIGN_OR_RETURN(auto sh, section(i));
    if (sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_entsize != sizeof(Elf64_Sym)) {
      return data_loss(name + ": .dynsym entries are " + std::to_string(sh.sh_entsize) +
                       " bytes; 64-bit ELF has " + std::to_string(sizeof(Elf64_Sym)));
    }
    if (!r.contains(sh.sh_offset, sh.sh_size)) {
      return r.truncated("the dynamic symbol table (.dynsym)", sh.sh_offset, sh.sh_size);
    }
    LOOM_ASSIGN_OR_RETURN(auto strings, section(sh.sh_link));
    if (strings.sh_type != SHT_STRTAB) {
      return data_loss(name + ": .dynsym links section " + std::to_string(sh.sh_link) +
                       ", which is not a string table");
    }
    const uint64_t count = sh.sh_size / sizeof(Elf64_Sym);
    if (count > kMaxSymbols) {
      return data_loss(name + ": .dynsym holds " + std::to_string(count) + " symbols; at most " +
                       std::to_string(kMaxSymbols) + " are read");
    }
    for (uint64_t k = 1; k < count; ++k) {  // symbol 0 is the null symbol
      LOOM_ASSIGN_OR_RETURN(auto sym, r.read<Elf64_Sym>(sh.sh_offset + k * sizeof(Elf64_Sym),
                                                        "dynamic symbol " + std::to_string(k)));
      ElfSymbol out;
      LOOM_ASSIGN_OR_RETURN(out.name, r.string_at(strings.sh_offset, strings.sh_size, sym.st_name,
                                                  "the name of dynamic symbol " +
                                                      std::to_string(k)));
      out.type = ELF64_ST_TYPE(sym.st_info);
      out.binding = ELF64_ST_BIND(sym.st_info);
      out.visibility = ELF64_ST_VISIBILITY(sym.st_other);
      out.defined = sym.st_shndx != SHN_UNDEF;
      info.symbols.push_back(std::move(out));
    }
    info.symbols_known = true;
    break;
  }
  return info;
}

}  // namespace loom::host
