// CUDA streams and graphs for hosts of the slim CUDA shims (the runner's
// replay mode): a blob's run captured once on a stream of the host's, with a
// private allocation pool, then replayed with one launch. Not torch's ABI:
// shimkit_* names, declared in aoti_shim_cuda_abi.h.
#include <algorithm>
#include <cstring>
#include <string>

#include "shims/cuda/aoti_shim_cuda_abi.h"
#include "shims/cuda/cuda_context.h"
#include "shims/cuda/host_fallback.h"
#include "shims/shim_internal.h"

namespace cu = shimkit::cuda;
using shimkit::ShimError;

namespace {

const cu::Runtime& graph_runtime() {
  const cu::Runtime& rt = cu::require_runtime();
  if (!rt.graphs_error.empty()) throw ShimError(rt.graphs_error);
  return rt;
}

}  // namespace

extern "C" {

AOTITorchError shimkit_cuda_stream_create(int32_t device_index, void** stream) {
  return SHIMKIT_GUARD({
    if (stream == nullptr) throw ShimError("null stream pointer");
    const cu::Runtime& rt = graph_runtime();
    const int32_t previous = cu::current_device();
    cu::set_current_device(device_index);
    const cu::Error err = rt.stream_create(stream, cu::kStreamNonBlocking);
    cu::set_current_device(previous);
    cu::check(err, "cudaStreamCreateWithFlags");
  });
}

AOTITorchError shimkit_cuda_stream_destroy(void* stream) {
  return SHIMKIT_GUARD({
    if (stream == nullptr) return;
    cu::check(graph_runtime().stream_destroy(stream), "cudaStreamDestroy");
  });
}

AOTITorchError shimkit_cuda_stream_synchronize(void* stream) {
  return SHIMKIT_GUARD(
      { cu::check(cu::require_runtime().stream_synchronize(stream), "cudaStreamSynchronize"); });
}

AOTITorchError shimkit_cuda_graph_begin(void* stream, uint64_t* pool) {
  return SHIMKIT_GUARD({
    if (stream == nullptr || pool == nullptr) {
      throw ShimError("capture needs a stream of the host's and a pool pointer");
    }
    const cu::Runtime& rt = graph_runtime();
    // Relaxed: a cache miss may still cudaMalloc while capturing.
    cu::check(rt.begin_capture(stream, cu::kCaptureModeRelaxed), "cudaStreamBeginCapture");
    *pool = cu::begin_private_pool();
  });
}

AOTITorchError shimkit_cuda_graph_end(void* stream, void** exec) {
  cu::end_private_pool();
  return SHIMKIT_GUARD({
    if (exec == nullptr) throw ShimError("null graph pointer");
    *exec = nullptr;
    const cu::Runtime& rt = graph_runtime();
    void* graph = nullptr;
    cu::check(rt.end_capture(stream, &graph), "cudaStreamEndCapture");
    if (graph == nullptr) throw ShimError("cudaStreamEndCapture gave no graph");
    const cu::Error err = rt.graph_instantiate(exec, graph, 0);
    rt.graph_destroy(graph);  // the executable graph keeps what it needs
    if (err != cu::kSuccess) *exec = nullptr;
    cu::check(err, "cudaGraphInstantiate");
  });
}

AOTITorchError shimkit_cuda_graph_launch(void* exec, uint64_t pool, void* stream) {
  return SHIMKIT_GUARD({
    if (exec == nullptr) throw ShimError("null graph");
    const cu::Runtime& rt = graph_runtime();
    cu::draw_for_launch(pool, stream);
    cu::check(rt.graph_launch(exec, stream), "cudaGraphLaunch");
  });
}

int64_t shimkit_cuda_graph_host_steps(uint64_t pool) {
  return static_cast<int64_t>(cu::host_steps(pool));
}

int64_t shimkit_cuda_graph_host_step_names(uint64_t pool, char* buffer, int64_t size) {
  const std::string names = cu::host_step_names(pool);
  if (buffer != nullptr && size > 0) {
    const size_t kept = std::min(names.size(), static_cast<size_t>(size - 1));
    std::memcpy(buffer, names.data(), kept);
    buffer[kept] = '\0';
  }
  return static_cast<int64_t>(names.size());
}

AOTITorchError shimkit_cuda_graph_check(uint64_t pool) {
  return SHIMKIT_GUARD({
    const std::string error = cu::take_replay_error(pool);
    if (!error.empty()) throw ShimError("host step of a replay failed: " + error);
  });
}

AOTITorchError shimkit_cuda_graph_free(void* exec, uint64_t pool, void* stream) {
  return SHIMKIT_GUARD({
    const cu::Runtime& rt = cu::require_runtime();
    if (stream != nullptr) rt.stream_synchronize(stream);  // no replay may still run
    if (exec != nullptr && rt.graph_exec_destroy != nullptr) rt.graph_exec_destroy(exec);
    cu::release_host_steps(pool);
    cu::release_private_pool(pool);
  });
}

}  // extern "C"
