#include "shims/cuda/cublaslt_api.h"

#include "shims/cuda/cuda_api.h"

namespace shimkit {
namespace cuda {
namespace {

LtLibrary load_lt() {
  LtLibrary lt;
  void* lib = open_library("cuBLASLt", "SHIMKIT_CUBLASLT",
                           {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, true,
                           &lt.library, &lt.error);
  if (lib == nullptr) return lt;
  std::string missing;
  bind(lib, "cublasLtCreate", &lt.create, &missing);
  bind(lib, "cublasLtMatmulDescCreate", &lt.desc_create, &missing);
  bind(lib, "cublasLtMatmulDescSetAttribute", &lt.desc_set, &missing);
  bind(lib, "cublasLtMatmulDescDestroy", &lt.desc_destroy, &missing);
  bind(lib, "cublasLtMatrixLayoutCreate", &lt.layout_create, &missing);
  bind(lib, "cublasLtMatrixLayoutSetAttribute", &lt.layout_set, &missing);
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
