/* A stand-in cuBLAS for CI: column-major SGEMM with plain loops, exactly the
 * BLAS contract (op, m, n, k, leading dimensions). FAKE_CUBLAS_IGNORE_TRANS=1
 * drops the transpose flags: the negative control for the shims' layout logic. */
#include <stdlib.h>
#include <string.h>

static int ignore_trans(void) {
  const char* v = getenv("FAKE_CUBLAS_IGNORE_TRANS");
  return v != NULL && v[0] == '1';
}

/* Element (i, j) of op(M) for a column-major M with leading dimension ld. */
static float at(const float* m, int ld, int trans, int i, int j) {
  return trans ? m[i * ld + j] : m[j * ld + i];
}

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  if (ignore_trans()) ta = tb = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float acc = 0;
      for (int p = 0; p < k; ++p) acc += at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
      float* out = &c[j * ldc + i];
      *out = alpha * acc + (beta == 0.0f ? 0.0f : beta * *out);
    }
  }
}

static long g_set_stream = 0, g_set_workspace = 0;

long fake_cublas_counter(const char* name) {
  if (strcmp(name, "set_stream") == 0) return g_set_stream;
  if (strcmp(name, "set_workspace") == 0) return g_set_workspace;
  return -1;
}

int cublasCreate_v2(void** h) {
  *h = malloc(1);
  return 0;
}
int cublasDestroy_v2(void* h) {
  free(h);
  return 0;
}
int cublasSetStream_v2(void* h, void* s) {
  (void)h;
  (void)s;
  ++g_set_stream;
  return 0;
}
int cublasSetWorkspace_v2(void* h, void* w, size_t bytes) {
  (void)h;
  if (w == NULL || bytes == 0) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  memset(w, 0, bytes);                   /* it must really be that big */
  ++g_set_workspace;
  return 0;
}
int cublasSgemm_v2(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* a,
                   int lda, const float* b, int ldb, const float* beta, float* c, int ldc) {
  (void)h;
  gemm(ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
  return 0;
}
int cublasSgemmStridedBatched(void* h, int ta, int tb, int m, int n, int k, const float* alpha,
                              const float* a, int lda, long long sa, const float* b, int ldb,
                              long long sb, const float* beta, float* c, int ldc, long long sc,
                              int batch) {
  (void)h;
  for (int i = 0; i < batch; ++i) {
    gemm(ta, tb, m, n, k, *alpha, a + i * sa, lda, b + i * sb, ldb, *beta, c + i * sc, ldc);
  }
  return 0;
}
