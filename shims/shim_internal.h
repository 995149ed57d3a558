// Helpers shared by the shim translation units: handle casts and the guard
// that turns every C++ exception into AOTI_TORCH_FAILURE plus a message.
#ifndef SHIMKIT_SHIMS_SHIM_INTERNAL_H_
#define SHIMKIT_SHIMS_SHIM_INTERNAL_H_

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "shims/aoti_shim_abi.h"
#include "shims/slim_tensor.h"

namespace shimkit {

void set_last_error(std::string message);
// Picks the OpenBLAS thread count for a problem of `flops` operations.
void blas_threads_for(double flops);

inline SlimTensor& as_tensor(AtenTensorHandle handle) {
  if (handle == nullptr) throw ShimError("null tensor handle");
  return *reinterpret_cast<SlimTensor*>(handle);
}

inline AtenTensorHandle to_handle(SlimTensor&& tensor) {
  return reinterpret_cast<AtenTensorHandle>(new SlimTensor(std::move(tensor)));
}

template <typename T>
inline void check_out(T* ptr) {
  if (ptr == nullptr) throw ShimError("null output pointer");
}

// create_tensor_from_blob's shape arguments: 0..64 dims, sizes and strides given.
inline void check_blob_shape(int64_t ndim, const int64_t* sizes, const int64_t* strides) {
  if (ndim < 0 || ndim > 64) throw ShimError("bad number of dimensions");
  if (ndim > 0 && (sizes == nullptr || strides == nullptr)) {
    throw ShimError("null sizes or strides");
  }
}

// Bytes from the storage base `data` that a view of (sizes, strides,
// storage_offset) reaches; throws on a negative size or stride, or on null
// data for a view that reaches any byte.
inline size_t blob_nbytes(const void* data, int64_t ndim, const int64_t* sizes,
                          const int64_t* strides, int64_t storage_offset, int32_t dtype) {
  int64_t span = 1;
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[i] < 0 || strides[i] < 0) throw ShimError("negative size or stride");
    if (sizes[i] == 0) span = 0;
  }
  if (span != 0) {
    for (int64_t i = 0; i < ndim; ++i) span += (sizes[i] - 1) * strides[i];
  }
  const size_t nbytes = static_cast<size_t>(storage_offset + span) * element_size(dtype);
  if (data == nullptr && nbytes != 0) throw ShimError("null data");
  return nbytes;
}

// create_tensor_from_blob_v2 takes only strided tensors without opaque
// metadata; otherwise false, with the last error set for `function`.
inline bool plain_strided_blob(const char* function, int32_t layout, int64_t opaque_metadata_size) {
  if (layout == kLayoutStrided && opaque_metadata_size == 0) return true;
  set_last_error(std::string(function) +
                 ": only strided tensors without opaque metadata are supported");
  return false;
}

// Dimension `dim` of an `ndim`-D tensor, negative counting from the end (a
// 0-D tensor takes 0 or -1, like ATen); throws when out of range.
inline int64_t wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t n = ndim == 0 ? 1 : ndim;
  const int64_t w = dim < 0 ? dim + n : dim;
  if (w < 0 || w >= n) throw ShimError("dimension " + std::to_string(dim) + " out of range");
  return w;
}

// Runs `body`; no exception escapes. Returns AOTI_TORCH_SUCCESS or FAILURE.
template <typename F>
inline AOTITorchError guard(const char* function, F&& body) noexcept {
  try {
    body();
    return AOTI_TORCH_SUCCESS;
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    set_last_error(std::string(function) + ": " + e.what());
  } catch (...) {
    set_last_error(std::string(function) + ": unknown error");
  }
  return AOTI_TORCH_FAILURE;
}

}  // namespace shimkit

#define SHIMKIT_GUARD(body) ::shimkit::guard(__func__, [&]() body)

#endif  // SHIMKIT_SHIMS_SHIM_INTERNAL_H_
