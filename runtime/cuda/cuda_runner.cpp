// The CUDA blob runner behind shimkit_cuda_runtime.h: vets a blob, loads it
// from a private temp file against the slim CUDA shims, and runs it on a GPU.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/blob_loader_common.h"
#include "runtime/cuda/shimkit_cuda_runtime.h"
#include "runtime/temp_blob_file.h"
#include "shims/cuda/aoti_shim_cuda_abi.h"

namespace {

using shimkit::loader::ContainerHandle;
using shimkit::loader::CreateWithDeviceFn;
using shimkit::loader::DeleteFn;
using shimkit::loader::object_of;
using shimkit::loader::RunFn;

thread_local std::string g_error;

int fail(int code, std::string message) {
  g_error = std::move(message);
  return code;
}

std::string shim_error() {
  const char* e = shimkit_shim_last_error();
  return e[0] ? e : "no details";
}

// A blob built for CUDA calls CUDA guards/streams through the shims, or the
// CUDA runtime/driver directly (cudaMalloc, cuLaunchKernel, ...).
bool imports_cuda(const std::string& bare) {
  return bare.find("_cuda_") != std::string::npos || bare.rfind("cuda", 0) == 0 ||
         (bare.size() > 2 && bare[0] == 'c' && bare[1] == 'u' && bare[2] >= 'A' && bare[2] <= 'Z');
}

struct Environment {
  std::string provider;  // path of the slim CUDA shim library
  std::string error;
  int code = SHIMKIT_OK;
};

// Puts the shim provider and the CUDA libraries blobs link against in global
// scope (blobs resolve them at dlopen, from static initialisers on).
const Environment& environment() {
  static const Environment env = [] {
    Environment out;
    out.provider = object_of(reinterpret_cast<void*>(&aoti_torch_empty_strided));
    if (dlopen(out.provider.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == nullptr) {
      out.code = SHIMKIT_E_PROVIDER;
      out.error = out.provider + ": cannot make the shim provider global";
      return out;
    }
    if (shimkit_cuda_device_count() < 0) {
      out.code = SHIMKIT_E_DEVICE;
      out.error = shimkit_cuda_unavailable_reason();
      return out;
    }
    for (const char* lib : {"libcudart.so.13", "libcudart.so.12"}) {
      if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) break;
    }
    dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    return out;
  }();
  return env;
}

int check_blob(const void* bytes, size_t size) {
  shimkit::ElfSymbols syms;
  std::string error;
  int rc = shimkit::loader::read_blob_symbols(bytes, size, &syms, &error);
  if (rc != SHIMKIT_OK) return fail(rc, error);
  const Environment& env = environment();
  bool cuda = false;
  for (const std::string& name : syms.unversioned_imports) {
    std::string bare;
    const bool prefixed = shimkit::loader::strip_prefix(name, &bare);
    cuda = cuda || imports_cuda(bare);
    rc = shimkit::loader::check_import(name, bare, prefixed, env.provider,
                                       /*resolve_others=*/false,
                                       "which the slim CUDA shims do not provide", &error);
    if (rc != SHIMKIT_OK) return fail(rc, error);
  }
  if (!cuda) {
    return fail(SHIMKIT_E_DEVICE,
                "blob: built for the CPU (it imports no CUDA function), not for CUDA; run it "
                "with the CPU runtime (shimkit run)");
  }
  return SHIMKIT_OK;
}

}  // namespace

struct shimkit_cuda_model {
  shimkit::TempBlobFile file;
  void* dl = nullptr;
  ContainerHandle container = nullptr;
  CreateWithDeviceFn create = nullptr;
  DeleteFn destroy = nullptr;
  RunFn run = nullptr;
  int32_t device = 0;
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  std::vector<std::vector<char>> host_outputs;
  std::mutex mutex;

  ~shimkit_cuda_model() {
    if (container != nullptr && destroy != nullptr) destroy(container);
    if (dl != nullptr) dlclose(dl);
  }
};

