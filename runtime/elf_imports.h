// Minimal, bounds-checked reader of an ELF64 shared object's dynamic symbol
// table, used to vet a blob BEFORE dlopen (ld.so kills the process when a
// static initialiser calls a shim nobody provides).
#ifndef SHIMKIT_RUNTIME_ELF_IMPORTS_H_
#define SHIMKIT_RUNTIME_ELF_IMPORTS_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace shimkit {

struct ElfSymbols {
  // Undefined, non-weak symbols without a symbol version (what the shim
  // provider, or another unversioned library, must supply).
  std::vector<std::string> unversioned_imports;
  // Names of defined, global or weak, dynamic symbols.
  std::set<std::string> exports;
  // Where the file's bytes go once loaded (blob_loader.cpp gives back what a
  // loaded blob no longer needs): the end of the last loadable segment's file
  // bytes (what lies after it, debug info and section tables, is never
  // mapped), and AOTInductor's embedded constants, section `.lrodata` (file
  // offset, size, address relative to the load base; size 0 if none), which the
  // model container copies once, at its creation.
  uint64_t loaded_end = 0;
  uint64_t constants_offset = 0, constants_size = 0, constants_address = 0;
};

// Parses `bytes`; on failure returns false and sets *error to one line.
bool read_elf_symbols(const unsigned char* bytes, size_t size, ElfSymbols* out, std::string* error);

}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_ELF_IMPORTS_H_
