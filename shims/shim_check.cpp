// Slim CPU shims of the check family: aoti_torch_check (the blob's runtime
// assertions: index bounds, integer division by zero, dynamic-shape guards),
// aoti_torch_warn and aoti_torch_check_inf_and_nan (debug builds of blobs).
//
// aoti_torch_check returns void: like libtorch's, a failed check throws a
// std::exception that the blob's entry point (CONVERT_EXCEPTION_TO_ERROR_CODE)
// turns into a failed run. The message is also kept as the shim error, so the
// runtime reports it instead of "the blob printed details to stderr".
#include <cmath>
#include <cstdio>
#include <string>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace {

std::string where(const char* func, const char* file, uint32_t line) {
  std::string out = " (";
  out += func != nullptr ? func : "?";
  out += " at ";
  out += file != nullptr ? file : "?";
  out += ":" + std::to_string(line) + ")";
  return out;
}

// True if any element of the floating tensor `t` is NaN (nan) or infinite (!nan).
template <typename T>
bool any_element(const shimkit::SlimTensor& t, bool nan) {
  const T* base = static_cast<const T*>(t.data_ptr());
  bool found = false;
  shimkit::for_each_offset(t, [&](int64_t off) {
    const double v = static_cast<double>(shimkit::Scalar<T>::load(base + off));
    found = found || (nan ? std::isnan(v) : std::isinf(v));
  });
  return found;
}

}  // namespace

extern "C" {

void aoti_torch_check(bool cond, const char* func, const char* file, uint32_t line,
                      const char* msg) {
  if (cond) return;
  std::string message = msg != nullptr && msg[0] != '\0' ? msg : "check failed";
  message += where(func, file, line);
  shimkit::set_last_error(std::string(__func__) + ": " + message);
  throw shimkit::ShimError(message);
}

void aoti_torch_warn(const char* func, const char* file, uint32_t line, const char* msg) {
  std::fprintf(stderr, "Warning: %s%s\n", msg != nullptr ? msg : "",
               where(func, file, line).c_str());
}

AOTITorchError aoti_torch_check_inf_and_nan(const char* tensor_name, AtenTensorHandle tensor) {
  return SHIMKIT_GUARD({
    const shimkit::SlimTensor& given = shimkit::as_tensor(tensor);
    const std::string name = tensor_name != nullptr ? tensor_name : "tensor";
    const int32_t dt = given.dtype();
    if (dt != shimkit::dtype::kFloat32 && dt != shimkit::dtype::kFloat64 &&
        dt != shimkit::dtype::kFloat16 && dt != shimkit::dtype::kBFloat16) {
      return;  // integers and bools hold neither
    }
    // The elements are read on the host: a device tensor is copied there first
    // through its device's hooks (the one shim core names no device).
    shimkit::SlimTensor t = given;
    if (given.device_type() != shimkit::device::kCPU) {
      t = shimkit::SlimTensor::empty(given.sizes().data(), nullptr, given.dim(), given.dtype(),
                                     shimkit::device::kCPU, -1);
      shimkit::copy_tensor(t, given);
    }
    shimkit::dispatch_floating(dt, "check_inf_and_nan", [&](auto tag) {
      using T = decltype(tag);
      if (any_element<T>(t, true)) throw shimkit::ShimError(name + " contains NaN");
      if (any_element<T>(t, false)) throw shimkit::ShimError(name + " contains inf");
    });
  });
}

}  // extern "C"
