// The CUDA runner behind shimkit_cuda_runtime.h, over the loader both
// runtimes share (runtime/blob_loader.h): vets a blob against the slim CUDA
// shims, loads it, and runs it on a GPU, eagerly or as a replayed CUDA graph.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/blob_loader.h"
#include "runtime/cuda/shimkit_cuda_runtime.h"
#include "shims/cuda/aoti_shim_cuda_abi.h"

namespace ld = shimkit::loader;
using ld::fail;
using ld::Handles;
using ld::shim_error;

namespace {

// Shim imports must bind to the CUDA provider; the CUDA driver functions a
// blob calls (cuLaunchKernel, ...) resolve once libcuda is global.
constexpr ld::VetPolicy kPolicy = {false, "which the slim CUDA shims do not provide"};

// A blob built for CUDA calls CUDA guards/streams through the shims, or the
// CUDA runtime/driver directly (cudaMalloc, cuLaunchKernel, ...).
bool imports_cuda(const std::string& name) {
  return name.find("_cuda_") != std::string::npos || name.rfind("cuda", 0) == 0 ||
         (name.size() > 2 && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z');
}

struct Environment {
  std::string error;
  int code = SHIMKIT_OK;
};

// Puts the shim provider and the CUDA libraries blobs link against in global
// scope (blobs resolve them at dlopen, from static initialisers on).
const Environment& environment() {
  static const Environment env = [] {
    Environment out;
    const ld::Provider& provider = ld::provider();
    if (provider.handle == nullptr) {
      out.code = SHIMKIT_E_PROVIDER;
      out.error = provider.error;
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

// A vetted blob (`syms`) must be built for CUDA.
int check_cuda_imports(const shimkit::ElfSymbols& syms) {
  for (const std::string& name : syms.unversioned_imports) {
    if (imports_cuda(name)) return SHIMKIT_OK;
  }
  return fail(SHIMKIT_E_DEVICE,
              "blob: built for the CPU (it imports no CUDA function), not for CUDA; run it "
              "with the CPU runtime (shimkit run)");
}

}  // namespace

struct shimkit_cuda_model {
  ld::Blob blob;
  int32_t device = 0;
  std::vector<std::vector<char>> host_outputs;
  std::mutex mutex;

  // CUDA-graph replay (shimkit_cuda_model_use_graphs; see run_graph()).
  bool graphs = false;
  void* stream = nullptr;  // the model's own non-blocking stream
  // 0 cold, 1 warmed up, 2 replaying, 3 captured with host steps and timing
  // replay against eager (run_to_choose), -1 replay given up.
  int graph_state = 0;
  std::string graph_status = "off";
  std::vector<AtenTensorHandle> static_in, static_out;
  std::vector<std::vector<int64_t>> input_geometry;
  void* exec = nullptr;
  uint64_t pool = 0;
  int64_t host_steps = 0;       // host fallbacks in the graph
  std::string host_step_names;  // their ops, "topk, histc"
  int choice_runs = 0;
  double best_replay_us = -1, best_eager_us = -1;

  size_t num_inputs() const { return blob.num_inputs(); }
  size_t num_outputs() const { return blob.num_outputs(); }

  void release_graph() {
    if (exec != nullptr || pool != 0) shimkit_cuda_graph_free(exec, pool, stream);
    exec = nullptr;
    pool = 0;
    for (AtenTensorHandle h : static_in) aoti_torch_delete_tensor_object(h);
    for (AtenTensorHandle h : static_out) aoti_torch_delete_tensor_object(h);
    static_in.clear();
    static_out.clear();
    input_geometry.clear();
    host_steps = 0;
    host_step_names.clear();
    choice_runs = 0;
    best_replay_us = best_eager_us = -1;
  }

  ~shimkit_cuda_model() {
    release_graph();
    if (stream != nullptr) {
      shimkit_cuda_stream_synchronize(stream);
      shimkit_cuda_stream_destroy(stream);
    }
  }
};

namespace {

// Loads the blob of `bytes` or, when `path` is given, of that file.
int load(const void* bytes, size_t size, const char* path, int32_t device_index,
         shimkit_cuda_model** out) {
  if (out == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null output pointer");
  *out = nullptr;
  // Blob problems first (they hold on any machine), then the device.
  const Environment& env = environment();
  if (env.code == SHIMKIT_E_PROVIDER) return fail(env.code, env.error);
  shimkit::TempBlobFile file;
  shimkit::ElfSymbols syms;
  const int staged = path != nullptr ? ld::stage_file(path, kPolicy, &file, &syms)
                                     : ld::stage_bytes(bytes, size, kPolicy, &file, &syms);
  if (staged != SHIMKIT_OK) return staged;
  const int checked = check_cuda_imports(syms);
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
  const std::string device = "cuda:" + std::to_string(device_index);
  const int opened = model->blob.open(&file, syms, device.c_str());
  if (opened != SHIMKIT_OK) return opened;
  *out = model.release();
  if (const char* v = std::getenv("SHIMKIT_CUDA_GRAPHS");
      v != nullptr && std::strcmp(v, "1") == 0) {
    shimkit_cuda_model_use_graphs(*out, 1);
  }
  return SHIMKIT_OK;
}

// Device copies of host `inputs` (new handles in `dev`).
int upload_inputs(const shimkit_cuda_model& m, const shimkit_tensor* inputs, size_t n,
                  Handles* dev) {
  Handles host(m.num_inputs());
  const int rc = ld::wrap_inputs(inputs, n, m.num_inputs(), &host);
  if (rc != SHIMKIT_OK) return rc;
  for (size_t i = 0; i < n; ++i) {
    const shimkit_tensor& t = inputs[i];
    if (aoti_torch_empty_strided(t.ndim, t.sizes, t.strides, t.dtype, aoti_torch_device_type_cuda(),
                                 m.device, &dev->h[i]) != 0 ||
        aoti_torch_copy_(dev->h[i], host.h[i], 0) != 0) {
      return fail(SHIMKIT_E_RUN, "input " + std::to_string(i) + ": upload failed: " + shim_error());
    }
  }
  return SHIMKIT_OK;
}

// Fills descriptor `d` with device tensor `h` as it is (data pointer, sizes,
// strides, dtype).
int describe_device(AtenTensorHandle h, size_t index, shimkit_tensor* d) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  void* data = nullptr;
  if (aoti_torch_get_dim(h, &ndim) != 0 || aoti_torch_get_sizes(h, &sizes) != 0 ||
      aoti_torch_get_strides(h, &strides) != 0 || aoti_torch_get_dtype(h, &d->dtype) != 0 ||
      aoti_torch_get_data_ptr(h, &data) != 0) {
    return fail(SHIMKIT_E_RUN, "output " + std::to_string(index) + ": " + shim_error());
  }
  if (ndim > SHIMKIT_MAX_DIMS) {
    return fail(SHIMKIT_E_RUN, "output " + std::to_string(index) + ": " + std::to_string(ndim) +
                                   " dimensions (at most " + std::to_string(SHIMKIT_MAX_DIMS) +
                                   ")");
  }
  d->data = data;
  d->ndim = static_cast<int32_t>(ndim);
  for (int64_t k = 0; k < ndim; ++k) {
    d->sizes[k] = sizes[k];
    d->strides[k] = strides[k];
  }
  return SHIMKIT_OK;
}

// One run of the blob on `stream` with device inputs (taken by the blob);
// outputs land in `outs`.
int run_blob(shimkit_cuda_model* m, Handles* inputs, Handles* outs, void* stream) {
  return m->blob.run(inputs->h.data(), inputs->h.size(), outs->h.data(), outs->h.size(), stream);
}

// Sizes, strides and dtype of a tensor: what a captured graph's inputs must keep.
std::vector<int64_t> geometry(AtenTensorHandle h) {
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  int32_t dtype = 0;
  aoti_torch_get_dim(h, &ndim);
  aoti_torch_get_sizes(h, &sizes);
  aoti_torch_get_strides(h, &strides);
  aoti_torch_get_dtype(h, &dtype);
  std::vector<int64_t> g = {dtype, ndim};
  for (int64_t i = 0; i < ndim; ++i) g.insert(g.end(), {sizes[i], strides[i]});
  return g;
}

// Makes the model's stream current on its device for the calling thread.
struct ModelStream {
  CUDAStreamGuardHandle guard = nullptr;
  explicit ModelStream(shimkit_cuda_model* m) {
    aoti_torch_create_cuda_stream_guard(m->stream, m->device, &guard);
  }
  ~ModelStream() {
    if (guard != nullptr) aoti_torch_delete_cuda_stream_guard(guard);
  }
};

// New handles aliasing `from` (the blob steals the handles it is given).
int aliases(const std::vector<AtenTensorHandle>& from, Handles* to) {
  for (size_t i = 0; i < from.size(); ++i) {
    if (aoti_torch_new_tensor_handle(from[i], &to->h[i]) != 0) {
      return fail(SHIMKIT_E_RUN, "graph: " + shim_error());
    }
  }
  return SHIMKIT_OK;
}

// Gives up on replay for this model (the reason stays in its status); runs
// stay correct, eagerly on the model's stream.
void give_up_graphs(shimkit_cuda_model* m, const std::string& why) {
  m->release_graph();
  m->graph_state = -1;
  m->graph_status = "eager: " + why;
}

// "replaying", with the number of host steps and their ops when the graph has
// any: "replaying, 2 host steps (topk, histc)".
std::string replaying_status(const shimkit_cuda_model& m) {
  if (m.host_steps == 0) return "replaying";
  return "replaying, " + std::to_string(m.host_steps) + " host step" +
         (m.host_steps == 1 ? "" : "s") + " (" + m.host_step_names + ")";
}

// Launches the captured graph; the outputs alias its output buffers.
int launch(shimkit_cuda_model* m, Handles* outs) {
  if (shimkit_cuda_graph_launch(m->exec, m->pool, m->stream) != 0) {
    return fail(SHIMKIT_E_RUN, "graph launch: " + shim_error());
  }
  return aliases(m->static_out, outs);
}

// After a replay's synchronisation: a host step that failed (host functions
// cannot fail the stream) fails the run, and the model runs eagerly from
// then on, with the reason in its status.
int check_host_steps(shimkit_cuda_model* m) {
  if (m->host_steps == 0 || shimkit_cuda_graph_check(m->pool) == 0) return SHIMKIT_OK;
  const std::string why = shim_error();
  give_up_graphs(m, "replay: " + why);
  return fail(SHIMKIT_E_RUN, "graph replay: " + why);
}

std::string microseconds(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f us", us);
  return text;
}

// Runs after the capture of a graph with host steps. Each replay then waits
// for the driver's callback thread at every host step, which can cost more
// than the eager run's synchronisations (docs/cuda.md). So the first
// kChoiceRuns runs alternate replay and eager, each timed from an idle stream
// to its end, and the model keeps replaying only when its best replay is no
// slower than its best eager run; otherwise it runs eagerly, and its status
// gives both times.
constexpr int kChoiceRuns = 4;

int run_to_choose(shimkit_cuda_model* m, Handles* call_in, Handles* outs) {
  const bool replay = m->choice_runs % 2 == 0;  // the capture's own run is a replay
  if (shimkit_cuda_stream_synchronize(m->stream) != 0) {
    return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
  }
  const auto start = std::chrono::steady_clock::now();
  int rc = replay ? launch(m, outs) : run_blob(m, call_in, outs, m->stream);
  if (rc != SHIMKIT_OK) return rc;
  if (shimkit_cuda_stream_synchronize(m->stream) != 0) {
    return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (replay && (rc = check_host_steps(m)) != SHIMKIT_OK) return rc;
  double& best = replay ? m->best_replay_us : m->best_eager_us;
  if (best < 0 || us < best) best = us;
  if (++m->choice_runs < kChoiceRuns) return SHIMKIT_OK;
  if (m->best_replay_us > m->best_eager_us) {
    give_up_graphs(m, "replay with " + std::to_string(m->host_steps) + " host step(s) (" +
                          m->host_step_names + ") took " + microseconds(m->best_replay_us) +
                          ", an eager run " + microseconds(m->best_eager_us));
  } else {
    m->graph_state = 2;
    m->graph_status = replaying_status(*m);
  }
  return SHIMKIT_OK;
}

// The replay mode. The first run is eager (cuBLASLt timing, cuDNN plans and
// workspaces happen there); the second is captured into a CUDA graph with a
// private allocation pool and launched; later runs copy their inputs into the
// captured input buffers (device to device, on the model's stream) and
// launch the graph once. Outputs alias the captured output buffers: the next
// run overwrites them (run() copies them to host first). Inputs of another
// geometry than the captured ones run eagerly. A graph with host steps is
// first timed against eager runs (run_to_choose).
int run_graph(shimkit_cuda_model* m, Handles* inputs, Handles* outs) {
  ModelStream current(m);
  if (m->graph_state < 0) return run_blob(m, inputs, outs, m->stream);
  std::vector<std::vector<int64_t>> shapes;
  for (AtenTensorHandle h : inputs->h) shapes.push_back(geometry(h));
  if (m->static_in.empty()) {
    m->input_geometry = shapes;
    for (size_t i = 0; i < inputs->h.size(); ++i) {
      AtenTensorHandle copy = nullptr;
      if (aoti_torch_clone_preserve_strides(inputs->h[i], &copy) != 0) {
        give_up_graphs(m, "input buffer: " + shim_error());
        return run_blob(m, inputs, outs, m->stream);
      }
      m->static_in.push_back(copy);
    }
  } else if (shapes != m->input_geometry) {
    return run_blob(m, inputs, outs, m->stream);  // not what was captured
  } else {
    for (size_t i = 0; i < inputs->h.size(); ++i) {
      if (aoti_torch_copy_(m->static_in[i], inputs->h[i], 0) != 0) {
        return fail(SHIMKIT_E_RUN, "graph: input " + std::to_string(i) + ": " + shim_error());
      }
    }
  }
  Handles own(0);
  own.h.swap(inputs->h);  // the caller's inputs are consumed, as run_blob would
  Handles call_in(m->num_inputs());
  int rc = aliases(m->static_in, &call_in);
  if (rc != SHIMKIT_OK) return rc;
  if (m->graph_state == 0) {
    rc = run_blob(m, &call_in, outs, m->stream);
    if (rc == SHIMKIT_OK) {
      m->graph_state = 1;
      m->graph_status = "warmed up";
    }
    return rc;
  }
  if (m->graph_state == 1) {
    if (!m->blob.runs_single_threaded()) {
      give_up_graphs(m,
                     "capture: the blob has no AOTInductorModelContainerRunSingleThreaded (an "
                     "older torch's): after a capture its Run fails on the event it recorded "
                     "while captured, so it runs eagerly");
      return run_blob(m, &call_in, outs, m->stream);
    }
    if (shimkit_cuda_stream_synchronize(m->stream) != 0 ||
        shimkit_cuda_graph_begin(m->stream, &m->pool) != 0) {
      give_up_graphs(m, "capture: " + shim_error());
      return run_blob(m, &call_in, outs, m->stream);
    }
    Handles captured(m->num_outputs());
    const int run_rc = run_blob(m, &call_in, &captured, m->stream);
    const std::string run_error = run_rc != SHIMKIT_OK ? ld::last_error() : "";
    void* exec = nullptr;
    const int end_rc = shimkit_cuda_graph_end(m->stream, &exec);
    if (run_rc != 0 || end_rc != 0) {
      m->exec = exec;
      give_up_graphs(m,
                     run_rc != 0 ? "run under capture: " + run_error : "capture: " + shim_error());
      return run_blob(m, &own, outs, m->stream);  // the caller's inputs, eagerly
    }
    m->exec = exec;
    m->static_out.assign(captured.h.begin(), captured.h.end());
    std::fill(captured.h.begin(), captured.h.end(), nullptr);
    m->host_steps = shimkit_cuda_graph_host_steps(m->pool);
    std::string names(static_cast<size_t>(shimkit_cuda_graph_host_step_names(m->pool, nullptr, 0)),
                      '\0');
    shimkit_cuda_graph_host_step_names(m->pool, names.data(), names.size() + 1);
    m->host_step_names = names;
    m->graph_state = m->host_steps == 0 ? 2 : 3;
    m->graph_status = replaying_status(*m);
    if (m->graph_state == 3) m->graph_status += "; timing replay against eager";
  }
  if (m->graph_state == 3) return run_to_choose(m, &call_in, outs);
  return launch(m, outs);
}

// Runs with device inputs (stolen); outputs land in `outs`. Eager on the
// legacy default stream, or replayed (run_graph).
int run_device(shimkit_cuda_model* m, Handles* inputs, Handles* outs) {
  return m->graphs ? run_graph(m, inputs, outs) : run_blob(m, inputs, outs, nullptr);
}

// Waits for the model's work (its own stream in replay mode), and checks the
// host steps of a replay.
int sync_model(shimkit_cuda_model* m) {
  const int rc =
      m->graphs ? shimkit_cuda_stream_synchronize(m->stream) : shimkit_cuda_synchronize(m->device);
  if (rc != 0) return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
  return m->graph_state == 2 ? check_host_steps(m) : SHIMKIT_OK;
}

// Copies device output `h` into host memory the model owns until the next run.
int download(shimkit_cuda_model* m, AtenTensorHandle h, size_t index, shimkit_tensor* d) {
  size_t bytes = 0;
  int rc = ld::describe_contiguous(h, d, &bytes);
  if (rc != SHIMKIT_OK) return rc;
  std::vector<char>& buffer = m->host_outputs[index];
  buffer.assign(bytes + 1, 0);
  d->data = buffer.data();
  rc = ld::copy_to_host(h, d);
  if (rc != SHIMKIT_OK) ld::prefix_last_error(("output " + std::to_string(index)).c_str());
  return rc;
}

// A run's model and output arguments (`outputs_given`: its output arrays are
// not null).
int check_run_arguments(const shimkit_cuda_model* model, bool outputs_given, size_t num_outputs) {
  if (model == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null model");
  if (!outputs_given || num_outputs != model->num_outputs()) {
    return fail(SHIMKIT_E_BAD_INPUT, "model has " + std::to_string(model->num_outputs()) +
                                         " outputs, caller expects " + std::to_string(num_outputs));
  }
  return SHIMKIT_OK;
}

}  // namespace

extern "C" {

const char* shimkit_cuda_last_error(void) { return ld::last_error().c_str(); }

const char* shimkit_cuda_provider_path(void) {
  const ld::Provider& p = ld::provider();
  return p.handle ? p.path.c_str() : nullptr;
}

int shimkit_cuda_model_load(const void* bytes, size_t size, int32_t device_index,
                            shimkit_cuda_model** out) {
  try {
    return load(bytes, size, nullptr, device_index, out);
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string("load failed: ") + e.what());
  }
}

int shimkit_cuda_model_load_file(const char* path, int32_t device_index, shimkit_cuda_model** out) {
  if (path == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null path");
  try {
    const int rc = load(nullptr, 0, path, device_index, out);
    // Reading errors name the path already.
    if (rc != SHIMKIT_OK && rc != SHIMKIT_E_IO) ld::prefix_last_error(path);
    return rc;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_IO, std::string(path) + ": " + e.what());
  }
}

void shimkit_cuda_model_free(shimkit_cuda_model* model) { delete model; }

int shimkit_cuda_model_use_graphs(shimkit_cuda_model* model, int enable) {
  if (model == nullptr) return fail(SHIMKIT_E_BAD_INPUT, "null model");
  std::lock_guard<std::mutex> lock(model->mutex);
  if (!enable) {
    if (model->stream != nullptr) shimkit_cuda_stream_synchronize(model->stream);
    model->release_graph();
    model->graphs = false;
    model->graph_state = 0;
    model->graph_status = "off";
    return SHIMKIT_OK;
  }
  if (model->graphs) return SHIMKIT_OK;
  if (model->stream == nullptr && shimkit_cuda_stream_create(model->device, &model->stream) != 0) {
    model->graph_status = "eager: " + shim_error();
    return fail(SHIMKIT_E_DEVICE, "CUDA graphs unavailable: " + shim_error());
  }
  model->graphs = true;
  model->graph_state = 0;
  model->graph_status = "cold";
  return SHIMKIT_OK;
}

const char* shimkit_cuda_model_graph_status(const shimkit_cuda_model* model) {
  return model != nullptr ? model->graph_status.c_str() : "no model";
}

size_t shimkit_cuda_model_num_inputs(const shimkit_cuda_model* model) {
  return model ? model->num_inputs() : 0;
}

size_t shimkit_cuda_model_num_outputs(const shimkit_cuda_model* model) {
  return model ? model->num_outputs() : 0;
}

uintptr_t shimkit_cuda_model_load_base(const shimkit_cuda_model* model) {
  return model ? model->blob.load_base() : 0;
}

int shimkit_cuda_model_run(shimkit_cuda_model* model, const shimkit_tensor* inputs,
                           size_t num_inputs, shimkit_tensor* outputs, size_t num_outputs) {
  const int checked = check_run_arguments(model, outputs != nullptr, num_outputs);
  if (checked != SHIMKIT_OK) return checked;
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    Handles dev(model->num_inputs());
    int rc = upload_inputs(*model, inputs, num_inputs, &dev);
    if (rc != SHIMKIT_OK) return rc;
    Handles outs(model->num_outputs());
    rc = run_device(model, &dev, &outs);
    if (rc != SHIMKIT_OK) return rc;
    rc = sync_model(model);
    if (rc != SHIMKIT_OK) return rc;
    model->host_outputs.resize(model->num_outputs());
    for (size_t i = 0; i < model->num_outputs(); ++i) {
      rc = download(model, outs.h[i], i, &outputs[i]);
      if (rc != SHIMKIT_OK) return rc;
    }
    return SHIMKIT_OK;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("model run failed: ") + e.what());
  }
}

int shimkit_cuda_model_run_device(shimkit_cuda_model* model, const shimkit_tensor* inputs,
                                  size_t num_inputs, shimkit_tensor* outputs, void** owners,
                                  size_t num_outputs) {
  const int checked =
      check_run_arguments(model, outputs != nullptr && owners != nullptr, num_outputs);
  if (checked != SHIMKIT_OK) return checked;
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    Handles dev(model->num_inputs());
    int rc = ld::wrap_inputs(inputs, num_inputs, model->num_inputs(), &dev,
                             aoti_torch_device_type_cuda(), model->device);
    if (rc != SHIMKIT_OK) return rc;
    // Replay copies the inputs on the model's own (non-blocking) stream: the
    // producers' work on the default stream must be done first. An eager run
    // is on the legacy default stream, after it.
    if (model->graphs && shimkit_cuda_stream_synchronize(nullptr) != 0) {
      return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
    }
    Handles outs(model->num_outputs());
    rc = run_device(model, &dev, &outs);
    if (rc != SHIMKIT_OK) return rc;
    rc = sync_model(model);
    if (rc != SHIMKIT_OK) return rc;
    if (model->graphs) {
      // The outputs alias the graph's buffers: hand out copies, allocated
      // for the legacy default stream like an eager run's outputs.
      for (AtenTensorHandle& h : outs.h) {
        AtenTensorHandle copy = nullptr;
        if (aoti_torch_clone(h, &copy) != 0) {
          return fail(SHIMKIT_E_RUN, "output copy: " + shim_error());
        }
        aoti_torch_delete_tensor_object(h);
        h = copy;
      }
      if (shimkit_cuda_stream_synchronize(nullptr) != 0) {
        return fail(SHIMKIT_E_RUN, "synchronize failed: " + shim_error());
      }
    }
    for (size_t i = 0; i < model->num_outputs(); ++i) {
      rc = describe_device(outs.h[i], i, &outputs[i]);
      if (rc != SHIMKIT_OK) return rc;
    }
    for (size_t i = 0; i < model->num_outputs(); ++i) {
      owners[i] = outs.h[i];
      outs.h[i] = nullptr;
    }
    return SHIMKIT_OK;
  } catch (const std::exception& e) {
    return fail(SHIMKIT_E_RUN, std::string("model run failed: ") + e.what());
  }
}

void shimkit_cuda_tensor_free(void* owner) {
  if (owner != nullptr) aoti_torch_delete_tensor_object(static_cast<AtenTensorHandle>(owner));
}

int shimkit_cuda_model_bench(shimkit_cuda_model* model, const shimkit_tensor* inputs,
                             size_t num_inputs, int64_t iterations, double* ns_per_run) {
  if (model == nullptr || ns_per_run == nullptr || iterations <= 0) {
    return fail(SHIMKIT_E_BAD_INPUT, "bad bench arguments");
  }
  try {
    std::lock_guard<std::mutex> lock(model->mutex);
    Handles resident(model->num_inputs());
    int rc = upload_inputs(*model, inputs, num_inputs, &resident);
    if (rc != SHIMKIT_OK) return rc;
    rc = sync_model(model);
    if (rc != SHIMKIT_OK) return rc;
    // SHIMKIT_BENCH_SYNC=end: synchronise once after the loop instead of after
    // every run, so the figure is the host's issue cost when it is the
    // bottleneck (the breakdown in tools/gpu/step_breakdown.py).
    const char* sync_mode = std::getenv("SHIMKIT_BENCH_SYNC");
    const bool sync_each = sync_mode == nullptr || std::string(sync_mode) != "end";
    const auto start = std::chrono::steady_clock::now();
    for (int64_t it = 0; it < iterations; ++it) {
      Handles in(model->num_inputs());
      for (size_t i = 0; i < model->num_inputs(); ++i) {
        if (aoti_torch_new_tensor_handle(resident.h[i], &in.h[i]) != 0) {
          return fail(SHIMKIT_E_RUN, shim_error());
        }
      }
      Handles outs(model->num_outputs());
      rc = run_device(model, &in, &outs);
      if (rc != SHIMKIT_OK) return rc;
      if (sync_each || it + 1 == iterations) {
        rc = sync_model(model);
        if (rc != SHIMKIT_OK) return rc;
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
