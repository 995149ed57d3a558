// The slice of the CBLAS interface the CPU shims use, for machines without
// OpenBLAS (the GPU image): plain loops, used only by host fallbacks.
#ifndef SHIMKIT_TOOLS_GPU_CBLAS_FALLBACK_CBLAS_H_
#define SHIMKIT_TOOLS_GPU_CBLAS_FALLBACK_CBLAS_H_

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };
typedef enum CBLAS_ORDER CBLAS_LAYOUT;

#ifdef __cplusplus
extern "C" {
#endif

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                 int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc);
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                 int n, int k, double alpha, const double* a, int lda, const double* b, int ldb,
                 double beta, double* c, int ldc);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

#ifdef __cplusplus
}
#endif

#endif  // SHIMKIT_TOOLS_GPU_CBLAS_FALLBACK_CBLAS_H_
