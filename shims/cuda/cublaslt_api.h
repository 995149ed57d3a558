// cuBLASLt, loaded at run time with dlopen like the CUDA runtime, cuBLAS and
// cuDNN. The slim GEMMs use it first: its heuristics pick far better kernels
// than legacy cublasSgemm for the skinny products of small-batch inference
// (measured on an H200: a [8, 256] x [256, 512] float32 product ran a 28 us
// kernel through cublasSgemm, ~6 us through cuBLASLt), and its bias epilogue
// folds addmm's bias into the GEMM.
//
// The signatures are declared from type parameters so that a test can
// instantiate them with the official header types (cublasLt.h) and check, at
// compile time, that every declaration matches (tests/cuda).
#ifndef SHIMKIT_SHIMS_CUDA_CUBLASLT_API_H_
#define SHIMKIT_SHIMS_CUDA_CUBLASLT_API_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace shimkit {
namespace cuda {

// `Status` is cublasStatus_t, `Handle` cublasLtHandle_t, `Desc`
// cublasLtMatmulDesc_t, `Layout` cublasLtMatrixLayout_t, `Pref`
// cublasLtMatmulPreference_t, `Compute` cublasComputeType_t, `DataType`
// cudaDataType_t, `DescAttr`/`PrefAttr` the two attribute enums, `Result`
// cublasLtMatmulHeuristicResult_t, `Algo` cublasLtMatmulAlgo_t, `LayoutAttr`
// cublasLtMatrixLayoutAttribute_t.
template <typename Status, typename Handle, typename Stream, typename Desc, typename Layout,
          typename Pref, typename Compute, typename DataType, typename DescAttr, typename PrefAttr,
          typename Result, typename Algo, typename LayoutAttr>
struct CublasLtSignatures {
  using Create = Status (*)(Handle*);
  using MatmulDescCreate = Status (*)(Desc*, Compute, DataType);
  using MatmulDescSetAttribute = Status (*)(Desc, DescAttr, const void*, size_t);
  using MatmulDescDestroy = Status (*)(Desc);
  using MatrixLayoutCreate = Status (*)(Layout*, DataType, uint64_t, uint64_t, int64_t);
  using MatrixLayoutSetAttribute = Status (*)(Layout, LayoutAttr, const void*, size_t);
  using MatrixLayoutDestroy = Status (*)(Layout);
  using MatmulPreferenceCreate = Status (*)(Pref*);
  using MatmulPreferenceSetAttribute = Status (*)(Pref, PrefAttr, const void*, size_t);
  using MatmulPreferenceDestroy = Status (*)(Pref);
  using MatmulAlgoGetHeuristic = Status (*)(Handle, Desc, Layout, Layout, Layout, Layout, Pref, int,
                                            Result[], int*);
  using Matmul = Status (*)(Handle, Desc, const void*, const void*, Layout, const void*, Layout,
                            const void*, const void*, Layout, void*, Layout, const Algo*, void*,
                            size_t, Stream);
};

// ABI-identical stand-ins for cublasLtMatmulAlgo_t and
// cublasLtMatmulHeuristicResult_t.
struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristicResult {
  LtAlgo algo;
  size_t workspace_size;
  int state;
  float waves_count;
  int reserved[4];
};

constexpr int kLtCompute32F = 68;           // CUBLAS_COMPUTE_32F (no TF32)
constexpr int kLtCompute32FFastTF32 = 77;   // CUBLAS_COMPUTE_32F_FAST_TF32
constexpr int kLtR32F = 0;                  // CUDA_R_32F
constexpr int kLtR16F = 2;                  // CUDA_R_16F
constexpr int kLtR16BF = 14;                // CUDA_R_16BF
constexpr int kLtLayoutBatchCount = 5;      // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT (int32_t)
constexpr int kLtLayoutBatchStride = 6;     // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET (int64_t)
constexpr int kLtDescTransA = 3;            // CUBLASLT_MATMUL_DESC_TRANSA (int32_t)
constexpr int kLtDescTransB = 4;            // CUBLASLT_MATMUL_DESC_TRANSB (int32_t)
constexpr int kLtDescEpilogue = 7;          // CUBLASLT_MATMUL_DESC_EPILOGUE (uint32_t)
constexpr int kLtDescBiasPointer = 8;       // CUBLASLT_MATMUL_DESC_BIAS_POINTER (void*)
constexpr uint32_t kLtEpilogueDefault = 1;  // CUBLASLT_EPILOGUE_DEFAULT
constexpr uint32_t kLtEpilogueBias = 4;     // CUBLASLT_EPILOGUE_BIAS
constexpr int kLtPrefMaxWorkspaceBytes = 1;  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64_t)
constexpr int kLtPrefMinAlignmentA = 5;  // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES (uint32_t);
                                         // B, C, D follow as 6, 7, 8

using CublasLt = CublasLtSignatures<int, void*, void*, void*, void*, void*, int, int, int, int,
                                    LtHeuristicResult, LtAlgo, int>;

// The loaded cuBLASLt; `ok` is false (and `error` says why) when no
// libcublasLt could be opened or a function is missing.
struct LtLibrary {
  bool ok = false;
  std::string error;
  std::string library;
  CublasLt::Create create = nullptr;
  CublasLt::MatmulDescCreate desc_create = nullptr;
  CublasLt::MatmulDescSetAttribute desc_set = nullptr;
  CublasLt::MatmulDescDestroy desc_destroy = nullptr;
  CublasLt::MatrixLayoutCreate layout_create = nullptr;
  CublasLt::MatrixLayoutSetAttribute layout_set = nullptr;
  CublasLt::MatrixLayoutDestroy layout_destroy = nullptr;
  CublasLt::MatmulPreferenceCreate pref_create = nullptr;
  CublasLt::MatmulPreferenceSetAttribute pref_set = nullptr;
  CublasLt::MatmulPreferenceDestroy pref_destroy = nullptr;
  CublasLt::MatmulAlgoGetHeuristic heuristic = nullptr;
  CublasLt::Matmul matmul = nullptr;
};

// Loaded once per process (thread-safe); never throws. SHIMKIT_CUBLASLT names
// an explicit library path; SHIMKIT_CUBLASLT=0 turns cuBLASLt off (the GEMMs
// then use legacy cuBLAS).
const LtLibrary& lt_library();

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_CUBLASLT_API_H_
