// DLPack export of the CUDA runtime's outputs (shimkit_cuda_tensor_dlpack):
// consumers that take DLPack (torch.from_dlpack, CuPy, JAX) get an output's
// memory without a copy and without parsing __cuda_array_interface__.
#include <cstdint>
#include <new>
#include <string>

#include "runtime/blob_loader.h"
#include "runtime/cuda/dlpack.h"
#include "runtime/cuda/shimkit_cuda_runtime.h"
#include "shims/cuda/aoti_shim_cuda_abi.h"

namespace ld = shimkit::loader;

namespace {

// One export: the DLManagedTensor first (the pointer consumers hold is the
// Export's), a tensor handle of its own on the output's storage (so the
// consumer's tensor and the caller's owner are freed independently), and the
// geometry the DLTensor points at.
struct Export {
  DLManagedTensor managed;
  AtenTensorHandle handle = nullptr;
  int64_t shape[SHIMKIT_MAX_DIMS] = {};
  int64_t strides[SHIMKIT_MAX_DIMS] = {};

  ~Export() {
    if (handle != nullptr) aoti_torch_delete_tensor_object(handle);
  }
};

void delete_export(DLManagedTensor* managed) { delete static_cast<Export*>(managed->manager_ctx); }

// The DLPack type of a shims' dtype code (torch's ScalarType numbering).
bool dlpack_dtype(int32_t code, DLDataType* out) {
  struct Entry {
    int32_t code;
    DLDataType type;
  };
  static constexpr Entry kTypes[] = {
      {0, {kDLUInt, 8, 1}},     {1, {kDLInt, 8, 1}},    {2, {kDLInt, 16, 1}},
      {3, {kDLInt, 32, 1}},     {4, {kDLInt, 64, 1}},   {5, {kDLFloat, 16, 1}},
      {6, {kDLFloat, 32, 1}},   {7, {kDLFloat, 64, 1}}, {11, {kDLBool, 8, 1}},
      {15, {kDLBfloat, 16, 1}}, {27, {kDLUInt, 16, 1}}, {28, {kDLUInt, 32, 1}},
      {29, {kDLUInt, 64, 1}},
  };
  for (const Entry& entry : kTypes) {
    if (entry.code == code) {
      *out = entry.type;
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int shimkit_cuda_tensor_dlpack(void* owner, void** managed_out) {
  if (owner == nullptr || managed_out == nullptr) {
    return ld::fail(SHIMKIT_E_BAD_INPUT, "dlpack: null owner or result pointer");
  }
  *managed_out = nullptr;
  Export* e = new (std::nothrow) Export();
  if (e == nullptr) return ld::fail(SHIMKIT_E_RUN, "dlpack: out of host memory");
  auto source = static_cast<AtenTensorHandle>(owner);
  int64_t ndim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  int32_t dtype = 0;
  int32_t device_index = 0;
  void* data = nullptr;
  if (aoti_torch_new_tensor_handle(source, &e->handle) != 0 ||
      aoti_torch_get_dim(e->handle, &ndim) != 0 || aoti_torch_get_sizes(e->handle, &sizes) != 0 ||
      aoti_torch_get_strides(e->handle, &strides) != 0 ||
      aoti_torch_get_dtype(e->handle, &dtype) != 0 ||
      aoti_torch_get_device_index(e->handle, &device_index) != 0 ||
      aoti_torch_get_data_ptr(e->handle, &data) != 0) {
    delete e;
    return ld::fail(SHIMKIT_E_RUN, "dlpack: " + ld::shim_error());
  }
  DLTensor& t = e->managed.dl_tensor;
  if (ndim > SHIMKIT_MAX_DIMS || !dlpack_dtype(dtype, &t.dtype)) {
    delete e;
    return ld::fail(SHIMKIT_E_RUN, "dlpack: dtype code " + std::to_string(dtype) + " or " +
                                       std::to_string(ndim) + " dimensions not exportable");
  }
  for (int64_t k = 0; k < ndim; ++k) {
    e->shape[k] = sizes[k];
    e->strides[k] = strides[k];
  }
  t.data = data;
  t.device = {kDLCUDA, device_index};
  t.ndim = static_cast<int32_t>(ndim);
  t.shape = e->shape;
  t.strides = e->strides;
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_export;
  *managed_out = &e->managed;
  return SHIMKIT_OK;
}
