#include "shims/cuda/cublaslt_api.h"

#include <cstdlib>
#include <cstring>

#include "shims/cuda/cuda_api.h"

namespace shimkit {
namespace cuda {
namespace {

LtLibrary load_lt() {
  LtLibrary lt;
  if (const char* v = std::getenv("SHIMKIT_CUBLASLT"); v != nullptr && std::strcmp(v, "0") == 0) {
    lt.error = "cuBLASLt turned off (SHIMKIT_CUBLASLT=0)";
    return lt;
  }
  std::string tried;
  void* lib =
      open_first("SHIMKIT_CUBLASLT", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                 &lt.library, &tried);
  if (lib == nullptr) {
    lt.error = "cuBLASLt not found (tried " + tried + "; set SHIMKIT_CUBLASLT or LD_LIBRARY_PATH)";
    return lt;
  }
  std::string missing;
  bind(lib, "cublasLtCreate", &lt.create, &missing);
  bind(lib, "cublasLtMatmulDescCreate", &lt.desc_create, &missing);
  bind(lib, "cublasLtMatmulDescSetAttribute", &lt.desc_set, &missing);
  bind(lib, "cublasLtMatmulDescDestroy", &lt.desc_destroy, &missing);
  bind(lib, "cublasLtMatrixLayoutCreate", &lt.layout_create, &missing);
  bind(lib, "cublasLtMatrixLayoutDestroy", &lt.layout_destroy, &missing);
  bind(lib, "cublasLtMatmulPreferenceCreate", &lt.pref_create, &missing);
  bind(lib, "cublasLtMatmulPreferenceSetAttribute", &lt.pref_set, &missing);
  bind(lib, "cublasLtMatmulPreferenceDestroy", &lt.pref_destroy, &missing);
  bind(lib, "cublasLtMatmulAlgoGetHeuristic", &lt.heuristic, &missing);
  bind(lib, "cublasLtMatmul", &lt.matmul, &missing);
  if (!missing.empty()) {
    lt.error = lt.library + ": missing " + missing + " (not cuBLASLt 11+?)";
    return lt;
  }
  lt.ok = true;
  return lt;
}

}  // namespace

const LtLibrary& lt_library() {
  static const LtLibrary lt = load_lt();
  return lt;
}

}  // namespace cuda
}  // namespace shimkit
