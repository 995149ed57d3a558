/* A stand-in cuBLAS for CI: column-major SGEMM with plain loops, exactly the
 * BLAS contract (op, m, n, k, leading dimensions); under the handle's
 * CUBLAS_TF32_TENSOR_OP_MATH the operands are read as TF32 (fake_tf32.h).
 * FAKE_CUBLAS_IGNORE_TRANS=1
 * drops the transpose flags: the negative control for the shims' layout logic. A GEMM runs on the
 * handle's stream (fake_stream_work.h): at the call, or at each replay of a captured graph. */
#include <stdlib.h>
#include <string.h>

#include "fake_stream_work.h"
#include "fake_tf32.h"

static int ignore_trans(void) {
  const char* v = getenv("FAKE_CUBLAS_IGNORE_TRANS");
  return v != NULL && v[0] == '1';
}

enum { DEFAULT_MATH = 0, TF32_TENSOR_OP_MATH = 3 };

/* Element (i, j) of op(M) for a column-major M with leading dimension ld. */
static float at(const float* m, int ld, int trans, int i, int j, int tf32) {
  const float v = trans ? m[i * ld + j] : m[j * ld + i];
  return tf32 ? fake_tf32_round(v) : v;
}

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc, int tf32) {
  if (ignore_trans()) ta = tb = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float acc = 0;
      for (int p = 0; p < k; ++p) {
        acc += at(a, lda, ta, i, p, tf32) * at(b, ldb, tb, p, j, tf32);
      }
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

typedef struct {
  void* stream;
  int math;
} Handle;

/* One (batched) GEMM's operands, copied at the call. */
typedef struct {
  int ta, tb, m, n, k, lda, ldb, ldc, batch, tf32;
  float alpha, beta;
  const float *a, *b;
  float* c;
  long long sa, sb, sc;
} Gemm;

static void run_gemm(void* work) {
  const Gemm* g = (const Gemm*)work;
  for (int i = 0; i < g->batch; ++i) {
    gemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a + i * g->sa, g->lda, g->b + i * g->sb,
         g->ldb, g->beta, g->c + i * g->sc, g->ldc, g->tf32);
  }
}

int cublasCreate_v2(void** h) {
  *h = calloc(1, sizeof(Handle));
  return 0;
}
int cublasDestroy_v2(void* h) {
  free(h);
  return 0;
}
int cublasSetStream_v2(void* h, void* s) {
  ((Handle*)h)->stream = s;
  ++g_set_stream;
  return 0;
}
int cublasSetMathMode(void* h, int mode) {
  if (mode != DEFAULT_MATH && mode != TF32_TENSOR_OP_MATH) return 7; /* INVALID_VALUE */
  ((Handle*)h)->math = mode;
  return 0;
}
int cublasSetWorkspace_v2(void* h, void* w, size_t bytes) {
  (void)h;
  if (w == NULL || bytes == 0) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  memset(w, 0, bytes);                   /* it must really be that big */
  ++g_set_workspace;
  return 0;
}
int cublasSgemmStridedBatched(void* h, int ta, int tb, int m, int n, int k, const float* alpha,
                              const float* a, int lda, long long sa, const float* b, int ldb,
                              long long sb, const float* beta, float* c, int ldc, long long sc,
                              int batch) {
  Gemm* g = (Gemm*)malloc(sizeof(Gemm));
  const int tf32 = ((Handle*)h)->math == TF32_TENSOR_OP_MATH;
  *g = (Gemm){ta, tb, m, n, k, lda, ldb, ldc, batch, tf32, *alpha, *beta, a, b, c, sa, sb, sc};
  fake_stream_work(((Handle*)h)->stream, run_gemm, g);
  return 0;
}
int cublasSgemm_v2(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* a,
                   int lda, const float* b, int ldb, const float* beta, float* c, int ldc) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0,
                                   1);
}
