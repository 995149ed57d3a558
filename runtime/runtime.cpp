// The blob loader and runner behind shimkit_runtime.h.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/blob_loader_common.h"
#include "runtime/shimkit_runtime.h"
#include "shims/aoti_shim_abi.h"

namespace {

using shimkit::loader::ContainerHandle;
using shimkit::loader::CountFn;
using shimkit::loader::CreateWithDeviceFn;
using shimkit::loader::DeleteFn;
using shimkit::loader::RunFn;
using NameFn = int32_t (*)(ContainerHandle, size_t, const char**);

thread_local std::string g_error;

int fail(int code, std::string message) {
  g_error = std::move(message);
  return code;
}

struct Provider {
  void* handle = nullptr;
  std::string path;
  std::string error;
};

// Promotes the library that defines the shims to global scope, once.
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

int check_blob(const void* bytes, size_t size) {
  shimkit::ElfSymbols syms;
  std::string error;
  int rc = shimkit::loader::read_blob_symbols(bytes, size, &syms, &error);
  if (rc != SHIMKIT_OK) return fail(rc, error);
  const Provider& prov = provider();
  if (prov.handle == nullptr) return fail(SHIMKIT_E_PROVIDER, prov.error);
  for (const std::string& name : syms.unversioned_imports) {
    std::string bare;
    const bool prefixed = shimkit::loader::strip_prefix(name, &bare);
    rc = shimkit::loader::check_import(
        name, bare, prefixed, prov.path, /*resolve_others=*/true,
        "which neither the slim shims nor any loaded library provide", &error);
    if (rc != SHIMKIT_OK) return fail(rc, error);
  }
  return SHIMKIT_OK;
}

}  // namespace

struct shimkit_model {
  void* dl = nullptr;
  ContainerHandle container = nullptr;
  CreateWithDeviceFn create = nullptr;
  DeleteFn destroy = nullptr;
  RunFn run = nullptr;
  CountFn num_inputs_fn = nullptr;
  CountFn num_outputs_fn = nullptr;
  NameFn input_name_fn = nullptr;
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  bool ran_once = false;
  bool check_inputs = true;
  std::vector<AtenTensorHandle> outputs;
  std::mutex mutex;

  void release_outputs() {
    for (AtenTensorHandle h : outputs) {
      if (h != nullptr) aoti_torch_delete_tensor_object(h);
    }
    outputs.assign(outputs.size(), nullptr);
  }

  ~shimkit_model() {
    release_outputs();
    if (container != nullptr && destroy != nullptr) destroy(container);
    if (dl != nullptr) dlclose(dl);
  }
};

namespace {

int load(const void* bytes, size_t size, shimkit_model** out) {
  if (out == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null output pointer");
  *out = nullptr;
  const int checked = check_blob(bytes, size);
  if (checked != SHIMKIT_OK) return checked;
  auto model = std::make_unique<shimkit_model>();
  std::string error;
  shimkit::loader::BlobEntries entries;
  const int opened = shimkit::loader::open_blob(bytes, size, &model->dl, &entries, &error);
  // Keep what resolved (the destructor deletes a container through `destroy`).
  model->create = entries.create;
  model->destroy = entries.destroy;
  model->run = entries.run;
  model->num_inputs_fn = entries.num_inputs;
  model->num_outputs_fn = entries.num_outputs;
  if (opened != SHIMKIT_OK) return fail(opened, error);
  model->input_name_fn =
      reinterpret_cast<NameFn>(dlsym(model->dl, "AOTInductorModelContainerGetInputName"));
  shimkit_shim_clear_error();
  if (model->create(&model->container, 1, "cpu", nullptr) != 0 || model->container == nullptr) {
    model->container = nullptr;
    return fail(SHIMKIT_E_CREATE, std::string("blob: creating the model container failed") +
                                      (shimkit_shim_last_error()[0] ? ": " : "") +
                                      shimkit_shim_last_error());
  }
  if (model->num_inputs_fn(model->container, &model->num_inputs) != 0 ||
      model->num_outputs_fn(model->container, &model->num_outputs) != 0) {
    return fail(SHIMKIT_E_CREATE, "blob: cannot read the number of inputs/outputs");
  }
  model->outputs.assign(model->num_outputs, nullptr);
  *out = model.release();
  return SHIMKIT_OK;
}

int describe(AtenTensorHandle h, shimkit_tensor* d) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  if (aoti_torch_get_dim(h, &ndim) != 0 || ndim > SHIMKIT_MAX_DIMS ||
      aoti_torch_get_sizes(h, &sizes) != 0 || aoti_torch_get_strides(h, &strides) != 0 ||
      aoti_torch_get_dtype(h, &d->dtype) != 0 || aoti_torch_get_data_ptr(h, &d->data) != 0) {
    return fail(SHIMKIT_E_RUN, "output tensor cannot be described (more than 8 dims?)");
  }
  d->ndim = static_cast<int32_t>(ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    d->sizes[i] = sizes[i];
    d->strides[i] = strides[i];
  }
  return SHIMKIT_OK;
}

// Copies output `h` into the caller's buffer `d` if the geometry matches.
bool copy_into(AtenTensorHandle h, shimkit_tensor* d) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  int32_t dtype = 0;
  if (d->data == nullptr || aoti_torch_get_dim(h, &ndim) != 0 || ndim != d->ndim ||
      aoti_torch_get_sizes(h, &sizes) != 0 || aoti_torch_get_dtype(h, &dtype) != 0 ||
      dtype != d->dtype) {
    return false;
  }
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[i] != d->sizes[i]) return false;
  }
  int64_t stride = 1;
  for (int64_t i = ndim - 1; i >= 0; --i) {
    d->strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  AtenTensorHandle dst = nullptr;
  if (aoti_torch_create_tensor_from_blob(d->data, ndim, d->sizes, d->strides, 0, dtype,
                                         aoti_torch_device_type_cpu(), -1, &dst) != 0) {
    return false;
  }
  const bool ok = aoti_torch_copy_(dst, h, 0) == 0;
  aoti_torch_delete_tensor_object(dst);
  return ok;
}

