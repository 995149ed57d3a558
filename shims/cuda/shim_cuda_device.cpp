// Slim CUDA shims that exist only for CUDA: device queries, guards,
// streams, raw and pool allocations. Creating, cloning and copying CUDA
// tensors is the shim core's job (shims/shim_core.cpp), through the CUDA
// device hooks (cuda_hooks.cpp) that every CUDA tensor's storage carries.
#include <memory>
#include <string>
#include <vector>

#include "shims/cuda/aoti_shim_cuda_abi.h"
#include "shims/cuda/cuda_context.h"
#include "shims/shim_internal.h"

namespace cu = shimkit::cuda;
using shimkit::as_tensor;
using shimkit::check_out;
using shimkit::ShimError;
using shimkit::SlimTensor;
using shimkit::to_handle;

namespace {

// A CUDA guard: the device current when it was made comes back on delete.
struct DeviceGuard {
  int32_t previous = 0;
};

struct StreamGuard {
  int32_t device = 0;
  int32_t previous_device = 0;
  cu::Stream previous_stream = nullptr;
};

}  // namespace

extern "C" {

int32_t shimkit_cuda_device_count(void) {
  const cu::Runtime& rt = cu::runtime();
  return rt.ok ? rt.device_count : -1;
}

const char* shimkit_cuda_unavailable_reason(void) { return cu::runtime().error.c_str(); }

size_t shimkit_cuda_cached_bytes(void) { return cu::cached_bytes(); }

void shimkit_cuda_empty_cache(void) { cu::empty_cache(); }

AOTITorchError shimkit_cuda_synchronize(int32_t device_index) {
  return SHIMKIT_GUARD({
    cu::check_device_index(device_index);
    cu::synchronize(device_index);
  });
}

AOTITorchError aoti_torch__alloc_from_pool(AtenTensorHandle self, int64_t offset_bytes,
                                           int32_t dtype, int64_t ndim, const int64_t* sizes_ptr,
                                           const int64_t* strides_ptr,
                                           AtenTensorHandle* ret_new_tensor) {
  return SHIMKIT_GUARD({
    check_out(ret_new_tensor);
    const SlimTensor& pool = as_tensor(self);
    if (!pool.defined()) throw ShimError("allocation from an undefined pool");
    const int64_t itemsize = static_cast<int64_t>(shimkit::element_size(dtype));
    if (offset_bytes < 0 || offset_bytes % itemsize != 0) {
      throw ShimError("pool offset " + std::to_string(offset_bytes) +
                      " is not a multiple of the element size");
    }
    const int64_t base_bytes = pool.storage_offset() * static_cast<int64_t>(pool.itemsize());
    *ret_new_tensor = to_handle(SlimTensor(pool.storage(), sizes_ptr, strides_ptr, ndim,
                                           (base_bytes + offset_bytes) / itemsize, dtype,
                                           pool.device_type(), pool.device_index()));
  });
}

AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* ret_guard) {
  return SHIMKIT_GUARD({
    check_out(ret_guard);
    auto guard = std::make_unique<DeviceGuard>();
    guard->previous = cu::current_device();
    cu::set_current_device(device_index);
    *ret_guard = reinterpret_cast<CUDAGuardHandle>(guard.release());
  });
}

AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard) {
  return SHIMKIT_GUARD({
    if (guard == nullptr) throw ShimError("null CUDA guard");
    std::unique_ptr<DeviceGuard> g(reinterpret_cast<DeviceGuard*>(guard));
    cu::set_current_device(g->previous);
  });
}

AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard, int32_t device_index) {
  return SHIMKIT_GUARD({
    if (guard == nullptr) throw ShimError("null CUDA guard");
    cu::set_current_device(device_index);
  });
}

AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream, int32_t device_index,
                                                   CUDAStreamGuardHandle* ret_guard) {
  return SHIMKIT_GUARD({
    check_out(ret_guard);
    auto guard = std::make_unique<StreamGuard>();
    guard->previous_device = cu::current_device();
    cu::set_current_device(device_index);
    guard->device = device_index;
    guard->previous_stream = cu::current_stream(device_index);
    cu::set_current_stream(device_index, stream);
    *ret_guard = reinterpret_cast<CUDAStreamGuardHandle>(guard.release());
  });
}

AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard) {
  return SHIMKIT_GUARD({
    if (guard == nullptr) throw ShimError("null CUDA stream guard");
    std::unique_ptr<StreamGuard> g(reinterpret_cast<StreamGuard*>(guard));
    cu::set_current_stream(g->device, g->previous_stream);
    cu::set_current_device(g->previous_device);
  });
}

AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void** ret_stream) {
  return SHIMKIT_GUARD({
    check_out(ret_stream);
    cu::check_device_index(device_index);
    *ret_stream = cu::current_stream(device_index);
  });
}

AOTITorchError aoti_torch_get_current_device_index(int32_t* ret_device_index) {
  return SHIMKIT_GUARD({
    check_out(ret_device_index);
    *ret_device_index = cu::current_device();
  });
}

AOTITorchError aoti_torch_cuda_caching_allocator_raw_alloc(uint64_t nbytes, void** ret_ptr) {
  return SHIMKIT_GUARD({
    check_out(ret_ptr);
    *ret_ptr = cu::raw_alloc(static_cast<size_t>(nbytes));
  });
}

AOTITorchError aoti_torch_cuda_caching_allocator_raw_delete(void* ptr) {
  return SHIMKIT_GUARD({ cu::raw_delete(ptr); });
}

}  // extern "C"
