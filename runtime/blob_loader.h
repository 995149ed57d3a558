// The blob loader both runtimes share (the CPU runner, runtime.cpp, and the
// CUDA runner, cuda/cuda_runner.cpp): the per-thread error state, the shim
// provider, vetting a blob's ELF symbols before dlopen, opening it from a
// private temp file and creating its model container, and the host-tensor
// plumbing around a run. Functions return a SHIMKIT_* code; on failure
// last_error() holds one line. Each runtime library compiles this file in
// (hidden visibility), with the prefix define of its shims.
#ifndef SHIMKIT_RUNTIME_BLOB_LOADER_H_
#define SHIMKIT_RUNTIME_BLOB_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/elf_imports.h"
#include "runtime/shimkit_runtime.h"
#include "runtime/temp_blob_file.h"
#include "shims/aoti_shim_abi.h"

namespace shimkit {
namespace loader {

// The shim prefix this loader serves (its build's prefix define; "" unprefixed).
const char* served_prefix();

// --- errors (per thread) ---

// Records `message` as the calling thread's last error; returns `code`.
int fail(int code, std::string message);
const std::string& last_error();
// Puts "<path>: " in front of the last error (load_file's failures).
void prefix_last_error(const char* path);
// The shims' last error, or "no details".
std::string shim_error();

// --- the provider: the library that defines the slim shims ---

struct Provider {
  void* handle = nullptr;  // null: it could not be made global (see `error`)
  std::string path;
  std::string error;
};
// Located through the address of a shim this library calls, and promoted to
// global scope once (blobs bind to it at dlopen).
const Provider& provider();

// --- vetting, before anything is loaded ---

struct VetPolicy {
  // Every import outside the shim families must resolve in the process now.
  bool resolve_others = true;
  // Ends the message for a shim import nothing provides.
  const char* unresolved = "which nothing provides";
};
// ELF sanity, the required entry points, and every unversioned import: a
// shim-family name must carry the prefix and bind to the provider. On
// success *syms holds the blob's dynamic symbols.
int vet_blob(const void* bytes, size_t size, const VetPolicy& policy, ElfSymbols* syms);

// --- a loaded blob ---

// A dlopen'd blob and its model container; deleting it deletes the
// container, then closes the blob.
class Blob {
 public:
  Blob() = default;
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;
  ~Blob();

  // dlopens the vetted blob in `file` (RTLD_LOCAL; `syms` from vet_blob),
  // drops the file's name, resolves the entry points and creates the model
  // container on `device` ("cpu", "cuda:0"). Memory: the file's pages that
  // are never mapped (debug info) are given back after dlopen, and the
  // embedded constants once the container has copied them (as it goes, where
  // the shims can follow the copy: shimkit_shim_watch_constants), so the
  // weights are held once, not twice. `file` is released on return. Its
  // GEMMs run on oneDNN only if it convolves (oneDNN is opened for it anyway).
  int open(TempBlobFile* file, const ElfSymbols& syms, const char* device);
  // One run: the blob takes the input handles (even when it fails) and fills
  // `outputs`; on failure the outputs are nulled and the error is recorded.
  int run(AtenTensorHandle* inputs, size_t num_inputs, AtenTensorHandle* outputs,
          size_t num_outputs, void* stream);

  // The constants named (original FQNs) are read by the blob's own code only
  // through shim calls: a shim's copy in another layout may stand in for
  // their bytes (shimkit_shim_allow_stand_in). `allowed` counts those the
  // shims accepted. A blob that cannot list its constants allows none.
  int allow_stand_ins(const char* const* fqns, size_t count, size_t* allowed);

  // Whether runs take AOTInductorModelContainerRunSingleThreaded (see run()):
  // only then may a run be captured into a CUDA graph and eager runs follow.
  bool runs_single_threaded() const { return run_single_threaded_ != nullptr; }
  size_t num_inputs() const { return num_inputs_; }
  size_t num_outputs() const { return num_outputs_; }
  // The blob's name for input `index`, or null.
  const char* input_name(size_t index) const;
  // Load address of the blob (for reading its resolved GOT entries).
  uintptr_t load_base() const;

 private:
  using Container = void*;
  using CreateFn = int32_t (*)(Container*, size_t, const char*, const char*);
  using DeleteFn = int32_t (*)(Container);
  using RunFn = int32_t (*)(Container, AtenTensorHandle*, size_t, AtenTensorHandle*, size_t, void*,
                            void*);
  using CountFn = int32_t (*)(Container, size_t*);
  using NameFn = int32_t (*)(Container, size_t, const char**);

  void* dl_ = nullptr;
  Container container_ = nullptr;
  CreateFn create_ = nullptr;
  DeleteFn destroy_ = nullptr;
  RunFn run_ = nullptr;
  // AOTInductorModelContainerRunSingleThreaded where the blob has it (see run()).
  RunFn run_single_threaded_ = nullptr;
  NameFn input_name_ = nullptr;
  size_t num_inputs_ = 0;
  size_t num_outputs_ = 0;
  // Whether its GEMMs may run on oneDNN: it convolves (blob_loader.cpp).
  bool onednn_gemm_ = false;
};

// --- host tensors around a run ---

// Tensor handles owned here; whatever is left is deleted on scope exit.
struct Handles {
  std::vector<AtenTensorHandle> h;
  explicit Handles(size_t n) : h(n, nullptr) {}
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles() { release(); }
  void release();
};

// Tensor handles borrowing the caller's descriptors (`expected` of them), of
// memory on the CPU or, given a device type and index, on that device.
int wrap_inputs(const shimkit_tensor* inputs, size_t count, size_t expected, Handles* out,
                int32_t device_type = aoti_torch_device_type_cpu(), int32_t device_index = -1);
// Copies tensor `h` (any device) into host descriptor `d`: C-contiguous, d's
// strides set to match. `d` must have data, ndim, sizes and dtype of `h`.
int copy_to_host(AtenTensorHandle h, shimkit_tensor* d);
// True when `h` has descriptor `d`'s ndim, sizes and dtype.
bool same_geometry(AtenTensorHandle h, const shimkit_tensor& d);
// Fills descriptor `d` (ndim, sizes, C-contiguous strides, dtype) from `h`;
// *bytes is what a C-contiguous copy takes. Leaves d->data alone.
int describe_contiguous(AtenTensorHandle h, shimkit_tensor* d, size_t* bytes);

// --- staging ---

// `bytes` vetted (vet_blob) and written to `file`.
int stage_bytes(const void* bytes, size_t size, const VetPolicy& policy, TempBlobFile* file,
                ElfSymbols* syms);
// The file at `path` copied to `file` in the kernel (no copy of it in this
// process's memory), then vetted from a read-only mapping of that copy (which
// nobody else writes); SHIMKIT_E_IO "<path>: cannot open|read: ...".
int stage_file(const char* path, const VetPolicy& policy, TempBlobFile* file, ElfSymbols* syms);

}  // namespace loader
}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_BLOB_LOADER_H_
