#include "acme_shims.h"

// Codes of torch's C ABI: c10::DeviceType::CPU, c10::Layout::Strided,
// c10::ScalarType::Float.
extern "C" {
int32_t aoti_torch_device_type_cpu(void) { return 0; }
int32_t aoti_torch_layout_strided(void) { return 0; }
int32_t aoti_torch_dtype_float32(void) { return 6; }
}
