// Compiles only if every cuBLAS declaration in shims/cuda/cuda_api.h and every
// cuBLASLt declaration in shims/cuda/cublaslt_api.h matches the official
// cublas_api.h / cublasLt.h (cuBLAS 12.9), and the stand-in types and
// constants are ABI-equal. Built by tests/cuda/test_cuda_build.py with the
// headers fetched by tools/fetch_nvidia_headers.py. With -DSHIMKIT_BREAK_ONE
// it also checks one function against a wrong signature: the negative
// control, which must fail to compile.
//
// cublas_api.h declares the _v2 names the shim looks up with dlsym
// (cublasCreate_v2, ...); cublas_v2.h, which #defines the plain names to
// them, is deliberately not included.
#include <cublasLt.h>
#include <cublas_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shims/cuda/cublaslt_api.h"
#include "shims/cuda/cuda_api.h"

namespace cu = shimkit::cuda;

// Initialising a pointer of the declared type compiles only if the types are
// identical.
#define SAME(Sigs, fn, sig) [[maybe_unused]] static const Sigs::sig check_##fn = &::fn;

// --- cuBLAS (shims/cuda/cuda_api.h) ---------------------------------------

using Blas = cu::CublasSignatures<cublasStatus_t, cublasHandle_t, cudaStream_t, cublasOperation_t,
                                  cublasMath_t>;
SAME(Blas, cublasCreate_v2, Create)
SAME(Blas, cublasDestroy_v2, Destroy)
SAME(Blas, cublasSetStream_v2, SetStream)
SAME(Blas, cublasSetWorkspace_v2, SetWorkspace)
SAME(Blas, cublasSetMathMode, SetMathMode)
SAME(Blas, cublasSgemm_v2, Sgemm)
SAME(Blas, cublasSgemmStridedBatched, SgemmStridedBatched)

// The shim instantiates the signatures with int for the enums and void* for
// the handle and stream (cu::Cublas).
static_assert(std::is_pointer_v<cublasHandle_t> && sizeof(cublasHandle_t) == sizeof(void*),
              "cublasHandle_t is a pointer");
static_assert(std::is_pointer_v<cudaStream_t> && sizeof(cudaStream_t) == sizeof(cu::Stream),
              "cudaStream_t is a pointer");
static_assert(std::is_enum_v<cublasStatus_t> && sizeof(cublasStatus_t) == sizeof(int),
              "cublasStatus_t size");
static_assert(std::is_enum_v<cublasOperation_t> && sizeof(cublasOperation_t) == sizeof(int),
              "cublasOperation_t size");
static_assert(CUBLAS_STATUS_SUCCESS == 0, "CUBLAS_STATUS_SUCCESS");
static_assert(CUBLAS_OP_N == cu::kOpN, "CUBLAS_OP_N");
static_assert(CUBLAS_OP_T == cu::kOpT, "CUBLAS_OP_T");
static_assert(std::is_enum_v<cublasMath_t> && sizeof(cublasMath_t) == sizeof(int),
              "cublasMath_t size");
static_assert(CUBLAS_DEFAULT_MATH == cu::kMathDefault, "CUBLAS_DEFAULT_MATH");
static_assert(CUBLAS_TF32_TENSOR_OP_MATH == cu::kMathTf32, "CUBLAS_TF32_TENSOR_OP_MATH");

// --- cuBLASLt (shims/cuda/cublaslt_api.h) ---------------------------------

using Lt =
    cu::CublasLtSignatures<cublasStatus_t, cublasLtHandle_t, cudaStream_t, cublasLtMatmulDesc_t,
                           cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, cublasComputeType_t,
                           cudaDataType_t, cublasLtMatmulDescAttributes_t,
                           cublasLtMatmulPreferenceAttributes_t, cublasLtMatmulHeuristicResult_t,
                           cublasLtMatmulAlgo_t, cublasLtMatrixLayoutAttribute_t>;
SAME(Lt, cublasLtCreate, Create)
SAME(Lt, cublasLtMatmulDescCreate, MatmulDescCreate)
SAME(Lt, cublasLtMatmulDescSetAttribute, MatmulDescSetAttribute)
SAME(Lt, cublasLtMatmulDescDestroy, MatmulDescDestroy)
SAME(Lt, cublasLtMatrixLayoutCreate, MatrixLayoutCreate)
SAME(Lt, cublasLtMatrixLayoutSetAttribute, MatrixLayoutSetAttribute)
SAME(Lt, cublasLtMatrixLayoutDestroy, MatrixLayoutDestroy)
SAME(Lt, cublasLtMatmulPreferenceCreate, MatmulPreferenceCreate)
SAME(Lt, cublasLtMatmulPreferenceSetAttribute, MatmulPreferenceSetAttribute)
SAME(Lt, cublasLtMatmulPreferenceDestroy, MatmulPreferenceDestroy)
SAME(Lt, cublasLtMatmulAlgoGetHeuristic, MatmulAlgoGetHeuristic)
SAME(Lt, cublasLtMatmul, Matmul)
#ifdef SHIMKIT_BREAK_ONE
// A matmul-descriptor function where a matrix-layout one is declared: both
// take one opaque handle, so only the handle types tell them apart.
[[maybe_unused]] static const Lt::MatrixLayoutDestroy broken = &::cublasLtMatmulDescDestroy;
#endif

