// The ATen half of backend_both_test (compiled with USE_ATEN_LIB).
#include "runtime/backend_registry.h"

extern "C" const void* shimkit_test_aten_backend(const char** mode) {
  *mode = shimkit::aten::mode();
  return shimkit::aten::find_backend(shimkit::aten::kSlimBackendName);
}
