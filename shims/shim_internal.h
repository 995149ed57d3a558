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