int run_locked(shimkit_model* m, const shimkit_tensor* inputs, size_t num_inputs,
               shimkit_tensor* outputs, size_t num_outputs, uint8_t* copied = nullptr) {
  if (num_inputs != m->num_inputs) {
    return fail(SHIMKIT_E_BAD_INPUT, "model takes " + std::to_string(m->num_inputs) +
                                         " inputs, got " + std::to_string(num_inputs));
  }
  if (outputs != nullptr && num_outputs != m->num_outputs) {
    return fail(SHIMKIT_E_BAD_INPUT, "model has " + std::to_string(m->num_outputs) +
                                         " outputs, caller expects " + std::to_string(num_outputs));
  }
  std::vector<AtenTensorHandle> handles(num_inputs, nullptr);
  auto free_handles = [&]() {
    for (AtenTensorHandle h : handles) {
      if (h != nullptr) aoti_torch_delete_tensor_object(h);
    }
  };
  for (size_t i = 0; i < num_inputs; ++i) {
    const shimkit_tensor& t = inputs[i];
    if (t.ndim < 0 || t.ndim > SHIMKIT_MAX_DIMS) {
      free_handles();
      return fail(SHIMKIT_E_BAD_INPUT,
                  "input " + std::to_string(i) + ": bad ndim " + std::to_string(t.ndim));
    }
    if (aoti_torch_create_tensor_from_blob(t.data, t.ndim, t.sizes, t.strides, 0, t.dtype,
                                           aoti_torch_device_type_cpu(), -1, &handles[i]) != 0) {
      handles[i] = nullptr;
      free_handles();
      return fail(SHIMKIT_E_BAD_INPUT,
                  "input " + std::to_string(i) + ": " + shimkit_shim_last_error());
    }
  }
  m->release_outputs();
  shimkit_shim_clear_error();
  // Run steals the input handles, even when it fails.
  int32_t rc = 0;
  if (!m->ran_once) {
    // Blobs read AOTI_RUNTIME_CHECK_INPUTS once, on their first run, and then
    // check every input's dtype, sizes and strides. Turn that on (unless the
    // user set it) so a wrong input fails cleanly instead of reading out of
    // bounds.
    static std::mutex env_mutex;
    std::lock_guard<std::mutex> env_lock(env_mutex);
    const bool set_env = m->check_inputs && std::getenv("AOTI_RUNTIME_CHECK_INPUTS") == nullptr;
    if (set_env) setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", 0);
    rc = m->run(m->container, handles.data(), num_inputs, m->outputs.data(), m->num_outputs,
                nullptr, nullptr);
    if (set_env) unsetenv("AOTI_RUNTIME_CHECK_INPUTS");
    m->ran_once = true;
  } else {
    rc = m->run(m->container, handles.data(), num_inputs, m->outputs.data(), m->num_outputs,
                nullptr, nullptr);
  }
  if (rc != 0) {
    std::fill(m->outputs.begin(), m->outputs.end(), nullptr);
    const char* why = shimkit_shim_last_error();
    return fail(SHIMKIT_E_RUN, std::string("model run failed") + (why[0] ? ": " : "") +
                                   (why[0] ? why : " (the blob printed details to stderr)"));
  }
  if (outputs != nullptr) {
    for (size_t i = 0; i < m->num_outputs; ++i) {
      if (copied != nullptr) {
        copied[i] = copy_into(m->outputs[i], &outputs[i]) ? 1 : 0;
        if (copied[i]) continue;
      }
      const int d = describe(m->outputs[i], &outputs[i]);
      if (d != SHIMKIT_OK) return d;
    }
  }
  return SHIMKIT_OK;
}

}  // namespace

