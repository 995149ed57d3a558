// Calls the example shims through their header. The header renames the
// calls exactly as it renames the definitions, so this links only if both
// sides agree on the prefixed names.
#include <cstdint>
#include <cstdio>

#include "examples/basic/example_shims.h"

#define EXPECT(cond)                                                          \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main() {
  float data[6] = {0, 1, 2, 3, 4, 5};
  const int64_t sizes[2] = {2, 3};
  const int64_t strides[2] = {3, 1};
  AtenTensorHandle tensor = nullptr;
  EXPECT(aoti_torch_create_tensor_from_blob(data, 2, sizes, strides, 1, aoti_torch_dtype_float32(),
                                            aoti_torch_device_type_cpu(), 0,
                                            &tensor) == AOTI_TORCH_SUCCESS);
  int64_t numel = 0;
  int64_t dim = 0;
  int64_t* got_sizes = nullptr;
  void* ptr = nullptr;
  EXPECT(aoti_torch_get_numel(tensor, &numel) == AOTI_TORCH_SUCCESS && numel == 6);
  EXPECT(aoti_torch_get_dim(tensor, &dim) == AOTI_TORCH_SUCCESS && dim == 2);
  EXPECT(aoti_torch_get_sizes(tensor, &got_sizes) == AOTI_TORCH_SUCCESS && got_sizes[1] == 3);
  EXPECT(aoti_torch_get_data_ptr(tensor, &ptr) == AOTI_TORCH_SUCCESS && ptr == &data[1]);
  EXPECT(aoti_torch_create_tensor_from_blob(data, 1, sizes, strides, 0, 99, 0, 0, &tensor) ==
         AOTI_TORCH_FAILURE);
  aoti_torch_grad_mode_set_enabled(true);
  EXPECT(aoti_torch_grad_mode_is_enabled());
  EXPECT(aoti_torch_delete_tensor_object(tensor) == AOTI_TORCH_SUCCESS);
  EXPECT(aoti_torch_get_numel(nullptr, &numel) == AOTI_TORCH_FAILURE);
  std::puts("example shims: ok");
  return 0;
}
