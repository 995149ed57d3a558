// acme's own shims of the private ABI. shimkit's rename header renames them
// to <prefix>aoti_torch_* whenever the prefix define is set, which the shim
// library macros (Bazel, Buck2, CMake) do from acme's shim_symbol_prefix.bzl.
#ifndef ACME_SHIMS_ACME_SHIMS_H_
#define ACME_SHIMS_ACME_SHIMS_H_

#include <stdint.h>

#include "shims/aoti_shim_rename.h"

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((visibility("default"))) int32_t aoti_torch_device_type_cpu(void);
__attribute__((visibility("default"))) int32_t aoti_torch_layout_strided(void);
__attribute__((visibility("default"))) int32_t aoti_torch_dtype_float32(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACME_SHIMS_ACME_SHIMS_H_