// The shim instantiates these with void* for every handle (cu::CublasLt).
static_assert(std::is_pointer_v<cublasLtHandle_t> && sizeof(cublasLtHandle_t) == sizeof(void*),
              "cublasLtHandle_t is a pointer");
static_assert(std::is_pointer_v<cublasLtMatmulDesc_t> &&
                  sizeof(cublasLtMatmulDesc_t) == sizeof(void*),
              "cublasLtMatmulDesc_t is a pointer");
static_assert(std::is_pointer_v<cublasLtMatrixLayout_t> &&
                  sizeof(cublasLtMatrixLayout_t) == sizeof(void*),
              "cublasLtMatrixLayout_t is a pointer");
static_assert(std::is_pointer_v<cublasLtMatmulPreference_t> &&
                  sizeof(cublasLtMatmulPreference_t) == sizeof(void*),
              "cublasLtMatmulPreference_t is a pointer");

// ... and with int for every enum.
template <typename E>
constexpr bool kIntSizedEnum = std::is_enum_v<E> && sizeof(E) == sizeof(int);
static_assert(kIntSizedEnum<cublasComputeType_t>, "cublasComputeType_t size");
static_assert(kIntSizedEnum<cudaDataType_t>, "cudaDataType_t size");
static_assert(kIntSizedEnum<cublasLtMatmulDescAttributes_t>, "desc attribute enum size");
static_assert(kIntSizedEnum<cublasLtMatmulPreferenceAttributes_t>, "pref attribute enum size");
static_assert(kIntSizedEnum<cublasLtEpilogue_t>, "cublasLtEpilogue_t size");
static_assert(kIntSizedEnum<cublasLtMatrixLayoutAttribute_t>, "layout attribute enum size");
static_assert(CUDA_R_16F == cu::kLtR16F && CUDA_R_16BF == cu::kLtR16BF, "CUDA_R_16F/16BF");
static_assert(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT == cu::kLtLayoutBatchCount, "BATCH_COUNT");
static_assert(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET == cu::kLtLayoutBatchStride,
              "STRIDED_BATCH_OFFSET");

// LtAlgo and LtHeuristicResult are layout-identical to the official structs
// (the heuristic fills an array of them; the algo is passed back to Matmul).
using Algo = cublasLtMatmulAlgo_t;
static_assert(sizeof(Algo) == sizeof(cu::LtAlgo), "algo size");
static_assert(alignof(Algo) == alignof(cu::LtAlgo), "algo alignment");
static_assert(offsetof(Algo, data) == offsetof(cu::LtAlgo, data), "algo.data");
static_assert(std::is_same_v<decltype(Algo::data), decltype(cu::LtAlgo::data)>, "algo.data type");

using Result = cublasLtMatmulHeuristicResult_t;
using MyResult = cu::LtHeuristicResult;
static_assert(sizeof(Result) == sizeof(MyResult), "heuristic result size");
static_assert(alignof(Result) == alignof(MyResult), "heuristic result alignment");
static_assert(offsetof(Result, algo) == offsetof(MyResult, algo), "result.algo");
static_assert(offsetof(Result, workspaceSize) == offsetof(MyResult, workspace_size),
              "result.workspaceSize");
static_assert(offsetof(Result, state) == offsetof(MyResult, state), "result.state");
static_assert(offsetof(Result, wavesCount) == offsetof(MyResult, waves_count), "result.wavesCount");
static_assert(offsetof(Result, reserved) == offsetof(MyResult, reserved), "result.reserved");
static_assert(std::is_same_v<decltype(Result::workspaceSize), decltype(MyResult::workspace_size)>,
              "result.workspaceSize type");
static_assert(sizeof(Result::state) == sizeof(MyResult::state), "result.state size");
static_assert(std::is_same_v<decltype(Result::wavesCount), decltype(MyResult::waves_count)>,
              "result.wavesCount type");
static_assert(std::is_same_v<decltype(Result::reserved), decltype(MyResult::reserved)>,
              "result.reserved type");

static_assert(CUBLAS_COMPUTE_32F == cu::kLtCompute32F, "CUBLAS_COMPUTE_32F");
static_assert(CUBLAS_COMPUTE_32F_FAST_TF32 == cu::kLtCompute32FFastTF32,
              "CUBLAS_COMPUTE_32F_FAST_TF32");
static_assert(CUDA_R_32F == cu::kLtR32F, "CUDA_R_32F");
static_assert(CUBLASLT_MATMUL_DESC_TRANSA == cu::kLtDescTransA, "CUBLASLT_MATMUL_DESC_TRANSA");
static_assert(CUBLASLT_MATMUL_DESC_TRANSB == cu::kLtDescTransB, "CUBLASLT_MATMUL_DESC_TRANSB");
static_assert(CUBLASLT_MATMUL_DESC_EPILOGUE == cu::kLtDescEpilogue,
              "CUBLASLT_MATMUL_DESC_EPILOGUE");
static_assert(CUBLASLT_MATMUL_DESC_BIAS_POINTER == cu::kLtDescBiasPointer,
              "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
static_assert(CUBLASLT_EPILOGUE_DEFAULT == cu::kLtEpilogueDefault, "CUBLASLT_EPILOGUE_DEFAULT");
static_assert(CUBLASLT_EPILOGUE_BIAS == cu::kLtEpilogueBias, "CUBLASLT_EPILOGUE_BIAS");
static_assert(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES == cu::kLtPrefMaxWorkspaceBytes,
              "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
