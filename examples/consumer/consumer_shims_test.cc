// Calls go through the rename header like the definitions, so this links
// only if both agree on the prefixed names.
#include <cstdio>

#include "consumer_shims.h"

int main() {
  if (aoti_torch_device_type_cuda() != 1 || aoti_torch_layout_strided() != 0 ||
      aoti_torch_dtype_bfloat16() != 15) {
    std::fprintf(stderr, "consumer shims returned wrong codes\n");
    return 1;
  }
  std::puts("consumer shims: ok");
  return 0;
}
