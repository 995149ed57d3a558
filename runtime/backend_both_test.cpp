// Both registry variants in one process: each host finds its own backend.
#include <cstdio>
#include <cstring>

extern "C" const void* shimkit_test_portable_backend(const char** mode);
extern "C" const void* shimkit_test_aten_backend(const char** mode);

int main() {
  const char* pm = nullptr;
  const char* am = nullptr;
  const void* portable = shimkit_test_portable_backend(&pm);
  const void* aten = shimkit_test_aten_backend(&am);
  const bool ok = portable != nullptr && aten != nullptr && portable != aten &&
                  std::strcmp(pm, "portable") == 0 && std::strcmp(am, "aten") == 0;
  std::printf("portable=%p (%s) aten=%p (%s): %s\n", portable, pm, aten, am, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
