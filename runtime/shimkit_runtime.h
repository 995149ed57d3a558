/* shimkit's blob runtime: load a prefixed AOTInductor blob next to anything
 * (libtorch included) and run it on slim CPU tensors. Plain C API; no C++
 * exception ever crosses it. Functions return SHIMKIT_OK (0) or an error code;
 * shimkit_last_error() then describes the failure (per thread). */
#ifndef SHIMKIT_RUNTIME_SHIMKIT_RUNTIME_H_
#define SHIMKIT_RUNTIME_SHIMKIT_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define SHIMKIT_RUNTIME_API __attribute__((__visibility__("default")))
#else
#define SHIMKIT_RUNTIME_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SHIMKIT_MAX_DIMS 8

enum shimkit_status {
  SHIMKIT_OK = 0,
  SHIMKIT_E_BAD_BLOB = 1,      /* not a loadable ELF shared object for this machine */
  SHIMKIT_E_MISSING_SHIM = 2,  /* imports a shim nothing provides, or one bound elsewhere */
  SHIMKIT_E_MISSING_ENTRY = 3, /* a required AOTInductorModelContainer* entry point is absent */
  SHIMKIT_E_DLOPEN = 4,        /* the dynamic loader refused the blob */
  SHIMKIT_E_CREATE = 5,        /* the blob failed to create its model container */
  SHIMKIT_E_BAD_INPUT = 6,     /* wrong input count or malformed tensor descriptor */
  SHIMKIT_E_RUN = 7,           /* the blob or a shim failed during the run */
  SHIMKIT_E_IO = 8,            /* temp file or blob file could not be read/written */
  SHIMKIT_E_PROVIDER = 9       /* the shim provider library could not be made global */
};

/* A CPU tensor descriptor. Strides count elements. `dtype` uses torch's
 * ScalarType numbering (float32 = 6, int64 = 4, ...). Inputs are borrowed
 * for the call; outputs point into memory the model owns until the next run
 * or shimkit_model_free. */
typedef struct shimkit_tensor {
  void* data;
  int64_t sizes[SHIMKIT_MAX_DIMS];
  int64_t strides[SHIMKIT_MAX_DIMS];
  int32_t ndim;
  int32_t dtype;
} shimkit_tensor;

typedef struct shimkit_model shimkit_model;

/* Message for the last failure on this thread ("" if none). */
SHIMKIT_RUNTIME_API const char* shimkit_last_error(void);

/* Path of the shim provider library every blob must bind to. */
SHIMKIT_RUNTIME_API const char* shimkit_provider_path(void);

/* The private shim prefix this runtime and its provider serve (the prefix define
 * it was compiled with): a blob must import <prefix>aoti_torch_* names. */
SHIMKIT_RUNTIME_API const char* shimkit_runtime_prefix(void);

/* Checks blob bytes without loading them: ELF sanity, required entry points,
 * and that every unversioned import resolves, shim imports to the provider. */
SHIMKIT_RUNTIME_API int shimkit_check_blob(const void* bytes, size_t size);

/* Loads blob bytes (a model .so) and creates its CPU model container. */
SHIMKIT_RUNTIME_API int shimkit_model_load(const void* bytes, size_t size, shimkit_model** out);
SHIMKIT_RUNTIME_API int shimkit_model_load_file(const char* path, shimkit_model** out);
SHIMKIT_RUNTIME_API void shimkit_model_free(shimkit_model* model);

SHIMKIT_RUNTIME_API size_t shimkit_model_num_inputs(const shimkit_model* model);
SHIMKIT_RUNTIME_API size_t shimkit_model_num_outputs(const shimkit_model* model);
/* Load address of the blob (for reading its resolved GOT entries). */
SHIMKIT_RUNTIME_API uintptr_t shimkit_model_load_base(const shimkit_model* model);
/* Input name `index` if the blob exports GetInputName, else NULL. */
SHIMKIT_RUNTIME_API const char* shimkit_model_input_name(const shimkit_model* model, size_t index);

/* Whether the blob checks every input's dtype, sizes and strides itself
 * (AOTInductor's AOTI_RUNTIME_CHECK_INPUTS), decided before the first run:
 * on (default) unless the caller validates inputs, or the user set the
 * variable, which always wins. Returns SHIMKIT_E_BAD_INPUT after a run. */
SHIMKIT_RUNTIME_API int shimkit_model_set_check_inputs(shimkit_model* model, int enabled);

/* The constants named by their original FQNs are read by the blob's own code
 * only through shim calls (its wrapper source shows it: shimkit's Python
 * loader reads it from the .pt2): a copy a shim keeps in another layout may
 * then stand in for their bytes, which go back to the system (a convolution's
 * packed weights; the plain bytes are rebuilt if a shim asks for them again).
 * Naming a constant the blob's code reads directly makes its results wrong:
 * name only what the wrapper proves. Before the first run; `allowed` receives
 * how many constants the shims accepted (copied out of the blob, on the CPU).
 * SHIMKIT_KEEP_PLAIN_WEIGHTS=1 keeps every plain copy regardless. */
SHIMKIT_RUNTIME_API int shimkit_model_allow_stand_ins(shimkit_model* model, const char* const* fqns,
                                                      size_t count, size_t* allowed);
/* Runs the model. `outputs` receives num_outputs descriptors. */
SHIMKIT_RUNTIME_API int shimkit_model_run(shimkit_model* model, const shimkit_tensor* inputs,
                                          size_t num_inputs, shimkit_tensor* outputs,
                                          size_t num_outputs);

/* Like shimkit_model_run, but for every output i whose descriptor arrives
 * with non-NULL data and the same ndim, sizes and dtype as the result, the
 * result is copied there (C-contiguous; the descriptor's strides are set to
 * match) and copied[i] = 1. Otherwise copied[i] = 0 and outputs[i] describes
 * model-owned memory, as with shimkit_model_run. */
SHIMKIT_RUNTIME_API int shimkit_model_run_into(shimkit_model* model, const shimkit_tensor* inputs,
                                               size_t num_inputs, shimkit_tensor* outputs,
                                               size_t num_outputs, uint8_t* copied);

/* Runs `iterations` times and reports the mean wall time per run in ns. */
SHIMKIT_RUNTIME_API int shimkit_model_bench(shimkit_model* model, const shimkit_tensor* inputs,
                                            size_t num_inputs, int64_t iterations,
                                            double* ns_per_run);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHIMKIT_RUNTIME_SHIMKIT_RUNTIME_H_ */
