// Calls go through the rename header like the definitions, so this links
// only if both agree on the prefixed names.
#include <cstdio>

#include "acme_shims.h"

int main() {
  if (aoti_torch_device_type_cpu() != 0 || aoti_torch_layout_strided() != 0 ||
      aoti_torch_dtype_float32() != 6) {
    std::fprintf(stderr, "acme shims returned wrong codes\n");
    return 1;
  }
  std::puts("acme shims: ok");
  return 0;
}
