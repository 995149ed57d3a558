// Slim CUDA shims, part 1: the CPU core shims with device-aware creation and
// copies, plus guards, streams and raw allocations.
//
// The CPU core (shims/shim_core.cpp) is compiled into this translation unit
// unchanged (Bazel copies it to shim_core_host.inc), with the eight functions
// that touch memory renamed to shimkit_host_* so that the definitions below
// can dispatch: CPU tensors go to the host version, CUDA tensors are handled
// here. Everything else (attributes, views, lifecycle, constants) is shared
// as is: a CUDA tensor is a SlimTensor whose storage is device memory.
#include "shims/aoti_shim_abi.h"
#include "shims/cuda/aoti_shim_cuda_abi.h"

#pragma push_macro("aoti_torch_empty_strided")
#pragma push_macro("aoti_torch_empty_strided_pinned")
#pragma push_macro("aoti_torch_create_tensor_from_blob")
#pragma push_macro("aoti_torch_create_tensor_from_blob_v2")
#pragma push_macro("aoti_torch_clone")
#pragma push_macro("aoti_torch_clone_preserve_strides")
#pragma push_macro("aoti_torch_copy_")
#pragma push_macro("aoti_torch_tensor_copy_")
#undef aoti_torch_empty_strided
#undef aoti_torch_empty_strided_pinned
#undef aoti_torch_create_tensor_from_blob
#undef aoti_torch_create_tensor_from_blob_v2
#undef aoti_torch_clone
#undef aoti_torch_clone_preserve_strides
#undef aoti_torch_copy_
#undef aoti_torch_tensor_copy_
#define aoti_torch_empty_strided shimkit_host_empty_strided
#define aoti_torch_empty_strided_pinned shimkit_host_empty_pinned
#define aoti_torch_create_tensor_from_blob shimkit_host_from_blob
#define aoti_torch_create_tensor_from_blob_v2 shimkit_host_from_blob_v2
#define aoti_torch_clone shimkit_host_clone
#define aoti_torch_clone_preserve_strides shimkit_host_clone_preserve_strides
#define aoti_torch_copy_ shimkit_host_copy_
#define aoti_torch_tensor_copy_ shimkit_host_tensor_copy_
#include "shims/cuda/shim_core_host.inc"  // NOLINT(build/include): the CPU core, renamed
#undef aoti_torch_empty_strided
#undef aoti_torch_empty_strided_pinned
#undef aoti_torch_create_tensor_from_blob
#undef aoti_torch_create_tensor_from_blob_v2
#undef aoti_torch_clone
#undef aoti_torch_clone_preserve_strides
#undef aoti_torch_copy_
#undef aoti_torch_tensor_copy_
#pragma pop_macro("aoti_torch_empty_strided")
#pragma pop_macro("aoti_torch_empty_strided_pinned")
#pragma pop_macro("aoti_torch_create_tensor_from_blob")
#pragma pop_macro("aoti_torch_create_tensor_from_blob_v2")
#pragma pop_macro("aoti_torch_clone")
#pragma pop_macro("aoti_torch_clone_preserve_strides")
#pragma pop_macro("aoti_torch_copy_")
#pragma pop_macro("aoti_torch_tensor_copy_")

#include <memory>
#include <string>
#include <vector>

#include "shims/cuda/cuda_context.h"
#include "shims/shim_internal.h"

namespace cu = shimkit::cuda;
namespace dev = shimkit::device;
using shimkit::as_tensor;
using shimkit::check_out;
using shimkit::ShimError;
using shimkit::SlimTensor;
using shimkit::to_handle;

namespace {

// CPU tensors (and null handles, for the host version's error) stay on the host path.
bool on_host(AtenTensorHandle h) {
  return h == nullptr || !cu::is_cuda(*reinterpret_cast<const SlimTensor*>(h));
}

// A CUDA guard: the device current when it was made comes back on delete.
struct DeviceGuard {
  int32_t previous = 0;
};

struct StreamGuard {
  int32_t device = 0;
  int32_t previous_device = 0;
  cu::Stream previous_stream = nullptr;
};

bool is_cuda_device(int32_t device_type) { return device_type == dev::kCUDA; }

void check_supported_device(int32_t device_type, int32_t device_index) {
  shimkit::validate_device(device_type, device_index);
  if (device_type != dev::kCPU && device_type != dev::kCUDA) {
    throw ShimError("the slim CUDA shims hold CPU and CUDA tensors only, got device type " +
                    std::to_string(device_type));
  }
  if (is_cuda_device(device_type)) cu::check_device_index(device_index);
}

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

AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes_ptr,
                                        const int64_t* strides_ptr, int32_t dtype,
                                        int32_t device_type, int32_t device_index,
                                        AtenTensorHandle* ret) {
  if (device_type == dev::kCPU) {
    return shimkit_host_empty_strided(ndim, sizes_ptr, strides_ptr, dtype, device_type,
                                      device_index, ret);
  }
  return SHIMKIT_GUARD({
    check_out(ret);
    check_supported_device(device_type, device_index);
    *ret = to_handle(cu::empty_device(sizes_ptr, strides_ptr, ndim, dtype, device_index));
  });
}

