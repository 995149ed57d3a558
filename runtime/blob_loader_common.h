// What the CPU loader (runtime.cpp) and the CUDA runner (cuda/cuda_runner.cpp)
// share: the AOTInductor container entry points, vetting a blob's ELF symbols
// before dlopen, and opening it from a private temp file. Header-only (inline)
// so every build of either library (Bazel, build.py, build_cuda_libs.py) gets
// it without another source file. Functions return a SHIMKIT_* code and set
// *error to one line; the caller records it as its library's last error.
#ifndef SHIMKIT_RUNTIME_BLOB_LOADER_COMMON_H_
#define SHIMKIT_RUNTIME_BLOB_LOADER_COMMON_H_

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/elf_imports.h"
#include "runtime/shim_families.h"
#include "runtime/shimkit_runtime.h"
#include "runtime/temp_blob_file.h"
#include "shims/aoti_shim_abi.h"

#define SHIMKIT_LOADER_STR_IMPL(x) #x
#define SHIMKIT_LOADER_STR(x) SHIMKIT_LOADER_STR_IMPL(x)

namespace shimkit {
namespace loader {

#ifdef AOTI_SHIM_SYMBOL_PREFIX
inline constexpr char kPrefix[] = SHIMKIT_LOADER_STR(AOTI_SHIM_SYMBOL_PREFIX);
#else
inline constexpr char kPrefix[] = "";
#endif

using ContainerHandle = void*;
using CreateWithDeviceFn = int32_t (*)(ContainerHandle*, size_t, const char*, const char*);
using DeleteFn = int32_t (*)(ContainerHandle);
using RunFn = int32_t (*)(ContainerHandle, AtenTensorHandle*, size_t, AtenTensorHandle*, size_t,
                          void*, void*);
using CountFn = int32_t (*)(ContainerHandle, size_t*);

inline constexpr const char* kRequiredEntries[] = {
    "AOTInductorModelContainerCreateWithDevice", "AOTInductorModelContainerDelete",
    "AOTInductorModelContainerRun", "AOTInductorModelContainerGetNumInputs",
    "AOTInductorModelContainerGetNumOutputs"};

// The required entry points, resolved in a dlopen'd blob.
struct BlobEntries {
  CreateWithDeviceFn create = nullptr;
  DeleteFn destroy = nullptr;
  RunFn run = nullptr;
  CountFn num_inputs = nullptr;
  CountFn num_outputs = nullptr;
};

// Shim-family name once the private prefix (if any) is stripped; true when
// `name` carried the prefix.
inline bool strip_prefix(const std::string& name, std::string* bare) {
  const size_t n = sizeof(kPrefix) - 1;
  if (n > 0 && name.compare(0, n, kPrefix) == 0) {
    *bare = name.substr(n);
    return true;
  }
  *bare = name;
  return false;
}

// True when `bare` starts with a family of SHIM_SYMBOL_FAMILIES (the generated list).
inline bool is_shim_family(const std::string& bare) {
  for (const char* family : kShimFamilies) {
    if (bare.rfind(family, 0) == 0) return true;
  }
  return false;
}

// Path of the object that holds `address`, or "?".
inline std::string object_of(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

// Load address of the object that holds `fn`, or 0.
inline uintptr_t load_base_of(void* fn) {
  if (fn == nullptr) return 0;
  Dl_info info{};
  if (dladdr(fn, &info) == 0) return 0;
  return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

// Reads the blob's dynamic symbols and checks it exports every required entry.
// Reads the whole file at `path` into *bytes; on failure returns SHIMKIT_E_IO
// with "<path>: cannot open|size|read" in *error.
inline int read_file(const char* path, std::vector<char>* bytes, std::string* error) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const char* problem = nullptr;
  std::streamoff size = -1;
  if (!in) {
    problem = "cannot open";
  } else if ((size = in.tellg()) < 0) {
    problem = "cannot size";
  } else {
    bytes->resize(static_cast<size_t>(size));
    in.seekg(0);
    if (size > 0 && !in.read(bytes->data(), size)) problem = "cannot read";
  }
  if (problem == nullptr) return SHIMKIT_OK;
  *error = std::string(path) + ": " + problem;
  return SHIMKIT_E_IO;
}

inline int read_blob_symbols(const void* bytes, size_t size, ElfSymbols* syms, std::string* error) {
  std::string why;
  if (!read_elf_symbols(static_cast<const unsigned char*>(bytes), size, syms, &why)) {
    *error = "blob: " + why;
    return SHIMKIT_E_BAD_BLOB;
  }
  for (const char* entry : kRequiredEntries) {
    if (syms->exports.count(entry) == 0) {
      *error = std::string("blob: missing required entry point ") + entry +
               " (not an AOTInductor model .so?)";
      return SHIMKIT_E_MISSING_ENTRY;
    }
  }
  return SHIMKIT_OK;
}

// Vets one unversioned import `name` (`bare` without the prefix): a shim-family
// name must carry the prefix, resolve, and bind to `provider`; any other name
// must resolve only when `resolve_others`. `unresolved` ends the message for
// a name nothing provides.
inline int check_import(const std::string& name, const std::string& bare, bool prefixed,
                        const std::string& provider, bool resolve_others, const char* unresolved,
                        std::string* error) {
  const bool shim = is_shim_family(bare);
  if (shim && !prefixed) {
    *error = "blob: imports unprefixed shim " + name +
             ", which would bind to libtorch, not the slim shims; rebuild the blob "
             "with the private shim prefix";
    return SHIMKIT_E_MISSING_SHIM;
  }
  if (!shim && !resolve_others) return SHIMKIT_OK;
  void* address = dlsym(RTLD_DEFAULT, name.c_str());
  if (address == nullptr) {
    *error = "blob: imports " + name + ", " + unresolved;
    return SHIMKIT_E_MISSING_SHIM;
  }
  if (shim) {
    const std::string where = object_of(address);
    if (where != provider) {
      *error = "blob: shim " + name + " would bind to " + where + " instead of " + provider;
      return SHIMKIT_E_MISSING_SHIM;
    }
  }
  return SHIMKIT_OK;
}

// Writes the blob to a private temp file, dlopens it RTLD_LOCAL into *dl (set
// even when an entry then fails to resolve, so the caller's owner closes it),
// unlinks the file and resolves the required entries.
inline int open_blob(const void* bytes, size_t size, void** dl, BlobEntries* entries,
                     std::string* error) {
  TempBlobFile file;
  if (!file.write(bytes, size, error)) return SHIMKIT_E_IO;
  dlerror();
  *dl = dlopen(file.path().c_str(), RTLD_NOW | RTLD_LOCAL);
  // Mapped (or refused): the name is no longer needed. The window in which a
  // kill leaves the file behind is the dlopen itself.
  file.unlink_now();
  if (*dl == nullptr) {
    const char* e = dlerror();
    *error = std::string("blob: dlopen failed: ") + (e ? e : "?");
    return SHIMKIT_E_DLOPEN;
  }
  entries->create = reinterpret_cast<CreateWithDeviceFn>(dlsym(*dl, kRequiredEntries[0]));
  entries->destroy = reinterpret_cast<DeleteFn>(dlsym(*dl, kRequiredEntries[1]));
  entries->run = reinterpret_cast<RunFn>(dlsym(*dl, kRequiredEntries[2]));
  entries->num_inputs = reinterpret_cast<CountFn>(dlsym(*dl, kRequiredEntries[3]));
  entries->num_outputs = reinterpret_cast<CountFn>(dlsym(*dl, kRequiredEntries[4]));
  if (!entries->create || !entries->destroy || !entries->run || !entries->num_inputs ||
      !entries->num_outputs) {
    *error = "blob: required entry point did not resolve";
    return SHIMKIT_E_MISSING_ENTRY;
  }
  return SHIMKIT_OK;
}

}  // namespace loader
}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_BLOB_LOADER_COMMON_H_
