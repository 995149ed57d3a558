// The ATen registry: at::Tensor inputs are described without copies, and
// tensors the slim runtime cannot take are refused with a message.
#include <ATen/ops/empty.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/backend_registry.h"

namespace sa = shimkit::aten;

int main() {
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "FAIL: %s\n", what);
      ++failures;
    }
  };
  expect(std::strcmp(sa::mode(), "aten") == 0, "mode");
  expect(sa::find_backend(sa::kSlimBackendName) != nullptr, "slim backend registered (aten)");

  at::Tensor t = at::empty({4, 6}, at::kFloat);
  at::Tensor view = t.t();  // transposed: strides {1, 6}, same memory
  shimkit_tensor d{};
  std::string error;
  expect(sa::to_descriptor(view, &d, &error), "CPU tensor accepted");
  expect(d.data == t.data_ptr(), "no copy: descriptor points at the tensor's memory");
  expect(d.ndim == 2 && d.sizes[0] == 6 && d.sizes[1] == 4, "sizes");
  expect(d.strides[0] == 1 && d.strides[1] == 6, "strides kept");
  expect(d.dtype == 6, "float32 code");

  at::Tensor offset = t.narrow(0, 1, 2);
  expect(sa::to_descriptor(offset, &d, &error) && d.data == offset.data_ptr(),
         "storage offset applied, still no copy");

  at::Tensor meta = at::empty({2}, at::TensorOptions().device(at::kMeta));
  expect(!sa::to_descriptor(meta, &d, &error) && error.find("meta") != std::string::npos,
         "meta tensor refused");
  expect(!sa::to_descriptor(at::Tensor(), &d, &error), "undefined tensor refused");
  at::Tensor complex = at::empty({2}, at::kComplexFloat);
  expect(!sa::to_descriptor(complex, &d, &error), "complex dtype refused");
  if (failures == 0) std::puts("backend_aten_test: all passed");
  return failures == 0 ? 0 : 1;
}