namespace {

// Owns tensor handles; deletes whatever is left on scope exit.
struct Handles {
  std::vector<AtenTensorHandle> h;
  explicit Handles(size_t n) : h(n, nullptr) {}
  ~Handles() {
    for (AtenTensorHandle t : h) {
      if (t != nullptr) aoti_torch_delete_tensor_object(t);
    }
  }
};

int load(const void* bytes, size_t size, int32_t device_index, shimkit_cuda_model** out) {
  if (out == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null output pointer");
  *out = nullptr;
  // Blob problems first (they hold on any machine), then the device.
  const Environment& env = environment();
  if (env.code == SHIMKIT_E_PROVIDER) return fail(env.code, env.error);
  const int checked = check_blob(bytes, size);
  if (checked != SHIMKIT_OK) return checked;
  if (env.code != SHIMKIT_OK) return fail(env.code, "CUDA unavailable: " + env.error);
  const int32_t count = shimkit_cuda_device_count();
  if (device_index < 0 || device_index >= count) {
    return fail(SHIMKIT_E_DEVICE, "CUDA device index " + std::to_string(device_index) +
                                      " out of range: " + std::to_string(count) +
                                      " device(s) present");
  }
  auto model = std::make_unique<shimkit_cuda_model>();
  model->device = device_index;
  std::string error;
  shimkit::loader::BlobEntries entries;
  const int opened =
      shimkit::loader::open_blob(bytes, size, &model->file, &model->dl, &entries, &error);
  model->create = entries.create;
  model->destroy = entries.destroy;
  model->run = entries.run;
  if (opened != SHIMKIT_OK) return fail(opened, error);
  const shimkit::loader::CountFn num_in = entries.num_inputs;
  const shimkit::loader::CountFn num_out = entries.num_outputs;
  shimkit_shim_clear_error();
  const std::string device = "cuda:" + std::to_string(device_index);
  if (model->create(&model->container, 1, device.c_str(), nullptr) != 0 ||
      model->container == nullptr) {
    model->container = nullptr;
    return fail(SHIMKIT_E_CREATE,
                "blob: creating the model container on " + device + " failed: " + shim_error());
  }
  if (num_in(model->container, &model->num_inputs) != 0 ||
      num_out(model->container, &model->num_outputs) != 0) {
    return fail(SHIMKIT_E_CREATE, "blob: cannot read the number of inputs/outputs");
  }
  *out = model.release();
  return SHIMKIT_OK;
}

// Device copies of host `inputs` (new handles in `dev`).
int upload_inputs(const shimkit_cuda_model& m, const shimkit_tensor* inputs, size_t n,
                  Handles* dev) {
  if (n != m.num_inputs) {
    return fail(SHIMKIT_E_BAD_INPUT, "model takes " + std::to_string(m.num_inputs) +
                                         " inputs, got " + std::to_string(n));
  }
  if (inputs == nullptr && n > 0) return fail(SHIMKIT_E_BAD_INPUT, "null inputs");
  for (size_t i = 0; i < n; ++i) {
    const shimkit_tensor& t = inputs[i];
    if (t.ndim < 0 || t.ndim > SHIMKIT_MAX_DIMS) {
      return fail(SHIMKIT_E_BAD_INPUT, "input " + std::to_string(i) + ": bad ndim");
    }
    AtenTensorHandle host = nullptr;
    if (aoti_torch_create_tensor_from_blob(t.data, t.ndim, t.sizes, t.strides, 0, t.dtype,
                                           aoti_torch_device_type_cpu(), -1, &host) != 0) {
      return fail(SHIMKIT_E_BAD_INPUT, "input " + std::to_string(i) + ": " + shim_error());
    }
    Handles owner(1);
    owner.h[0] = host;
    if (aoti_torch_empty_strided(t.ndim, t.sizes, t.strides, t.dtype, aoti_torch_device_type_cuda(),
                                 m.device, &dev->h[i]) != 0 ||
        aoti_torch_copy_(dev->h[i], host, 0) != 0) {
      return fail(SHIMKIT_E_RUN, "input " + std::to_string(i) + ": upload failed: " + shim_error());
    }
  }
  return SHIMKIT_OK;
}

// Runs with device inputs (stolen by the blob); outputs land in `outs`.
int run_device(shimkit_cuda_model* m, Handles* inputs, Handles* outs) {
  shimkit_shim_clear_error();
  const int32_t rc = m->run(m->container, inputs->h.data(), inputs->h.size(), outs->h.data(),
                            outs->h.size(), nullptr, nullptr);
  std::fill(inputs->h.begin(), inputs->h.end(), nullptr);  // Run took them, even on failure
  if (rc != 0) {
    std::fill(outs->h.begin(), outs->h.end(), nullptr);
    return fail(SHIMKIT_E_RUN, "model run failed: " + shim_error());
  }
  return SHIMKIT_OK;
}

int download(shimkit_cuda_model* m, AtenTensorHandle h, size_t index, shimkit_tensor* d) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  if (aoti_torch_get_dim(h, &ndim) != 0 || ndim > SHIMKIT_MAX_DIMS ||
      aoti_torch_get_sizes(h, &sizes) != 0 || aoti_torch_get_dtype(h, &d->dtype) != 0) {
    return fail(SHIMKIT_E_RUN, "output " + std::to_string(index) + " cannot be described");
  }
  d->ndim = static_cast<int32_t>(ndim);
  int64_t numel = 1;
  for (int64_t i = ndim - 1; i >= 0; --i) {
    d->sizes[i] = sizes[i];
    d->strides[i] = numel;
    numel *= sizes[i] > 0 ? sizes[i] : 1;
  }
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[i] == 0) numel = 0;
  }
  std::vector<char>& buffer = m->host_outputs[index];
  buffer.assign(static_cast<size_t>(numel) * aoti_torch_dtype_element_size(d->dtype) + 1, 0);
  d->data = buffer.data();
  AtenTensorHandle dst = nullptr;
  if (aoti_torch_create_tensor_from_blob(d->data, ndim, d->sizes, d->strides, 0, d->dtype,
                                         aoti_torch_device_type_cpu(), -1, &dst) != 0) {
    return fail(SHIMKIT_E_RUN, "output " + std::to_string(index) + ": " + shim_error());
  }
  const bool ok = aoti_torch_copy_(dst, h, 0) == 0;
  aoti_torch_delete_tensor_object(dst);
  if (!ok) return fail(SHIMKIT_E_RUN, "output " + std::to_string(index) + ": " + shim_error());
  return SHIMKIT_OK;
}

}  // namespace

