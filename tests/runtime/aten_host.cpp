// An ATen-mode host (built with USE_ATEN_LIB, linked against libtorch): runs
// a prefixed blob through the shimkit::aten registry on at::Tensor inputs.
//
//   aten_host BLOB.so OUT.bin IN.bin d0xd1x...   (float32 input, raw bytes)
//
// Exit 0 and OUT.bin = output 0 as raw float32 on success.
#include <ATen/ops/empty.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/backend_registry.h"

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  std::vector<int64_t> sizes;
  for (const char* p = argv[4]; *p;) {
    char* end = nullptr;
    sizes.push_back(std::strtoll(p, &end, 10));
    p = *end == 'x' ? end + 1 : end;
  }
  at::Tensor input = at::empty(sizes, at::kFloat);
  std::ifstream in(argv[3], std::ios::binary);
  in.read(static_cast<char*>(input.data_ptr()), static_cast<std::streamsize>(input.nbytes()));
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[3]);
    return 1;
  }
  const shimkit::aten::Backend* backend = shimkit::aten::find_backend("aoti_slim");
  if (backend == nullptr || std::strcmp(shimkit::aten::mode(), "aten") != 0) {
    std::fprintf(stderr, "no aten-mode slim backend\n");
    return 1;
  }
  shimkit_model* model = nullptr;
  if (shimkit_model_load_file(argv[1], &model) != SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    return 1;
  }
  std::vector<shimkit_tensor> outputs;
  std::string error;
  const int rc = backend->run(model, {input}, &outputs, &error);
  if (rc != SHIMKIT_OK || outputs.empty()) {
    std::fprintf(stderr, "run failed: %s\n", error.c_str());
    shimkit_model_free(model);
    return 1;
  }
  const shimkit_tensor& out = outputs[0];
  int64_t numel = 1;
  for (int i = 0; i < out.ndim; ++i) numel *= out.sizes[i];
  std::ofstream(argv[2], std::ios::binary)
      .write(static_cast<const char*>(out.data), static_cast<std::streamsize>(numel * 4));
  shimkit_model_free(model);
  std::puts("aten host: ok");
  return 0;
}
