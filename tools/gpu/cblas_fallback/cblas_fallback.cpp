// Plain-loop sgemm/dgemm behind tools/gpu/cblas_fallback/cblas.h.
#include "cblas.h"

namespace {

template <typename T>
T at(const T* m, int lda, bool row_major, bool trans, int i, int j) {
  // Element (i, j) of op(M).
  if (trans) {
    const int t = i;
    i = j;
    j = t;
  }
  return row_major ? m[i * lda + j] : m[j * lda + i];
}

template <typename T>
void gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, T alpha,
          const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  const bool rm = order == CblasRowMajor;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      T acc = 0;
      for (int p = 0; p < k; ++p) {
        acc += at(a, lda, rm, ta != CblasNoTrans, i, p) * at(b, ldb, rm, tb != CblasNoTrans, p, j);
      }
      T& out = rm ? c[i * ldc + j] : c[j * ldc + i];
      out = alpha * acc + (beta == T(0) ? T(0) : beta * out);
    }
  }
}

}  // namespace

extern "C" {

void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                 float* c, int ldc) {
  gemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_dgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double* a, int lda, const double* b, int ldb, double beta,
                 double* c, int ldc) {
  gemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int openblas_get_num_threads(void) { return 1; }
void openblas_set_num_threads(int n) { (void)n; }

}  // extern "C"
