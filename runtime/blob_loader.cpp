#include "runtime/blob_loader.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "runtime/shim_families.h"
#include "runtime/temp_blob_file.h"

#define SHIMKIT_LOADER_STR_IMPL(x) #x
#define SHIMKIT_LOADER_STR(x) SHIMKIT_LOADER_STR_IMPL(x)

namespace shimkit {
namespace loader {
namespace {

#ifdef AOTI_SHIM_SYMBOL_PREFIX
constexpr char kPrefix[] = SHIMKIT_LOADER_STR(AOTI_SHIM_SYMBOL_PREFIX);
#else
constexpr char kPrefix[] = "";
#endif

constexpr const char* kRequiredEntries[] = {
    "AOTInductorModelContainerCreateWithDevice", "AOTInductorModelContainerDelete",
    "AOTInductorModelContainerRun", "AOTInductorModelContainerGetNumInputs",
    "AOTInductorModelContainerGetNumOutputs"};

thread_local std::string t_error;

// Shim-family name once the private prefix (if any) is stripped; true when
// `name` carried the prefix.
bool strip_prefix(const std::string& name, std::string* bare) {
  const size_t n = sizeof(kPrefix) - 1;
  if (n > 0 && name.compare(0, n, kPrefix) == 0) {
    *bare = name.substr(n);
    return true;
  }
  *bare = name;
  return false;
}

// True when `bare` starts with a family of SHIM_SYMBOL_FAMILIES (the generated list).
bool is_shim_family(const std::string& bare) {
  for (const char* family : kShimFamilies) {
    if (bare.rfind(family, 0) == 0) return true;
  }
  return false;
}

// Path of the object that holds `address`, or "?".
std::string object_of(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

// Vets one unversioned import `name` (`bare` without the prefix).
int check_import(const std::string& name, const std::string& bare, bool prefixed,
                 const std::string& provider_path, const VetPolicy& policy) {
  const bool shim = is_shim_family(bare);
  if (shim && !prefixed) {
    return fail(SHIMKIT_E_MISSING_SHIM,
                "blob: imports unprefixed shim " + name +
                    ", which would bind to libtorch, not the slim shims; rebuild the blob "
                    "with the private shim prefix");
  }
  if (!shim && !policy.resolve_others) return SHIMKIT_OK;
  void* address = dlsym(RTLD_DEFAULT, name.c_str());
  if (address == nullptr) {
    return fail(SHIMKIT_E_MISSING_SHIM, "blob: imports " + name + ", " + policy.unresolved);
  }
  if (shim) {
    const std::string where = object_of(address);
    if (where != provider_path) {
      return fail(SHIMKIT_E_MISSING_SHIM, "blob: shim " + name + " would bind to " + where +
                                              " instead of " + provider_path);
    }
  }
  return SHIMKIT_OK;
}

// True when the blob calls the convolution shim, which opens oneDNN.
bool convolves(const ElfSymbols& syms) {
  std::string bare;
  for (const std::string& name : syms.unversioned_imports) {
    if (strip_prefix(name, &bare) && bare == "aoti_torch_cpu_convolution") return true;
  }
  return false;
}

// Sets the calling thread's GEMM library for one model's creation or run
// (shimkit_shim_set_onednn_gemm), and restores it after. oneDNN's matmul
// serves a model's GEMMs only when the model convolves, so opens oneDNN
// anyway: for one that does not, libdnnl's resident pages (~4 MB) would come
// next to OpenBLAS's (the shims always hold it) for a ~15% faster GEMM, and
// the runtime's memory beyond the weights would pass 10 MB (docs/runtime.md).
class GemmLibraryScope {
 public:
  explicit GemmLibraryScope(bool onednn) : previous_(shimkit_shim_set_onednn_gemm(onednn)) {}
  GemmLibraryScope(const GemmLibraryScope&) = delete;
  GemmLibraryScope& operator=(const GemmLibraryScope&) = delete;
  ~GemmLibraryScope() { shimkit_shim_set_onednn_gemm(previous_); }

 private:
  int previous_;
};

}  // namespace

const char* served_prefix() { return kPrefix; }

int fail(int code, std::string message) {
  t_error = std::move(message);
  return code;
}

const std::string& last_error() { return t_error; }

void prefix_last_error(const char* path) { t_error = std::string(path) + ": " + t_error; }

std::string shim_error() {
  const char* e = shimkit_shim_last_error();
  return e[0] ? e : "no details";
}

const Provider& provider() {
  static const Provider p = [] {
    Provider out;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&aoti_torch_empty_strided), &info) == 0 ||
        info.dli_fname == nullptr) {
      out.error = "cannot locate the shim provider library (dladdr failed)";
      return out;
    }
    out.path = info.dli_fname;
    out.handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (out.handle == nullptr) {
      const char* e = dlerror();
      out.error = out.path + ": cannot make the shim provider global: " + (e ? e : "?");
    }
    return out;
  }();
  return p;
}