extern "C" {

const char* shimkit_cuda_last_error(void) { return g_error.c_str(); }

int shimkit_cuda_model_load(const void* bytes, size_t size, int32_t device_index,
                            shimkit_cuda_model** out) {
  try {
    return load(bytes, size, device_index, out);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string("load failed: ") + e.what());
  }
}

int shimkit_cuda_model_load_file(const char* path, int32_t device_index, shimkit_cuda_model** out) {
  if (path == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null path");
  try {
    std::vector<char> bytes;
    std::string error;
    if (shimkit::loader::read_file(path, &bytes, &error) != SHIMKIT_OK) {
      return fail(SHIMKIT_E_IO, error);
    }
    const int rc = load(bytes.data(), bytes.size(), device_index, out);
    if (rc != SHIMKIT_OK) g_error = std::string(path) + ": " + g_error;
    return rc;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string(path) + ": " + e.what());
  }
}

void shimkit_cuda_model_free(shimkit_cuda_model* model) { delete model; }

size_t shimkit_cuda_model_num_inputs(const shimkit_cuda_model* model) {
  return model ? model->num_inputs : 0;
}

size_t shimkit_cuda_model_num_outputs(const shimkit_cuda_model* model) {
  return model ? model->num_outputs : 0;
}

uintptr_t shimkit_cuda_model_load_base(const shimkit_cuda_model* model) {
  if (model == nullptr) return 0;
  return shimkit::loader::load_base_of(reinterpret_cast<void*>(model->create));
}

int shimkit_cuda_model_run(shimkit_cuda_model* model, const shimkit_tensor* inputs,
                           size_t num_inputs, shimkit_tensor* outputs, size_t num_outputs) {
  if (model == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null model");
  if (outputs == nullptr || num_outputs != model->num_outputs) {
    return fail(SHIMKIT_E_BAD_INPUT, "model has " + std::to_string(model->num_outputs) +
                                         " outputs, caller expects " + std::to_string(num_outputs));
  }
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    Handles dev(model->num_inputs);
    int rc = upload_inputs(*model, inputs, num_inputs, &dev);
    if (rc != SHIMKIT_OK) return rc;
    Handles outs(model->num_outputs);
    rc = run_device(model, &dev, &outs);
    if (rc != SHIMKIT_OK) return rc;
    model->host_outputs.resize(model->num_outputs);
    for (size_t i = 0; i < model->num_outputs; ++i) {
      rc = download(model, outs.h[i], i, &outputs[i]);
      if (rc != SHIMKIT_OK) return rc;
    }
    return SHIMKIT_OK;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("model run failed: ") + e.what());
  }
}

