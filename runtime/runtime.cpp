// The CPU runner behind shimkit_runtime.h, over the loader both runtimes
// share (blob_loader.h): vet the blob against the slim shims, load it, run it
// on CPU tensors.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/blob_loader.h"
#include "runtime/shimkit_runtime.h"
#include "shims/aoti_shim_abi.h"

namespace ld = shimkit::loader;
using ld::fail;

namespace {

// Every import must resolve now: the CPU provider or a loaded library
// (libc, libgomp, ...) supplies it.
constexpr ld::VetPolicy kPolicy = {true,
                                   "which neither the slim shims nor any loaded library provide"};

int check_blob(const void* bytes, size_t size) {
  shimkit::ElfSymbols syms;
  return ld::vet_blob(bytes, size, kPolicy, &syms);
}

}  // namespace

struct shimkit_model {
  ld::Blob blob;
  bool ran_once = false;
  bool check_inputs = true;
  // Input handles of the run in progress: sized once at load (no allocation
  // per run); Blob::run takes them, wrap_inputs makes them anew every run.
  ld::Handles inputs{0};
  ld::Handles outputs{0};
  std::mutex mutex;
};

namespace {

// Loads the blob of `bytes` or, when `path` is given, of that file.
int load(const void* bytes, size_t size, const char* path, shimkit_model** out) {
  if (out == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null output pointer");
  *out = nullptr;
  shimkit::TempBlobFile file;
  shimkit::ElfSymbols syms;
  const int staged = path != nullptr ? ld::stage_file(path, kPolicy, &file, &syms)
                                     : ld::stage_bytes(bytes, size, kPolicy, &file, &syms);
  if (staged != SHIMKIT_OK) return staged;
  auto model = std::make_unique<shimkit_model>();
  const int opened = model->blob.open(&file, syms, "cpu");
  if (opened != SHIMKIT_OK) return opened;
  model->inputs.h.assign(model->blob.num_inputs(), nullptr);
  model->outputs.h.assign(model->blob.num_outputs(), nullptr);
  *out = model.release();
  return SHIMKIT_OK;
}

// Describes output `h` in place (model-owned memory, its own strides).
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
  return d->data != nullptr && ld::same_geometry(h, *d) && ld::copy_to_host(h, d) == SHIMKIT_OK;
}

int run_locked(shimkit_model* m, const shimkit_tensor* inputs, size_t num_inputs,
               shimkit_tensor* outputs, size_t num_outputs, uint8_t* copied = nullptr) {
  const size_t expected_outputs = m->blob.num_outputs();
  if (outputs != nullptr && num_outputs != expected_outputs) {
    return fail(SHIMKIT_E_BAD_INPUT, "model has " + std::to_string(expected_outputs) +
                                         " outputs, caller expects " + std::to_string(num_outputs));
  }
  ld::Handles& handles = m->inputs;
  handles.release();  // all null unless a previous run stopped between wrapping and running
  int rc = ld::wrap_inputs(inputs, num_inputs, m->blob.num_inputs(), &handles);
  if (rc != SHIMKIT_OK) {
    handles.release();  // those wrapped before the one that failed
    return rc;
  }
  m->outputs.release();
  if (!m->ran_once) {
    // Blobs read AOTI_RUNTIME_CHECK_INPUTS once, on their first run, and then
    // check every input's dtype, sizes and strides. Turn that on (unless the
    // user set it) so a wrong input fails cleanly instead of reading out of
    // bounds.
    static std::mutex env_mutex;
    std::lock_guard<std::mutex> env_lock(env_mutex);
    const bool set_env = m->check_inputs && std::getenv("AOTI_RUNTIME_CHECK_INPUTS") == nullptr;
    if (set_env) setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", 0);
    rc = m->blob.run(handles.h.data(), num_inputs, m->outputs.h.data(), expected_outputs, nullptr);
    if (set_env) unsetenv("AOTI_RUNTIME_CHECK_INPUTS");
    m->ran_once = true;
  } else {
    rc = m->blob.run(handles.h.data(), num_inputs, m->outputs.h.data(), expected_outputs, nullptr);
  }
  if (rc != SHIMKIT_OK) return rc;
  if (outputs != nullptr) {
    for (size_t i = 0; i < expected_outputs; ++i) {
      if (copied != nullptr) {
        copied[i] = copy_into(m->outputs.h[i], &outputs[i]) ? 1 : 0;
        if (copied[i]) continue;
      }
      const int d = describe(m->outputs.h[i], &outputs[i]);
      if (d != SHIMKIT_OK) return d;
    }
  }
  return SHIMKIT_OK;
}

}  // namespace

extern "C" {

const char* shimkit_last_error(void) { return ld::last_error().c_str(); }

const char* shimkit_provider_path(void) {
  const ld::Provider& p = ld::provider();
  return p.handle ? p.path.c_str() : nullptr;
}

const char* shimkit_runtime_prefix(void) { return ld::served_prefix(); }

int shimkit_check_blob(const void* bytes, size_t size) {
  try {
    return check_blob(bytes, size);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_BAD_BLOB, std::string("blob: ") + e.what());
  }
}

int shimkit_model_load(const void* bytes, size_t size, shimkit_model** out) {
  try {
    return load(bytes, size, nullptr, out);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string("load failed: ") + e.what());
  }
}

int shimkit_model_load_file(const char* path, shimkit_model** out) {
  try {
    if (path == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null path");
    const int rc = load(nullptr, 0, path, out);
    // Reading errors name the path already.
    if (rc != SHIMKIT_OK && rc != SHIMKIT_E_IO) ld::prefix_last_error(path);
    return rc;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string(path) + ": " + e.what());
  }
}

void shimkit_model_free(shimkit_model* model) { delete model; }

size_t shimkit_model_num_inputs(const shimkit_model* model) {
  return model ? model->blob.num_inputs() : 0;
}

size_t shimkit_model_num_outputs(const shimkit_model* model) {
  return model ? model->blob.num_outputs() : 0;
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

int shimkit_model_allow_stand_ins(shimkit_model* model, const char* const* fqns, size_t count,
                                  size_t* allowed) {
  if (model == nullptr || allowed == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null argument");
  if (fqns == nullptr && count > 0) return fail(SHIMKIT_E_BAD_INPUT, "null constant names");
  std::lock_guard<std::mutex> lock(model->mutex);
  if (model->ran_once) {
    return fail(SHIMKIT_E_BAD_INPUT, "stand-ins must be allowed before the first run");
  }
  return model->blob.allow_stand_ins(fqns, count, allowed);
}

uintptr_t shimkit_model_load_base(const shimkit_model* model) {
  return model ? model->blob.load_base() : 0;
}

const char* shimkit_model_input_name(const shimkit_model* model, size_t index) {
  return model ? model->blob.input_name(index) : nullptr;
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