int vet_blob(const void* bytes, size_t size, const VetPolicy& policy, ElfSymbols* syms) {
  std::string why;
  if (!read_elf_symbols(static_cast<const unsigned char*>(bytes), size, syms, &why)) {
    return fail(SHIMKIT_E_BAD_BLOB, "blob: " + why);
  }
  for (const char* entry : kRequiredEntries) {
    if (syms->exports.count(entry) == 0) {
      return fail(SHIMKIT_E_MISSING_ENTRY, std::string("blob: missing required entry point ") +
                                               entry + " (not an AOTInductor model .so?)");
    }
  }
  const Provider& prov = provider();
  if (prov.handle == nullptr) return fail(SHIMKIT_E_PROVIDER, prov.error);
  for (const std::string& name : syms->unversioned_imports) {
    std::string bare;
    const bool prefixed = strip_prefix(name, &bare);
    const int rc = check_import(name, bare, prefixed, prov.path, policy);
    if (rc != SHIMKIT_OK) return rc;
  }
  return SHIMKIT_OK;
}

Blob::~Blob() {
  if (container_ != nullptr && destroy_ != nullptr) destroy_(container_);
  if (dl_ != nullptr) dlclose(dl_);
}

namespace {

// While the model container is being created: the constants the shims saw
// copied (a prefix of the blob's constants section) are given back as the
// copy goes, so the weights are not held twice at the peak.
struct ConstantsWatch {
  const TempBlobFile* file;
  uint64_t offset;  // the constants section's file offset
};

void constants_consumed(void* context, size_t bytes) {
  const auto* watch = static_cast<const ConstantsWatch*>(context);
  watch->file->give_back(watch->offset, bytes);
}

// Reads `size` bytes of `fd` through a private read-only mapping (unmapped on
// scope exit).
class ReadOnlyMap {
 public:
  ReadOnlyMap(int fd, size_t size) : size_(size) {
    if (size == 0) return;
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    data_ = p == MAP_FAILED ? nullptr : p;
  }
  ReadOnlyMap(const ReadOnlyMap&) = delete;
  ReadOnlyMap& operator=(const ReadOnlyMap&) = delete;
  ~ReadOnlyMap() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  const void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t size_;
};

}  // namespace

int stage_bytes(const void* bytes, size_t size, const VetPolicy& policy, TempBlobFile* file,
                ElfSymbols* syms) {
  const int rc = vet_blob(bytes, size, policy, syms);
  if (rc != SHIMKIT_OK) return rc;
  std::string error;
  if (!file->write(bytes, size, &error)) return fail(SHIMKIT_E_IO, error);
  return SHIMKIT_OK;
}

