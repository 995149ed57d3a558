#include "runtime/elf_imports.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace shimkit {
namespace {

bool fits(size_t size, uint64_t offset, uint64_t length) {
  return offset <= size && length <= size - offset;
}

bool fail(std::string* error, const std::string& message) {
  *error = message;
  return false;
}

}  // namespace

bool read_elf_symbols(const unsigned char* bytes, size_t size, ElfSymbols* out,
                      std::string* error) {
  if (bytes == nullptr || size < sizeof(Elf64_Ehdr)) {
    return fail(error, "not an ELF file (" + std::to_string(size) + " bytes, too short)");
  }
  if (std::memcmp(bytes, ELFMAG, SELFMAG) != 0) return fail(error, "not an ELF file (bad magic)");
  if (bytes[EI_CLASS] != ELFCLASS64 || bytes[EI_DATA] != ELFDATA2LSB) {
    return fail(error, "not a little-endian 64-bit ELF file");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes, sizeof eh);
#if defined(__x86_64__)
  if (eh.e_machine != EM_X86_64) return fail(error, "ELF machine is not x86-64");
#elif defined(__aarch64__)
  if (eh.e_machine != EM_AARCH64) return fail(error, "ELF machine is not AArch64");
#endif
  if (eh.e_type != ET_DYN) return fail(error, "ELF file is not a shared object");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      !fits(size, eh.e_shoff, static_cast<uint64_t>(eh.e_shnum) * sizeof(Elf64_Shdr))) {
    return fail(error, "ELF section headers lie outside the file (truncated?)");
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), bytes + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !fits(size, eh.e_phoff, static_cast<uint64_t>(eh.e_phnum) * sizeof(Elf64_Phdr))) {
    return fail(error, "ELF program headers lie outside the file (truncated?)");
  }
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && fits(size, ph.p_offset, ph.p_filesz)) {
      out->loaded_end = std::max<uint64_t>(out->loaded_end, ph.p_offset + ph.p_filesz);
    }
  }
  if (eh.e_shstrndx < sections.size()) {
    const Elf64_Shdr& names = sections[eh.e_shstrndx];
    static constexpr char kConstants[] = ".lrodata";
    for (const Elf64_Shdr& s : sections) {
      if (s.sh_type != SHT_PROGBITS || (s.sh_flags & SHF_ALLOC) == 0 ||
          (s.sh_flags & SHF_WRITE) != 0 || !fits(size, s.sh_offset, s.sh_size) ||
          !fits(size, names.sh_offset, names.sh_size) || s.sh_name >= names.sh_size ||
          names.sh_size - s.sh_name < sizeof kConstants ||
          std::memcmp(bytes + names.sh_offset + s.sh_name, kConstants, sizeof kConstants) != 0) {
        continue;
      }
      out->constants_offset = s.sh_offset;
      out->constants_size = s.sh_size;
      out->constants_address = s.sh_addr;
    }
  }
  const Elf64_Shdr* dynsym = nullptr;
  const Elf64_Shdr* versym = nullptr;
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type == SHT_DYNSYM) dynsym = &s;
    if (s.sh_type == SHT_GNU_versym) versym = &s;
  }
  if (dynsym == nullptr) return fail(error, "ELF file has no dynamic symbol table");
  if (dynsym->sh_entsize != sizeof(Elf64_Sym) || !fits(size, dynsym->sh_offset, dynsym->sh_size)) {
    return fail(error, "ELF dynamic symbol table lies outside the file (truncated?)");
  }
  if (dynsym->sh_link >= sections.size()) return fail(error, "ELF .dynsym has a bad string table");
  const Elf64_Shdr& strtab = sections[dynsym->sh_link];
  if (!fits(size, strtab.sh_offset, strtab.sh_size)) {
    return fail(error, "ELF dynamic string table lies outside the file (truncated?)");
  }
  const size_t count = dynsym->sh_size / sizeof(Elf64_Sym);
  if (versym != nullptr &&
      (!fits(size, versym->sh_offset, versym->sh_size) || versym->sh_size < count * 2)) {
    return fail(error, "ELF symbol version table lies outside the file (truncated?)");
  }
  const char* names = reinterpret_cast<const char*>(bytes + strtab.sh_offset);
  for (size_t i = 1; i < count; ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, bytes + dynsym->sh_offset + i * sizeof(Elf64_Sym), sizeof sym);
    if (sym.st_name >= strtab.sh_size) return fail(error, "ELF symbol name out of range");
    const size_t max_len = strtab.sh_size - sym.st_name;
    const size_t len = strnlen(names + sym.st_name, max_len);
    if (len == max_len) return fail(error, "ELF symbol name is not terminated");
    std::string name(names + sym.st_name, len);
    const unsigned bind = ELF64_ST_BIND(sym.st_info);
    if (name.empty() || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
    if (sym.st_shndx != SHN_UNDEF) {
      out->exports.insert(std::move(name));
      continue;
    }
    uint16_t version = 1;
    if (versym != nullptr) {
      std::memcpy(&version, bytes + versym->sh_offset + i * 2, 2);
      version &= 0x7fff;
    }
    if (bind == STB_GLOBAL && version <= 1) out->unversioned_imports.push_back(std::move(name));
  }
  return true;
}

}  // namespace shimkit
