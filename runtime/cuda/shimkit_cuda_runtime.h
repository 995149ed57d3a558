/* shimkit's CUDA blob runner: load a prefixed AOTInductor CUDA blob against
 * the slim CUDA shims (shims/cuda) and run it on a GPU, next to anything
 * (libtorch_cuda included). Plain C API; no C++ exception crosses it.
 * Functions return SHIMKIT_OK (0) or a shimkit_status code (see
 * runtime/shimkit_runtime.h; SHIMKIT_E_DEVICE is added here), and
 * shimkit_cuda_last_error() says what went wrong (per thread). */
#ifndef SHIMKIT_RUNTIME_CUDA_SHIMKIT_CUDA_RUNTIME_H_
#define SHIMKIT_RUNTIME_CUDA_SHIMKIT_CUDA_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#include "runtime/shimkit_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No usable GPU/driver, device index out of range, or a blob built for
 * another device than the one asked for. */
#define SHIMKIT_E_DEVICE 10

typedef struct shimkit_cuda_model shimkit_cuda_model;

SHIMKIT_RUNTIME_API const char* shimkit_cuda_last_error(void);

/* Path of the slim CUDA shim library every blob must bind to (NULL if it
 * could not be made global; shimkit_cuda_last_error() is not set then). */
SHIMKIT_RUNTIME_API const char* shimkit_cuda_provider_path(void);

/* Loads a model .so (bytes or file) and creates its model container on CUDA
 * device `device_index`. The blob is vetted before dlopen: ELF sanity,
 * entry points, every shim import prefixed and provided by the slim CUDA
 * shims, and built for CUDA. */
SHIMKIT_RUNTIME_API int shimkit_cuda_model_load(const void* bytes, size_t size,
                                                int32_t device_index, shimkit_cuda_model** out);
SHIMKIT_RUNTIME_API int shimkit_cuda_model_load_file(const char* path, int32_t device_index,
                                                     shimkit_cuda_model** out);
SHIMKIT_RUNTIME_API void shimkit_cuda_model_free(shimkit_cuda_model* model);
SHIMKIT_RUNTIME_API size_t shimkit_cuda_model_num_inputs(const shimkit_cuda_model* model);
SHIMKIT_RUNTIME_API size_t shimkit_cuda_model_num_outputs(const shimkit_cuda_model* model);
/* Load address of the blob (for reading its resolved GOT entries). */
SHIMKIT_RUNTIME_API uintptr_t shimkit_cuda_model_load_base(const shimkit_cuda_model* model);

/* Copies host `inputs` to the device, runs, and copies every output back to
 * host memory the model owns (C-contiguous) until the next run or free;
 * `outputs` receives num_outputs descriptors of that memory. */
SHIMKIT_RUNTIME_API int shimkit_cuda_model_run(shimkit_cuda_model* model,
                                               const shimkit_tensor* inputs, size_t num_inputs,
                                               shimkit_tensor* outputs, size_t num_outputs);

/* Runs with inputs and outputs on the device, no host copy: inputs[i].data
 * are pointers into memory of the model's GPU, read in place (the caller
 * keeps them valid for the call; work that produces them must be finished or
 * queued on the legacy default stream, which the run waits for). Returns
 * once the outputs are computed: outputs[i] describes device memory that
 * owners[i] owns (freed by shimkit_cuda_tensor_free, from any thread, once
 * no queued work reads it: the memory goes back to the shims' cache for the
 * legacy default stream). With graph replay the outputs are copies: the
 * graph's own buffers are overwritten by the next replay. */
SHIMKIT_RUNTIME_API int shimkit_cuda_model_run_device(shimkit_cuda_model* model,
                                                      const shimkit_tensor* inputs,
                                                      size_t num_inputs, shimkit_tensor* outputs,
                                                      void** owners, size_t num_outputs);
/* Frees an output of shimkit_cuda_model_run_device (NULL: nothing). */
SHIMKIT_RUNTIME_API void shimkit_cuda_tensor_free(void* owner);
/* *managed_out: a DLPack DLManagedTensor (runtime/cuda/dlpack.h: version
 * 0.8, device kDLCUDA) sharing the memory of output `owner` through a handle
 * of its own: `owner` stays the caller's, and the memory goes back once both
 * are freed. Whoever ends up holding it calls its deleter (from any thread). */
SHIMKIT_RUNTIME_API int shimkit_cuda_tensor_dlpack(void* owner, void** managed_out);

/* Uploads `inputs` once, then runs `iterations` times with device-resident
 * inputs, waiting for the stream after every run (what a host-overhead
 * comparison needs); mean wall time per run in ns. */
SHIMKIT_RUNTIME_API int shimkit_cuda_model_bench(shimkit_cuda_model* model,
                                                 const shimkit_tensor* inputs, size_t num_inputs,
                                                 int64_t iterations, double* ns_per_run);

/* CUDA-graph replay (enable != 0; also SHIMKIT_CUDA_GRAPHS=1 at load): the
 * model gets a stream of its own; its first run is eager, the second is
 * captured into a CUDA graph (device memory from a private pool) and every
 * later run with inputs of the same geometry copies them into the captured
 * buffers and replays the graph with one launch. Inputs of another geometry
 * run eagerly; if capture fails, the model stays eager and the status says
 * why. A graph with host steps (host fallbacks: docs/cuda.md) is timed
 * against eager runs over the next runs and kept only if replay is no
 * slower. enable == 0 frees the graph. */
SHIMKIT_RUNTIME_API int shimkit_cuda_model_use_graphs(shimkit_cuda_model* model, int enable);
/* "off", "cold", "warmed up", "replaying" ("replaying, N host steps (their
 * ops)", with "; timing replay against eager" while it is timed), or "eager:
 * <why replay was given up>". */
SHIMKIT_RUNTIME_API const char* shimkit_cuda_model_graph_status(const shimkit_cuda_model* model);

/* Host-to-device copy bandwidth in GB/s of `bytes` through the shims:
 * source from aoti_torch_empty_strided_pinned (pinned != 0) or
 * aoti_torch_empty_strided on the CPU (pageable), best of `iterations`. */
SHIMKIT_RUNTIME_API int shimkit_cuda_h2d_bandwidth(size_t bytes, int pinned, int32_t device_index,
                                                   int iterations, double* gb_per_s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHIMKIT_RUNTIME_CUDA_SHIMKIT_CUDA_RUNTIME_H_ */