int stage_file(const char* path, const VetPolicy& policy, TempBlobFile* file, ElfSymbols* syms) {
  if (path == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null path");
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(SHIMKIT_E_IO, std::string(path) + ": cannot open: " + strerror(errno));
  struct stat st{};
  std::string error;
  if (fstat(fd, &st) != 0) {
    error = strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    error = "not a regular file";
  } else {
    if (!file->copy(fd, static_cast<size_t>(st.st_size), &error) && error.empty()) error = "?";
  }
  ::close(fd);
  if (!error.empty()) return fail(SHIMKIT_E_IO, std::string(path) + ": cannot read: " + error);
  const size_t size = static_cast<size_t>(st.st_size);
  const ReadOnlyMap view(file->fd(), size);
  if (size > 0 && view.data() == nullptr) {
    return fail(SHIMKIT_E_IO, std::string(path) + ": cannot map its copy: " + strerror(errno));
  }
  return vet_blob(view.data(), size, policy, syms);
}

int Blob::open(TempBlobFile* file, const ElfSymbols& syms, const char* device) {
  dlerror();
  dl_ = dlopen(file->path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl_ == nullptr) {
    const char* e = dlerror();
    std::string why = e ? e : "?";
    // dlerror names the private file ("/proc/self/fd/7: undefined symbol: x"),
    // which means nothing to the user; the caller names the blob.
    const std::string internal = file->path() + ": ";
    if (why.compare(0, internal.size(), internal) == 0) why.erase(0, internal.size());
    file->release();
    return fail(SHIMKIT_E_DLOPEN, "blob: dlopen failed: " + why);
  }
  file->drop_name();
  // Nothing maps the bytes past the loadable segments (debug info, tables).
  struct stat st{};
  if (fstat(file->fd(), &st) == 0 && static_cast<uint64_t>(st.st_size) > syms.loaded_end) {
    file->give_back(syms.loaded_end, static_cast<size_t>(st.st_size) - syms.loaded_end);
  }
  create_ = reinterpret_cast<CreateFn>(dlsym(dl_, kRequiredEntries[0]));
  destroy_ = reinterpret_cast<DeleteFn>(dlsym(dl_, kRequiredEntries[1]));
  run_ = reinterpret_cast<RunFn>(dlsym(dl_, kRequiredEntries[2]));
  const auto num_in = reinterpret_cast<CountFn>(dlsym(dl_, kRequiredEntries[3]));
  const auto num_out = reinterpret_cast<CountFn>(dlsym(dl_, kRequiredEntries[4]));
  input_name_ = reinterpret_cast<NameFn>(dlsym(dl_, "AOTInductorModelContainerGetInputName"));
  run_single_threaded_ =
      reinterpret_cast<RunFn>(dlsym(dl_, "AOTInductorModelContainerRunSingleThreaded"));
  if (!create_ || !destroy_ || !run_ || !num_in || !num_out) {
    return fail(SHIMKIT_E_MISSING_ENTRY, "blob: required entry point did not resolve");
  }
  shimkit_shim_clear_error();
  onednn_gemm_ = convolves(syms);
  const GemmLibraryScope gemm_library(onednn_gemm_);
  ConstantsWatch watch{file, syms.constants_offset};
  const uintptr_t base = load_base();
  if (syms.constants_size > 0 && base != 0) {
    shimkit_shim_watch_constants(reinterpret_cast<const void*>(base + syms.constants_address),
                                 syms.constants_size, constants_consumed, &watch);
  }
  const int32_t created = create_(&container_, 1, device, nullptr);
  shimkit_shim_unwatch_constants();
  // The container holds its own copy now (AOTInductor reads the section once,
  // when it creates a model): the rest of the file's copy goes back too.
  file->give_back(syms.constants_offset, syms.constants_size);
  file->release();
  if (created != 0 || container_ == nullptr) {
    container_ = nullptr;
    const char* why = shimkit_shim_last_error();
    return fail(SHIMKIT_E_CREATE, std::string("blob: creating the model container on ") + device +
                                      " failed" + (why[0] ? ": " : "") + why);
  }
  if (num_in(container_, &num_inputs_) != 0 || num_out(container_, &num_outputs_) != 0) {
    return fail(SHIMKIT_E_CREATE, "blob: cannot read the number of inputs/outputs");
  }
  return SHIMKIT_OK;
}

int Blob::run(AtenTensorHandle* inputs, size_t num_inputs, AtenTensorHandle* outputs,
              size_t num_outputs, void* stream) {
  shimkit_shim_clear_error();
  const GemmLibraryScope gemm_library(onednn_gemm_);
  // The container holds one model and both runtimes run a model under its
  // own mutex, so the single-threaded entry (torch's, for CUDA graphs) is
  // safe, and it skips Run's bookkeeping: Run records an event on the stream
  // after each run and queries it before the next, and an event recorded
  // while a CUDA graph is captured cannot be queried afterwards (the next
  // eager run failed "invalid argument" on the H200). Older blobs lack it.
  const RunFn run = run_single_threaded_ != nullptr ? run_single_threaded_ : run_;
  const int32_t rc = run(container_, inputs, num_inputs, outputs, num_outputs, stream, nullptr);
  std::fill(inputs, inputs + num_inputs, nullptr);  // Run took them, even on failure
  if (rc == 0) return SHIMKIT_OK;
  std::fill(outputs, outputs + num_outputs, nullptr);
  const char* why = shimkit_shim_last_error();
  return fail(SHIMKIT_E_RUN, std::string("model run failed: ") +
                                 (why[0] ? why : "(the blob printed details to stderr)"));
}

namespace {

// AOTInductorConstantMapEntry (torch's aoti_runtime/interface.h): a constant's
// original FQN and its tensor, as the container hands them out.
struct ConstantEntry {
  const char* name;
  AtenTensorHandle handle;
};
using ConstantEntriesFn = int32_t (*)(void*, const ConstantEntry**, size_t*, bool);

}  // namespace

int Blob::allow_stand_ins(const char* const* fqns, size_t count, size_t* allowed) {
  *allowed = 0;
  const auto entries_of = reinterpret_cast<ConstantEntriesFn>(
      dlsym(dl_, "AOTInductorModelContainerExtractConstantsMapEntries"));
  if (entries_of == nullptr || count == 0) return SHIMKIT_OK;  // an older blob: nothing stands in
  const ConstantEntry* entries = nullptr;
  size_t num_entries = 0;
  if (entries_of(container_, &entries, &num_entries, false) != 0) {
    return fail(SHIMKIT_E_RUN, "blob: listing its constants failed");
  }
  const std::set<std::string> wanted(fqns, fqns + count);
  for (size_t i = 0; i < num_entries; ++i) {
    if (entries[i].name != nullptr && wanted.count(entries[i].name) != 0) {
      *allowed += static_cast<size_t>(shimkit_shim_allow_stand_in(entries[i].handle));
    }
  }
  return SHIMKIT_OK;
}

const char* Blob::input_name(size_t index) const {
  if (input_name_ == nullptr || index >= num_inputs_) return nullptr;
  const char* name = nullptr;
  if (input_name_(container_, index, &name) != 0) return nullptr;
  return name;
}

uintptr_t Blob::load_base() const {
  Dl_info info{};
  if (create_ == nullptr || dladdr(reinterpret_cast<void*>(create_), &info) == 0) return 0;
  return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

void Handles::release() {
  for (AtenTensorHandle& t : h) {
    if (t != nullptr) aoti_torch_delete_tensor_object(t);
    t = nullptr;
  }
}

int wrap_inputs(const shimkit_tensor* inputs, size_t count, size_t expected, Handles* out,
                int32_t device_type, int32_t device_index) {
  if (count != expected) {
    return fail(SHIMKIT_E_BAD_INPUT, "model takes " + std::to_string(expected) + " inputs, got " +
                                         std::to_string(count));
  }
  if (inputs == nullptr && count > 0) return fail(SHIMKIT_E_BAD_INPUT, "null inputs");
  for (size_t i = 0; i < count; ++i) {
    const shimkit_tensor& t = inputs[i];
    if (t.ndim < 0 || t.ndim > SHIMKIT_MAX_DIMS) {
      return fail(SHIMKIT_E_BAD_INPUT,
                  "input " + std::to_string(i) + ": bad ndim " + std::to_string(t.ndim));
    }
    if (aoti_torch_create_tensor_from_blob(t.data, t.ndim, t.sizes, t.strides, 0, t.dtype,
                                           device_type, device_index, &out->h[i]) != 0) {
      out->h[i] = nullptr;
      return fail(SHIMKIT_E_BAD_INPUT, "input " + std::to_string(i) + ": " + shim_error());
    }
  }
  return SHIMKIT_OK;
}

bool same_geometry(AtenTensorHandle h, const shimkit_tensor& d) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  int32_t dtype = 0;
  if (aoti_torch_get_dim(h, &ndim) != 0 || ndim != d.ndim || aoti_torch_get_sizes(h, &sizes) != 0 ||
      aoti_torch_get_dtype(h, &dtype) != 0 || dtype != d.dtype) {
    return false;
  }
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[i] != d.sizes[i]) return false;
  }
  return true;
}

