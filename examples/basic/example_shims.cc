// A minimal slim tensor behind a few AOTInductor C shims (CPU, float32 only).
// It shows the shape of a shim library; shims/ holds the real ones.
#include "examples/basic/example_shims.h"

#include <cstdint>
#include <new>

namespace {

// Dtype and device codes used by torch's C ABI (c10::ScalarType::Float,
// c10::DeviceType::CPU).
constexpr int32_t kFloat32 = 6;
constexpr int32_t kCpu = 0;
constexpr int64_t kMaxDims = 8;

// No std:: containers here: their template instances would be exported from
// the shared library next to the shims.
struct SlimTensor {
  void* data = nullptr;  // storage base (not owned)
  int64_t storage_offset = 0;
  int64_t ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

SlimTensor* AsSlim(AtenTensorHandle handle) { return reinterpret_cast<SlimTensor*>(handle); }

thread_local bool grad_mode_enabled = false;

}  // namespace

extern "C" {

int32_t aoti_torch_device_type_cpu(void) { return kCpu; }

int32_t aoti_torch_dtype_float32(void) { return kFloat32; }

bool aoti_torch_grad_mode_is_enabled(void) { return grad_mode_enabled; }

void aoti_torch_grad_mode_set_enabled(bool enabled) { grad_mode_enabled = enabled; }

AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim,
                                                  const int64_t* sizes_ptr,
                                                  const int64_t* strides_ptr,
                                                  int64_t storage_offset, int32_t dtype,
                                                  int32_t device_type, int32_t device_index,
                                                  AtenTensorHandle* ret_new_tensor) {
  if (ret_new_tensor == nullptr || ndim < 0 || ndim > kMaxDims ||
      (ndim > 0 && (!sizes_ptr || !strides_ptr)) || dtype != kFloat32 || device_type != kCpu ||
      device_index > 0) {
    return AOTI_TORCH_FAILURE;
  }
  auto* tensor = new (std::nothrow) SlimTensor();
  if (tensor == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  tensor->data = data;
  tensor->storage_offset = storage_offset;
  tensor->ndim = ndim;
  for (int64_t i = 0; i < ndim; ++i) {
    tensor->sizes[i] = sizes_ptr[i];
    tensor->strides[i] = strides_ptr[i];
  }
  *ret_new_tensor = reinterpret_cast<AtenTensorHandle>(tensor);
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor) {
  if (tensor == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  delete AsSlim(tensor);
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret_data_ptr) {
  if (tensor == nullptr || ret_data_ptr == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  SlimTensor* slim = AsSlim(tensor);
  *ret_data_ptr = static_cast<float*>(slim->data) + slim->storage_offset;
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret_dim) {
  if (tensor == nullptr || ret_dim == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  *ret_dim = AsSlim(tensor)->ndim;
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret_numel) {
  if (tensor == nullptr || ret_numel == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  const SlimTensor* slim = AsSlim(tensor);
  int64_t numel = 1;
  for (int64_t i = 0; i < slim->ndim; ++i) {
    numel *= slim->sizes[i];
  }
  *ret_numel = numel;
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret_sizes) {
  if (tensor == nullptr || ret_sizes == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  *ret_sizes = AsSlim(tensor)->sizes;
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret_strides) {
  if (tensor == nullptr || ret_strides == nullptr) {
    return AOTI_TORCH_FAILURE;
  }
  *ret_strides = AsSlim(tensor)->strides;
  return AOTI_TORCH_SUCCESS;
}

}  // extern "C"
