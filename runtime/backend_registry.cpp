#include "runtime/backend_registry.h"

#include <map>
#include <mutex>

namespace shimkit {
namespace SHIMKIT_MODE_NAMESPACE {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, const Backend*> backends;
};

Registry& registry() {
  static Registry r;
  return r;
}

// dtype codes the slim shims store (c10::ScalarType numbering).
bool known_dtype(int32_t code) {
  switch (code) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 11:
    case 15:
    case 27:
    case 28:
    case 29:
      return true;
    default:
      return false;
  }
}

bool fill(void* data, int64_t ndim, const int64_t* sizes, const int64_t* strides, int32_t dtype,
          shimkit_tensor* out, std::string* error) {
  if (ndim < 0 || ndim > SHIMKIT_MAX_DIMS) {
    *error = "tensor has " + std::to_string(ndim) + " dimensions (at most 8)";
    return false;
  }
  if (!known_dtype(dtype)) {
    *error = "unsupported dtype code " + std::to_string(dtype);
    return false;
  }
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[i] < 0 || strides[i] < 0) {
      *error = "negative size or stride";
      return false;
    }
    out->sizes[i] = sizes[i];
    out->strides[i] = strides[i];
  }
  out->data = data;
  out->ndim = static_cast<int32_t>(ndim);
  out->dtype = dtype;
  return true;
}

class SlimBackend final : public Backend {
 public:
  const char* name() const override { return kSlimBackendName; }

  int run(shimkit_model* model, const std::vector<HostTensor>& inputs,
          std::vector<shimkit_tensor>* outputs, std::string* error) const override {
    std::vector<shimkit_tensor> descs(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!to_descriptor(inputs[i], &descs[i], error)) {
        *error = "input " + std::to_string(i) + ": " + *error;
        return SHIMKIT_E_BAD_INPUT;
      }
    }
    outputs->assign(shimkit_model_num_outputs(model), shimkit_tensor{});
    const int rc =
        shimkit_model_run(model, descs.data(), descs.size(), outputs->data(), outputs->size());
    if (rc != SHIMKIT_OK) *error = shimkit_last_error();
    return rc;
  }
};

const SlimBackend kSlimBackend;
// Registers at load time; a host that links this library finds it by name.
const bool kSlimRegistered = register_backend(&kSlimBackend);

}  // namespace

#ifdef USE_ATEN_LIB
const char* mode() { return "aten"; }

bool to_descriptor(const HostTensor& tensor, shimkit_tensor* out, std::string* error) {
  if (!tensor.defined()) {
    *error = "undefined tensor";
    return false;
  }
  if (!tensor.device().is_cpu()) {
    *error = "tensor is on " + tensor.device().str() + "; the slim runtime is CPU-only";
    return false;
  }
  if (tensor.layout() != at::kStrided) {
    *error = "only strided tensors are supported";
    return false;
  }
  // Same memory, no copy: the descriptor points at the tensor's first element.
  return fill(tensor.data_ptr(), tensor.dim(), tensor.sizes().data(), tensor.strides().data(),
              static_cast<int32_t>(tensor.scalar_type()), out, error);
}
#else
const char* mode() { return "portable"; }

bool to_descriptor(const HostTensor& tensor, shimkit_tensor* out, std::string* error) {
  if (tensor.data == nullptr && tensor.ndim > 0) {
    bool empty = false;
    for (int32_t i = 0; i < tensor.ndim && i < SHIMKIT_MAX_DIMS; ++i) {
      empty = empty || tensor.sizes[i] == 0;
    }
    if (!empty) {
      *error = "null data";
      return false;
    }
  }
  return fill(tensor.data, tensor.ndim, tensor.sizes, tensor.strides, tensor.dtype, out, error);
}
#endif

bool register_backend(const Backend* backend) {
  if (backend == nullptr) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.backends.emplace(backend->name(), backend).second;
}

const Backend* find_backend(const std::string& name) {
  (void)kSlimRegistered;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.backends.find(name);
  return it == r.backends.end() ? nullptr : it->second;
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& entry : r.backends) names.push_back(entry.first);
  return names;
}

}  // namespace SHIMKIT_MODE_NAMESPACE
}  // namespace shimkit
