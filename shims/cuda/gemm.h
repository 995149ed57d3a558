// GEMMs on the GPU for the CUDA fallback ops (mm, addmm, bmm): float32,
// float16 and bfloat16 data with float32 arithmetic (TF32 for float32 data
// when math_mode.h allows it for matmuls) on cuBLASLt first
// (better kernels for small-batch shapes, bias folded into the GEMM, strided
// batches), legacy cuBLAS for float32 when cuBLASLt is absent or declines;
// both dlopen'd. Row-major tensors are handled by the transpose trick: cuBLAS
// computes the column-major C^T = B^T A^T, which is row-major C.
#ifndef SHIMKIT_SHIMS_CUDA_GEMM_H_
#define SHIMKIT_SHIMS_CUDA_GEMM_H_

#include <cstdint>

#include "shims/slim_tensor.h"

namespace shimkit {
namespace cuda {

// A matrix cuBLAS reads in place: row-major (inner stride 1) or
// column-major (outer stride 1), with a leading dimension >= its extent.
struct Operand {
  bool ok = false;
  int op = 0;  // CUBLAS_OP_N / _T, applied to the column-major view
  int ld = 1;
};

// `rows` x `cols` at strides (rs, cs), as the column-major matrix cuBLAS
// sees for a row-major product.
Operand operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// Throws ShimError("<what> failed with cuBLAS status N") unless status is 0.
void check_blas(int status, const char* what);

// The calling thread's cuBLAS handle for `device_index`, bound to the
// device's current stream (and to a workspace of ours).
void* blas_handle(int32_t device_index);

// out[M,N] = alpha * a[M,K] @ b[K,N] + beta * out + bias_scale * bias[N]
// (broadcast over rows; no bias when `bias` is null; the bias has out's
// dtype); matrices of one dtype (float32, float16, bfloat16) on out's device.
// Returns false, with nothing done, when a layout is not one cuBLAS reads in
// place, or no library takes the dtype.
bool gemm(const SlimTensor& out, const SlimTensor& a, const SlimTensor& b, float alpha, float beta,
          const void* bias = nullptr, float bias_scale = 1.0f);

// out[B,M,N] = a[B,M,K] @ b[B,K,N] (strided batch), like gemm otherwise.
bool bmm(const SlimTensor& out, const SlimTensor& a, const SlimTensor& b);

// How many GEMMs ran on cuBLASLt and on legacy cuBLAS (process-wide).
int64_t gemm_count(bool on_lt);

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_GEMM_H_
