// Backend registry in two namespaces: shimkit::portable (slim hosts, inputs
// are shimkit_tensor descriptors) and shimkit::aten (hosts built with
// USE_ATEN_LIB, inputs are at::Tensor). The same source compiles into both;
// the namespaces keep their symbols apart, so both variants link into one
// process and each host finds the backend of its own mode.
#ifndef SHIMKIT_RUNTIME_BACKEND_REGISTRY_H_
#define SHIMKIT_RUNTIME_BACKEND_REGISTRY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/shimkit_runtime.h"

#ifdef USE_ATEN_LIB
#include <ATen/core/Tensor.h>
#define SHIMKIT_MODE_NAMESPACE aten
#else
#define SHIMKIT_MODE_NAMESPACE portable
#endif

namespace shimkit {
namespace SHIMKIT_MODE_NAMESPACE {

#ifdef USE_ATEN_LIB
using HostTensor = at::Tensor;
#else
using HostTensor = shimkit_tensor;
#endif

// "portable" or "aten": the mode this code was compiled in.
const char* mode();

// Describes `tensor` for the runtime without copying its data. Rejects what
// the slim runtime cannot take (non-CPU device, unknown dtype, too many dims,
// non-strided layout, negative sizes/strides). False and *error on failure.
bool to_descriptor(const HostTensor& tensor, shimkit_tensor* out, std::string* error);

// A way to run a loaded blob for hosts of this mode.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Runs `model` on host tensors; `outputs` receives num_outputs descriptors
  // (model-owned memory, valid until the next run). SHIMKIT_OK or an error.
  virtual int run(shimkit_model* model, const std::vector<HostTensor>& inputs,
                  std::vector<shimkit_tensor>* outputs, std::string* error) const = 0;
};

// Registers `backend` (not owned; must outlive the process). False if a
// backend of that name is already registered in this mode.
bool register_backend(const Backend* backend);
// The backend registered as `name` in this mode, or nullptr.
const Backend* find_backend(const std::string& name);
// Names registered in this mode, sorted.
std::vector<std::string> backend_names();

// The name the slim AOTInductor backend registers under, in both modes.
constexpr const char kSlimBackendName[] = "aoti_slim";

}  // namespace SHIMKIT_MODE_NAMESPACE
}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_BACKEND_REGISTRY_H_