int shimkit_cuda_model_bench(shimkit_cuda_model* model, const shimkit_tensor* inputs,
                             size_t num_inputs, int64_t iterations, double* ns_per_run) {
  if (model == nullptr || ns_per_run == nullptr || iterations <= 0) {
    return fail(SHIMKIT_E_BAD_INPUT, "bad bench arguments");
  }
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    Handles resident(model->num_inputs);
    int rc = upload_inputs(*model, inputs, num_inputs, &resident);
    if (rc != SHIMKIT_OK) return rc;
    if (shimkit_cuda_synchronize(model->device) != 0) {
      return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
    }
    // SHIMKIT_BENCH_SYNC=end: synchronise once after the loop instead of after
    // every run, so the figure is the host's issue cost when it is the
    // bottleneck (the breakdown in tools/gpu/step_breakdown.py).
    const char* sync_mode = std::getenv("SHIMKIT_BENCH_SYNC");
    const bool sync_each = sync_mode == nullptr || std::string(sync_mode) != "end";
    const auto start = std::chrono::steady_clock::now();
    for (int64_t it = 0; it < iterations; ++it) {
      Handles in(model->num_inputs);
      for (size_t i = 0; i < model->num_inputs; ++i) {
        if (aoti_torch_new_tensor_handle(resident.h[i], &in.h[i]) != 0) {
          return fail(SHIMKIT_E_RUN, shim_error());
        }
      }
      Handles outs(model->num_outputs);
      rc = run_device(model, &in, &outs);
      if (rc != SHIMKIT_OK) return rc;
      if ((sync_each || it + 1 == iterations) && shimkit_cuda_synchronize(model->device) != 0) {
        return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
      }
    }
    const auto stop = std::chrono::steady_clock::now();
    *ns_per_run = std::chrono::duration<double, std::nano>(stop - start).count() /
                  static_cast<double>(iterations);
    return SHIMKIT_OK;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("bench failed: ") + e.what());
  }
}

int shimkit_cuda_h2d_bandwidth(size_t bytes, int pinned, int32_t device_index, int iterations,
                               double* gb_per_s) {
  if (gb_per_s == nullptr || iterations <= 0 || bytes == 0 || bytes % 4 != 0) {
    return fail(SHIMKIT_E_BAD_INPUT, "bad bandwidth arguments");
  }
  const Environment& env = environment();
  if (env.code != SHIMKIT_OK) return fail(env.code, env.error);
  const int64_t n = static_cast<int64_t>(bytes / 4);
  Handles h(2);
  const int32_t f32 = aoti_torch_dtype_float32();
  const int32_t cpu = aoti_torch_device_type_cpu();
  const int rc_src = pinned ? aoti_torch_empty_strided_pinned(1, &n, nullptr, f32, cpu, -1, &h.h[0])
                            : aoti_torch_empty_strided(1, &n, nullptr, f32, cpu, -1, &h.h[0]);
  if (rc_src != 0 || aoti_torch_empty_strided(1, &n, nullptr, f32, aoti_torch_device_type_cuda(),
                                              device_index, &h.h[1]) != 0) {
    return fail(SHIMKIT_E_DEVICE, "allocation failed: " + shim_error());
  }
  void* src = nullptr;
  aoti_torch_get_data_ptr(h.h[0], &src);
  std::memset(src, 1, bytes);  // fault the pages in before timing
  double best = 0.0;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (aoti_torch_copy_(h.h[1], h.h[0], 0) != 0) {
      return fail(SHIMKIT_E_RUN, "copy failed: " + shim_error());
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = static_cast<double>(bytes) / s / 1e9;
    if (rate > best) best = rate;
  }
  *gb_per_s = best;
  return SHIMKIT_OK;
}

}  // extern "C"
