// The portable half of backend_both_test (compiled without USE_ATEN_LIB).
#include "runtime/backend_registry.h"

extern "C" const void* shimkit_test_portable_backend(const char** mode) {
  *mode = shimkit::portable::mode();
  return shimkit::portable::find_backend(shimkit::portable::kSlimBackendName);
}
