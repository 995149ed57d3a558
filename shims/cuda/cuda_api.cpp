#include "shims/cuda/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "shims/slim_tensor.h"

namespace shimkit {
namespace cuda {

void* open_library(const char* what, const char* env, const std::vector<const char*>& names,
                   bool may_be_off, std::string* found, std::string* error) {
  std::vector<std::string> candidates;
  if (const char* explicit_path = std::getenv(env)) {
    if (may_be_off && std::strcmp(explicit_path, "0") == 0) {
      *error = std::string(what) + " turned off (" + env + "=0)";
      return nullptr;
    }
    if (explicit_path[0] != '\0') candidates.emplace_back(explicit_path);
  }
  for (const char* n : names) candidates.emplace_back(n);
  std::string tried;
  for (const std::string& c : candidates) {
    dlerror();
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *found = c;
      return h;
    }
    if (!tried.empty()) tried += ", ";
    tried += c;
  }
  *error =
      std::string(what) + " not found (tried " + tried + "; set " + env + " or LD_LIBRARY_PATH)";
  return nullptr;
}

void* lookup_symbol(void* library, const char* name) { return dlsym(library, name); }

namespace {

Runtime load_runtime() {
  Runtime rt;
  void* lib = open_library("CUDA runtime", "SHIMKIT_CUDART",
                           {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}, false,
                           &rt.library, &rt.error);
  if (lib == nullptr) {
    rt.error += ": no CUDA on this machine";
    return rt;
  }
  std::string missing;
  bind(lib, "cudaGetDeviceCount", &rt.get_device_count, &missing);
  bind(lib, "cudaGetDevice", &rt.get_device, &missing);
  bind(lib, "cudaSetDevice", &rt.set_device, &missing);
  bind(lib, "cudaMalloc", &rt.malloc, &missing);
  bind(lib, "cudaFree", &rt.free, &missing);
  bind(lib, "cudaHostAlloc", &rt.host_alloc, &missing);
  bind(lib, "cudaFreeHost", &rt.free_host, &missing);
  bind(lib, "cudaMemcpyAsync", &rt.memcpy_async, &missing);
  bind(lib, "cudaMemsetAsync", &rt.memset_async, &missing);
  bind(lib, "cudaStreamSynchronize", &rt.stream_synchronize, &missing);
  bind(lib, "cudaDeviceSynchronize", &rt.device_synchronize, &missing);
  bind(lib, "cudaGetErrorString", &rt.get_error_string, &missing);
  bind(lib, "cudaDriverGetVersion", &rt.driver_get_version, &missing);
  if (!missing.empty()) {
    rt.error = rt.library + ": missing " + missing + " (not a CUDA runtime library?)";
    return rt;
  }
  std::string no_graphs;
  bind(lib, "cudaStreamCreateWithFlags", &rt.stream_create, &no_graphs);
  bind(lib, "cudaStreamDestroy", &rt.stream_destroy, &no_graphs);
  bind(lib, "cudaStreamBeginCapture", &rt.begin_capture, &no_graphs);
  bind(lib, "cudaStreamEndCapture", &rt.end_capture, &no_graphs);
  bind(lib, "cudaGraphInstantiate", &rt.graph_instantiate, &no_graphs);
  bind(lib, "cudaGraphLaunch", &rt.graph_launch, &no_graphs);
  bind(lib, "cudaGraphExecDestroy", &rt.graph_exec_destroy, &no_graphs);
  bind(lib, "cudaGraphDestroy", &rt.graph_destroy, &no_graphs);
  if (!no_graphs.empty())
    rt.graphs_error = rt.library + ": no CUDA graphs (missing " + no_graphs + ")";
  std::string no_timing;
  bind(lib, "cudaEventCreate", &rt.event_create, &no_timing);
  bind(lib, "cudaEventRecord", &rt.event_record, &no_timing);
  bind(lib, "cudaEventElapsedTime", &rt.event_elapsed_time, &no_timing);
  bind(lib, "cudaEventDestroy", &rt.event_destroy, &no_timing);
  bind(lib, "cudaLaunchHostFunc", &rt.launch_host_func, &no_timing);
  if (!no_timing.empty())
    rt.timing_error = rt.library + ": no device timing (missing " + no_timing + ")";
  int count = 0;
  const Error err = rt.get_device_count(&count);
  if (err != kSuccess || count <= 0) {
    rt.error = std::string("no usable CUDA device (") + rt.library + ": cudaGetDeviceCount: " +
               (err != kSuccess ? rt.get_error_string(err) : "0 devices") + ")";
    return rt;
  }
  rt.device_count = count;
  rt.ok = true;
  return rt;
}

BlasLibrary load_blas() {
  BlasLibrary b;
  void* lib = open_library("cuBLAS", "SHIMKIT_CUBLAS",
                           {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, false,
                           &b.library, &b.error);
  if (lib == nullptr) return b;
  std::string missing;
  bind(lib, "cublasCreate_v2", &b.create, &missing);
  bind(lib, "cublasDestroy_v2", &b.destroy, &missing);
  bind(lib, "cublasSetStream_v2", &b.set_stream, &missing);
  b.set_workspace =
      reinterpret_cast<Cublas::SetWorkspace>(lookup_symbol(lib, "cublasSetWorkspace_v2"));
  bind(lib, "cublasSetMathMode", &b.set_math_mode, &missing);
  bind(lib, "cublasSgemm_v2", &b.sgemm, &missing);
  bind(lib, "cublasSgemmStridedBatched", &b.sgemm_strided_batched, &missing);
  if (!missing.empty()) {
    b.error = b.library + ": missing " + missing + " (not cuBLAS?)";
    return b;
  }
  b.ok = true;
  return b;
}

}  // namespace

const Runtime& runtime() {
  static const Runtime rt = load_runtime();
  return rt;
}

const BlasLibrary& blas_library() {
  static const BlasLibrary b = load_blas();
  return b;
}

const Runtime& require_runtime() {
  const Runtime& rt = runtime();
  if (!rt.ok) throw ShimError(rt.error);
  return rt;
}

void check(Error err, const char* what) {
  if (err == kSuccess) return;
  const Runtime& rt = runtime();
  const char* text = rt.get_error_string != nullptr ? rt.get_error_string(err) : "?";
  throw ShimError(std::string(what) + ": " + text + " (CUDA error " + std::to_string(err) + ")");
}

void check_device_index(int32_t device_index) {
  const Runtime& rt = require_runtime();
  if (device_index < 0 || device_index >= rt.device_count) {
    throw ShimError("CUDA device index " + std::to_string(device_index) +
                    " out of range: " + std::to_string(rt.device_count) + " device(s) present");
  }
}

}  // namespace cuda
}  // namespace shimkit
