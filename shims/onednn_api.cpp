#include "shims/onednn_api.h"

#if SHIMKIT_HAVE_ONEDNN
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "shims/slim_tensor.h"

namespace shimkit {
namespace {

// Debian's soname (libdnnl-dev / libdnnl2).
constexpr const char* kLibrary = "libdnnl.so.2";

OnednnApi open_onednn() {
  OnednnApi api;
  const char* switch_value = std::getenv("SHIMKIT_ONEDNN");
  if (switch_value != nullptr && std::strcmp(switch_value, "0") == 0) {
    api.error = "turned off by SHIMKIT_ONEDNN=0";
    return api;
  }
  int flags = RTLD_NOW | RTLD_LOCAL;
#if !defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer refuses RTLD_DEEPBIND; its builds never share a process
  // with libtorch in the tests.
  flags |= RTLD_DEEPBIND;
#endif
  void* handle = dlopen(kLibrary, flags);
  if (handle == nullptr) {
    const char* why = dlerror();
    api.error = std::string(kLibrary) + ": " + (why != nullptr ? why : "cannot be opened");
    return api;
  }
  // Kept open for the life of the process: primitives hold its JIT code.
#define SHIMKIT_ONEDNN_LOAD(name)                                                    \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));             \
  if (api.name == nullptr) {                                                         \
    api.error = std::string(kLibrary) + ": has no " #name " (oneDNN 2.x is needed)"; \
    return api;                                                                      \
  }
  SHIMKIT_ONEDNN_FUNCTIONS(SHIMKIT_ONEDNN_LOAD)
#undef SHIMKIT_ONEDNN_LOAD
  api.ok = true;
  return api;
}

const char* status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_out_of_memory:
      return "out of memory";
    case dnnl_invalid_arguments:
      return "invalid arguments";
    case dnnl_unimplemented:
      return "unimplemented";
    case dnnl_runtime_error:
      return "runtime error";
    default:
      return "error";
  }
}

}  // namespace

const OnednnApi& onednn() {
  static const OnednnApi api = open_onednn();
  return api;
}

void onednn_check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success) {
    throw ShimError(std::string(what) + ": oneDNN " + status_name(status) + " (status " +
                    std::to_string(static_cast<int>(status)) + ")");
  }
}

}  // namespace shimkit

#endif  // SHIMKIT_HAVE_ONEDNN
