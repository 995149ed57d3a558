// The portable registry: the slim backend is found, descriptors are checked.
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/backend_registry.h"

namespace sp = shimkit::portable;

int main() {
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "FAIL: %s\n", what);
      ++failures;
    }
  };
  expect(std::strcmp(sp::mode(), "portable") == 0, "mode");
  const sp::Backend* backend = sp::find_backend(sp::kSlimBackendName);
  expect(backend != nullptr, "slim backend registered");
  expect(sp::find_backend("no_such_backend") == nullptr, "unknown name not found");
  expect(backend != nullptr && !sp::register_backend(backend), "duplicate name refused");

  float data[6] = {};
  shimkit_tensor t{};
  t.data = data;
  t.ndim = 2;
  t.dtype = 6;
  t.sizes[0] = 2;
  t.sizes[1] = 3;
  t.strides[0] = 3;
  t.strides[1] = 1;
  shimkit_tensor out{};
  std::string error;
  expect(sp::to_descriptor(t, &out, &error) && out.data == data, "good tensor accepted");
  shimkit_tensor bad = t;
  bad.dtype = 99;
  expect(!sp::to_descriptor(bad, &out, &error) && error.find("dtype") != std::string::npos,
         "unknown dtype rejected");
  bad = t;
  bad.ndim = 9;
  expect(!sp::to_descriptor(bad, &out, &error), "9 dims rejected");
  bad = t;
  bad.strides[0] = -3;
  expect(!sp::to_descriptor(bad, &out, &error), "negative stride rejected");
  bad = t;
  bad.data = nullptr;
  expect(!sp::to_descriptor(bad, &out, &error), "null data rejected");
  if (failures == 0) std::puts("backend_portable_test: all passed");
  return failures == 0 ? 0 : 1;
}
