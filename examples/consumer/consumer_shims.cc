#include "consumer_shims.h"

// Codes of torch's C ABI: c10::DeviceType::CUDA, c10::Layout::Strided,
// c10::ScalarType::BFloat16.
extern "C" {
int32_t aoti_torch_device_type_cuda(void) { return 1; }
int32_t aoti_torch_layout_strided(void) { return 0; }
int32_t aoti_torch_dtype_bfloat16(void) { return 15; }
}