int describe_contiguous(AtenTensorHandle h, shimkit_tensor* d, size_t* bytes) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  if (aoti_torch_get_dim(h, &ndim) != 0 || ndim > SHIMKIT_MAX_DIMS ||
      aoti_torch_get_sizes(h, &sizes) != 0 || aoti_torch_get_dtype(h, &d->dtype) != 0) {
    return fail(SHIMKIT_E_RUN, "output tensor cannot be described (more than " +
                                   std::to_string(SHIMKIT_MAX_DIMS) + " dims?)");
  }
  d->ndim = static_cast<int32_t>(ndim);
  int64_t numel = 1;
  for (int64_t i = ndim - 1; i >= 0; --i) {
    d->sizes[i] = sizes[i];
    d->strides[i] = numel;
    numel *= std::max<int64_t>(sizes[i], 1);
  }
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[i] == 0) numel = 0;
  }
  *bytes = static_cast<size_t>(numel) * aoti_torch_dtype_element_size(d->dtype);
  return SHIMKIT_OK;
}

int copy_to_host(AtenTensorHandle h, shimkit_tensor* d) {
  int64_t stride = 1;
  for (int32_t i = d->ndim - 1; i >= 0; --i) {
    d->strides[i] = stride;
    stride *= std::max<int64_t>(d->sizes[i], 1);
  }
  Handles dst(1);
  if (aoti_torch_create_tensor_from_blob(d->data, d->ndim, d->sizes, d->strides, 0, d->dtype,
                                         aoti_torch_device_type_cpu(), -1, &dst.h[0]) != 0 ||
      aoti_torch_copy_(dst.h[0], h, 0) != 0) {
    return fail(SHIMKIT_E_RUN, "copying an output to host memory failed: " + shim_error());
  }
  return SHIMKIT_OK;
}

}  // namespace loader
}  // namespace shimkit
