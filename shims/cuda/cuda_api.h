// The CUDA runtime and cuBLAS, loaded at run time with dlopen: the CUDA shim
// library has no link-time CUDA dependency, loads on machines without a GPU
// or driver (its CPU path keeps working), and reports a clear error the
// first time a CUDA tensor is asked for.
//
// The signatures are declared here from two type parameters so that a test
// can instantiate them with the official header types (cuda_runtime_api.h)
// and check, at compile time, that every declaration matches.
#ifndef SHIMKIT_SHIMS_CUDA_CUDA_API_H_
#define SHIMKIT_SHIMS_CUDA_CUDA_API_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace shimkit {
namespace cuda {

// `Err` is cudaError_t, `Stream` cudaStream_t, `Kind` cudaMemcpyKind, `Graph`
// cudaGraph_t, `GraphExec` cudaGraphExec_t, `CaptureMode` cudaStreamCaptureMode,
// `Event` cudaEvent_t, `HostFn` cudaHostFn_t.
template <typename Err, typename Stream, typename Kind, typename Graph, typename GraphExec,
          typename CaptureMode, typename Event, typename HostFn>
struct CudartSignatures {
  using GetDeviceCount = Err (*)(int*);
  using GetDevice = Err (*)(int*);
  using SetDevice = Err (*)(int);
  using Malloc = Err (*)(void**, size_t);
  using Free = Err (*)(void*);
  using HostAlloc = Err (*)(void**, size_t, unsigned int);
  using FreeHost = Err (*)(void*);
  using MemcpyAsync = Err (*)(void*, const void*, size_t, Kind, Stream);
  using MemsetAsync = Err (*)(void*, int, size_t, Stream);
  using StreamSynchronize = Err (*)(Stream);
  using DeviceSynchronize = Err (*)();
  using GetErrorString = const char* (*)(Err);
  using DriverGetVersion = Err (*)(int*);
  // CUDA graphs (the runner's replay mode); CUDA 12+ signatures.
  using StreamCreateWithFlags = Err (*)(Stream*, unsigned int);
  using StreamDestroy = Err (*)(Stream);
  using StreamBeginCapture = Err (*)(Stream, CaptureMode);
  using StreamEndCapture = Err (*)(Stream, Graph*);
  using GraphInstantiate = Err (*)(GraphExec*, Graph, unsigned long long);
  using GraphLaunch = Err (*)(GraphExec, Stream);
  using GraphExecDestroy = Err (*)(GraphExec);
  using GraphDestroy = Err (*)(Graph);
  // Device-side timing (autotune.h): events, and a host function that holds
  // a stream until the work to time is enqueued.
  using EventCreate = Err (*)(Event*);
  using EventRecord = Err (*)(Event, Stream);
  using EventElapsedTime = Err (*)(float*, Event, Event);
  using EventDestroy = Err (*)(Event);
  using LaunchHostFunc = Err (*)(Stream, HostFn, void*);
};

// `Status` is cublasStatus_t, `Handle` cublasHandle_t, `Op` cublasOperation_t,
// `Math` cublasMath_t.
template <typename Status, typename Handle, typename Stream, typename Op, typename Math>
struct CublasSignatures {
  using Create = Status (*)(Handle*);
  using Destroy = Status (*)(Handle);
  using SetStream = Status (*)(Handle, Stream);
  using SetWorkspace = Status (*)(Handle, void*, size_t);
  using SetMathMode = Status (*)(Handle, Math);
  using Sgemm = Status (*)(Handle, Op, Op, int, int, int, const float*, const float*, int,
                           const float*, int, const float*, float*, int);
  using SgemmStridedBatched = Status (*)(Handle, Op, Op, int, int, int, const float*, const float*,
                                         int, long long, const float*, int, long long, const float*,
                                         float*, int, long long, int);
};

// ABI-identical stand-ins for the official types: enums are int-sized,
// handles and streams are pointers.
using Error = int;
using Stream = void*;
constexpr int kSuccess = 0;
constexpr int kMemcpyDefault = 4;  // cudaMemcpyDefault (unified addressing)
constexpr int kMemcpyHostToDevice = 1;
constexpr int kMemcpyDeviceToHost = 2;
constexpr unsigned kHostAllocDefault = 0;  // cudaHostAllocDefault
constexpr int kOpN = 0;                    // CUBLAS_OP_N
constexpr int kOpT = 1;                    // CUBLAS_OP_T
constexpr int kMathDefault = 0;            // CUBLAS_DEFAULT_MATH
constexpr int kMathTf32 = 3;               // CUBLAS_TF32_TENSOR_OP_MATH

constexpr unsigned kStreamNonBlocking = 1;  // cudaStreamNonBlocking
constexpr int kCaptureModeRelaxed = 2;      // cudaStreamCaptureModeRelaxed

using HostFn = void (*)(void*);
using Cudart = CudartSignatures<Error, Stream, int, void*, void*, int, void*, HostFn>;
using Cublas = CublasSignatures<int, void*, Stream, int, int>;

// The loaded CUDA runtime. `ok` is false when no libcudart could be opened,
// a symbol is missing, or no device (or no driver) is present; `error` then
// says which.
struct Runtime {
  bool ok = false;
  std::string error;
  std::string library;  // the path dlopen found
  int device_count = 0;
  Cudart::GetDeviceCount get_device_count = nullptr;
  Cudart::GetDevice get_device = nullptr;
  Cudart::SetDevice set_device = nullptr;
  Cudart::Malloc malloc = nullptr;
  Cudart::Free free = nullptr;
  Cudart::HostAlloc host_alloc = nullptr;
  Cudart::FreeHost free_host = nullptr;
  Cudart::MemcpyAsync memcpy_async = nullptr;
  Cudart::MemsetAsync memset_async = nullptr;
  Cudart::StreamSynchronize stream_synchronize = nullptr;
  Cudart::DeviceSynchronize device_synchronize = nullptr;
  Cudart::GetErrorString get_error_string = nullptr;
  Cudart::DriverGetVersion driver_get_version = nullptr;
  // Optional: null when the runtime has no CUDA graphs (then graphs_error says so).
  Cudart::StreamCreateWithFlags stream_create = nullptr;
  Cudart::StreamDestroy stream_destroy = nullptr;
  Cudart::StreamBeginCapture begin_capture = nullptr;
  Cudart::StreamEndCapture end_capture = nullptr;
  Cudart::GraphInstantiate graph_instantiate = nullptr;
  Cudart::GraphLaunch graph_launch = nullptr;
  Cudart::GraphExecDestroy graph_exec_destroy = nullptr;
  Cudart::GraphDestroy graph_destroy = nullptr;
  std::string graphs_error;  // empty: all graph functions present
  // Optional: null when the runtime cannot time on the device (then
  // timing_error says so, and nothing is timed: autotune.h).
  Cudart::EventCreate event_create = nullptr;
  Cudart::EventRecord event_record = nullptr;
  Cudart::EventElapsedTime event_elapsed_time = nullptr;
  Cudart::EventDestroy event_destroy = nullptr;
  Cudart::LaunchHostFunc launch_host_func = nullptr;
  std::string timing_error;  // empty: all timing functions present
};

struct BlasLibrary {
  bool ok = false;
  std::string error;
  std::string library;
  Cublas::Create create = nullptr;
  Cublas::Destroy destroy = nullptr;
  Cublas::SetStream set_stream = nullptr;
  Cublas::SetWorkspace set_workspace = nullptr;  // cuBLAS 11.3+; optional
  Cublas::SetMathMode set_math_mode = nullptr;
  Cublas::Sgemm sgemm = nullptr;
  Cublas::SgemmStridedBatched sgemm_strided_batched = nullptr;
};

// Opens `what` (e.g. "cuDNN"): the path in the environment variable `env`
// if set, else the first of `names` that dlopen loads; `found` gets the one
// that loaded. nullptr, with `error` saying what was tried and how to point
// at the library, when none did, or (`may_be_off`) when `env` is "0".
void* open_library(const char* what, const char* env, const std::vector<const char*>& names,
                   bool may_be_off, std::string* found, std::string* error);
void* lookup_symbol(void* library, const char* name);

// Binds `*out` to `name` in `library`; the first missing name goes to
// `missing`.
template <typename Fn>
bool bind(void* library, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(lookup_symbol(library, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

// Loaded once per process (thread-safe); never throws.
const Runtime& runtime();
const BlasLibrary& blas_library();

// runtime(), or a ShimError with its error when CUDA is unusable.
const Runtime& require_runtime();
// Throws ShimError("<what>: <cuda error string>") unless `err` is success.
void check(Error err, const char* what);
// Validates a CUDA device index against the devices present.
void check_device_index(int32_t device_index);

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_CUDA_API_H_
