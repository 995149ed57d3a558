// A few AOTInductor C shim functions, as a slim runtime would provide them.
//
// Including shims/aoti_shim_rename.h first renames every aoti_torch_* name
// below to its private, prefixed name whenever AOTI_SHIM_SYMBOL_PREFIX is
// defined (shimkit_shim_library defines it for this target and everything
// that includes this header), so declarations, definitions and calls agree.
#ifndef SHIMKIT_EXAMPLES_BASIC_EXAMPLE_SHIMS_H_
#define SHIMKIT_EXAMPLES_BASIC_EXAMPLE_SHIMS_H_

#include <stdbool.h>
#include <stdint.h>

#include "shims/aoti_shim_rename.h"

#define EXAMPLE_SHIM_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

// Same shapes as torch/csrc/inductor/aoti_torch/c/shim.h.
typedef int32_t AOTITorchError;
struct AtenTensorOpaque;
typedef struct AtenTensorOpaque* AtenTensorHandle;

#define AOTI_TORCH_SUCCESS 0
#define AOTI_TORCH_FAILURE 1

EXAMPLE_SHIM_EXPORT int32_t aoti_torch_device_type_cpu(void);
EXAMPLE_SHIM_EXPORT int32_t aoti_torch_dtype_float32(void);
EXAMPLE_SHIM_EXPORT bool aoti_torch_grad_mode_is_enabled(void);
EXAMPLE_SHIM_EXPORT void aoti_torch_grad_mode_set_enabled(bool enabled);

EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_create_tensor_from_blob(
    void* data, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
    int64_t storage_offset, int32_t dtype, int32_t device_type, int32_t device_index,
    AtenTensorHandle* ret_new_tensor);
EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor,
                                                           void** ret_data_ptr);
EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret_dim);
EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor,
                                                        int64_t* ret_numel);
EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor,
                                                        int64_t** ret_sizes);
EXAMPLE_SHIM_EXPORT AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor,
                                                          int64_t** ret_strides);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SHIMKIT_EXAMPLES_BASIC_EXAMPLE_SHIMS_H_