extern "C" {

const char* shimkit_last_error(void) { return g_error.c_str(); }

const char* shimkit_provider_path(void) {
  const Provider& p = provider();
  return p.handle ? p.path.c_str() : nullptr;
}

const char* shimkit_runtime_prefix(void) { return shimkit::loader::kPrefix; }

int shimkit_check_blob(const void* bytes, size_t size) {
  try {
    return check_blob(bytes, size);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_BAD_BLOB, std::string("blob: ") + e.what());
  }
}

int shimkit_model_load(const void* bytes, size_t size, shimkit_model** out) {
  try {
    return load(bytes, size, out);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string("load failed: ") + e.what());
  }
}

int shimkit_model_load_file(const char* path, shimkit_model** out) {
  try {
    std::vector<char> bytes;
    std::string error;
    if (shimkit::loader::read_file(path, &bytes, &error) != SHIMKIT_OK) {
      return fail(SHIMKIT_E_IO, error);
    }
    const int rc = load(bytes.data(), bytes.size(), out);
    if (rc != SHIMKIT_OK) g_error = std::string(path) + ": " + g_error;
    return rc;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string(path) + ": " + e.what());
  }
}

void shimkit_model_free(shimkit_model* model) { delete model; }

size_t shimkit_model_num_inputs(const shimkit_model* model) {
  return model ? model->num_inputs : 0;
}

size_t shimkit_model_num_outputs(const shimkit_model* model) {
  return model ? model->num_outputs : 0;
}

int shimkit_model_set_check_inputs(shimkit_model* model, int enabled) {
  if (model == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null model");
  std::lock_guard<std::mutex> lock(model->mutex);
  if (model->ran_once) {
    return fail(SHIMKIT_E_BAD_INPUT, "check_inputs must be set before the first run");
  }
  model->check_inputs = enabled != 0;
  return SHIMKIT_OK;
}

uintptr_t shimkit_model_load_base(const shimkit_model* model) {
  if (model == nullptr) return 0;
  return shimkit::loader::load_base_of(reinterpret_cast<void*>(model->create));
}

const char* shimkit_model_input_name(const shimkit_model* model, size_t index) {
  if (model == nullptr || model->input_name_fn == nullptr || index >= model->num_inputs) {
    return nullptr;
  }
  const char* name = nullptr;
  if (model->input_name_fn(model->container, index, &name) != 0) return nullptr;
  return name;
}

int shimkit_model_run(shimkit_model* model, const shimkit_tensor* inputs, size_t num_inputs,
                      shimkit_tensor* outputs, size_t num_outputs) {
  if (model == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null model");
  if (inputs == nullptr && num_inputs > 0) return fail(SHIMKIT_E_BAD_INPUT, "null inputs");
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    return run_locked(model, inputs, num_inputs, outputs, num_outputs);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("model run failed: ") + e.what());
  }
}

int shimkit_model_run_into(shimkit_model* model, const shimkit_tensor* inputs, size_t num_inputs,
                           shimkit_tensor* outputs, size_t num_outputs, uint8_t* copied) {
  if (model == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null model");
  if (inputs == nullptr && num_inputs > 0) return fail(SHIMKIT_E_BAD_INPUT, "null inputs");
  if (outputs == nullptr || copied == nullptr) {
    return fail(SHIMKIT_E_BAD_INPUT, "null outputs or copied");
  }
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    return run_locked(model, inputs, num_inputs, outputs, num_outputs, copied);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("model run failed: ") + e.what());
  }
}

int shimkit_model_bench(shimkit_model* model, const shimkit_tensor* inputs, size_t num_inputs,
                        int64_t iterations, double* ns_per_run) {
  if (model == nullptr || ns_per_run == nullptr || iterations <= 0) {
    return fail(SHIMKIT_E_BAD_INPUT, "bad bench arguments");
  }
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; ++i) {
      const int rc = run_locked(model, inputs, num_inputs, nullptr, 0);
      if (rc != SHIMKIT_OK) return rc;
    }
    const auto stop = std::chrono::steady_clock::now();
    *ns_per_run = std::chrono::duration<double, std::nano>(stop - start).count() /
                  static_cast<double>(iterations);
    return SHIMKIT_OK;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("bench failed: ") + e.what());
  }
}

}  // extern "C"
