// Shims a downstream project adds to the private ABI. The rename header
// (from @shimkit) renames them whenever the prefix macro is defined, which
// shimkit_shim_library does for this library and its includers.
#ifndef SHIMKIT_CONSUMER_CONSUMER_SHIMS_H_
#define SHIMKIT_CONSUMER_CONSUMER_SHIMS_H_

#include <stdint.h>

#include "shims/aoti_shim_rename.h"

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((visibility("default"))) int32_t aoti_torch_device_type_cuda(void);
__attribute__((visibility("default"))) int32_t aoti_torch_layout_strided(void);
__attribute__((visibility("default"))) int32_t aoti_torch_dtype_bfloat16(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SHIMKIT_CONSUMER_CONSUMER_SHIMS_H_