AOTITorchError aoti_torch_empty_strided_pinned(int64_t ndim, const int64_t* sizes_ptr,
                                               const int64_t* strides_ptr, int32_t dtype,
                                               int32_t device_type, int32_t device_index,
                                               AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    shimkit::validate_device(device_type, device_index);
    if (device_type != dev::kCPU) {
      throw ShimError("pinned memory is host memory: device type must be CPU, got " +
                      std::to_string(device_type));
    }
    *ret = to_handle(cu::empty_pinned(sizes_ptr, strides_ptr, ndim, dtype));
  });
}

AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim,
                                                  const int64_t* sizes_ptr,
                                                  const int64_t* strides_ptr,
                                                  int64_t storage_offset, int32_t dtype,
                                                  int32_t device_type, int32_t device_index,
                                                  AtenTensorHandle* ret) {
  if (device_type == dev::kCPU) {
    return shimkit_host_from_blob(data, ndim, sizes_ptr, strides_ptr, storage_offset, dtype,
                                  device_type, device_index, ret);
  }
  return SHIMKIT_GUARD({
    check_out(ret);
    check_supported_device(device_type, device_index);
    shimkit::check_blob_shape(ndim, sizes_ptr, strides_ptr);
    if (storage_offset < 0) throw ShimError("negative storage offset");
    const size_t nbytes =
        shimkit::blob_nbytes(data, ndim, sizes_ptr, strides_ptr, storage_offset, dtype);
    // `data` is device memory the caller keeps alive (the blob's constants).
    *ret = to_handle(SlimTensor(shimkit::Storage::borrow(data, nbytes), sizes_ptr, strides_ptr,
                                ndim, storage_offset, dtype, device_type, device_index));
  });
}

AOTITorchError aoti_torch_create_tensor_from_blob_v2(
    void* data, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
    int64_t storage_offset, int32_t dtype, int32_t device_type, int32_t device_index,
    AtenTensorHandle* ret, int32_t layout, const uint8_t* opaque_metadata,
    int64_t opaque_metadata_size) {
  (void)opaque_metadata;
  if (!shimkit::plain_strided_blob(__func__, layout, opaque_metadata_size)) {
    return AOTI_TORCH_FAILURE;
  }
  return aoti_torch_create_tensor_from_blob(data, ndim, sizes_ptr, strides_ptr, storage_offset,
                                            dtype, device_type, device_index, ret);
}

AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret) {
  if (on_host(self)) return shimkit_host_clone(self, ret);
  return SHIMKIT_GUARD({
    check_out(ret);
    const SlimTensor& t = as_tensor(self);
    const std::vector<int64_t> strides =
        shimkit::dense_strides_like(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                                    std::vector<int64_t>(t.strides().begin(), t.strides().end()));
    SlimTensor out =
        cu::empty_device(t.sizes().data(), strides.data(), t.dim(), t.dtype(), t.device_index());
    cu::copy_tensor(out, t);
    *ret = to_handle(std::move(out));
  });
}

AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle* ret) {
  if (on_host(self)) return shimkit_host_clone_preserve_strides(self, ret);
  return SHIMKIT_GUARD({
    check_out(ret);
    const SlimTensor& t = as_tensor(self);
    SlimTensor out = cu::empty_device(t.sizes().data(), t.strides().data(), t.dim(), t.dtype(),
                                      t.device_index());
    cu::copy_tensor(out, t);
    *ret = to_handle(std::move(out));
  });
}

AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking) {
  (void)non_blocking;
  return SHIMKIT_GUARD({ cu::copy_tensor(as_tensor(self), as_tensor(src)); });
}

AOTITorchError aoti_torch_tensor_copy_(AtenTensorHandle src, AtenTensorHandle dst) {
  return aoti_torch_copy_(dst, src, 0);
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
