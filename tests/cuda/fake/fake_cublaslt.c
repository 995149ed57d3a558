/* A stand-in cuBLASLt for CI (no GPU): column-major D = alpha op(A) op(B) +
 * beta C (+ bias per row of D with the bias epilogue), for float32, float16
 * and bfloat16 data (float32 arithmetic, results rounded to D's type;
 * CUBLAS_COMPUTE_32F_FAST_TF32, for float32 data only, reads the operands as
 * TF32: fake_tf32.h) and strided batches, plain loops over host memory. Strict where a wrong call
 * would hide: layouts must agree with the op flags and with each other's
 * data type and batch, only the algorithm its heuristic returned runs, and
 * the workspace must be the size that algorithm asked for.
 *
 * FAKE_CUBLASLT_IGNORE_BIAS=1 drops the epilogue's bias,
 * FAKE_CUBLASLT_IGNORE_TRANS=1 the op flags, and FAKE_CUBLASLT_BF16_AS_F16=1
 * reads bfloat16 data as float16 (negative controls for the shims' logic); FAKE_CUBLASLT_REFUSE=1
 * offers no algorithm (the shims must fall back to legacy cuBLAS). fake_cublaslt_counter() counts
 * calls. A matmul runs on its stream (fake_stream_work.h): at the call, or at each replay of a
 * captured graph. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_stream_work.h"
#include "fake_tf32.h"

enum { OK = 0, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };
enum { TRANSA = 3, TRANSB = 4, EPILOGUE = 7, BIAS_POINTER = 8 };
enum { EPILOGUE_DEFAULT = 1, EPILOGUE_BIAS = 4 };
enum { MAX_WORKSPACE = 1, ALIGN_A = 5 };
#define ALGO_TAG 0x5eedULL
#define SLOW_TAG 0x510eULL /* FAKE_CUBLASLT_TWO_ALGOS=1: ranked first, 2 ms a call */
#define WORKSPACE 1024

typedef struct {
  uint64_t data[8];
} Algo;
typedef struct {
  Algo algo;
  size_t workspace_size;
  int state;
  float waves;
  int reserved[4];
} Result;
enum { COMPUTE_32F = 68, COMPUTE_32F_FAST_TF32 = 77 };

typedef struct {
  int compute;
  int32_t ta, tb;
  uint32_t epilogue;
  const void* bias;
} Desc;
typedef struct {
  uint64_t rows, cols;
  int64_t ld;
  int type;
  int32_t batch;
  int64_t batch_stride;
} Layout;

enum { R_32F = 0, R_16F = 2, R_16BF = 14, BATCH_COUNT = 5, BATCH_STRIDE = 6 };

static int env_on(const char* name);

static float load(const void* m, int type, int64_t i) {
  if (type == R_16F || (type == R_16BF && env_on("FAKE_CUBLASLT_BF16_AS_F16"))) {
    return (float)((const _Float16*)m)[i];
  }
  if (type == R_16BF) {
    uint32_t bits = (uint32_t)((const uint16_t*)m)[i] << 16;
    float v;
    memcpy(&v, &bits, 4);
    return v;
  }
  return ((const float*)m)[i];
}

static void store(void* m, int type, int64_t i, float v) {
  if (type == R_16F) {
    ((_Float16*)m)[i] = (_Float16)v;
  } else if (type == R_16BF) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u); /* round to nearest even */
    ((uint16_t*)m)[i] = (uint16_t)(bits >> 16);
  } else {
    ((float*)m)[i] = v;
  }
}
typedef struct {
  uint64_t max_workspace;
  uint32_t align[4];
} Pref;

static long g_matmuls = 0, g_heuristics = 0, g_slow = 0;

long fake_cublaslt_counter(const char* name) {
  if (strcmp(name, "matmul") == 0) return g_matmuls;
  if (strcmp(name, "heuristic") == 0) return g_heuristics;
  if (strcmp(name, "matmul_slow") == 0) return g_slow;
  return -1;
}

static int env_on(const char* name) {
  const char* v = getenv(name);
  return v != NULL && v[0] == '1';
}

int cublasLtCreate(void** h) {
  *h = malloc(1);
  return OK;
}

int cublasLtMatmulDescCreate(void** d, int compute, int scale) {
  if ((compute != COMPUTE_32F && compute != COMPUTE_32F_FAST_TF32) || scale != R_32F) {
    return INVALID_VALUE;
  }
  Desc* desc = (Desc*)calloc(1, sizeof(Desc));
  desc->compute = compute;
  desc->epilogue = EPILOGUE_DEFAULT;
  *d = desc;
  return OK;
}
int cublasLtMatmulDescDestroy(void* d) {
  free(d);
  return OK;
}
int cublasLtMatmulDescSetAttribute(void* d, int attr, const void* buf, size_t size) {
  Desc* desc = (Desc*)d;
  switch (attr) {
    case TRANSA:
      if (size != 4) return INVALID_VALUE;
      memcpy(&desc->ta, buf, 4);
      return OK;
    case TRANSB:
      if (size != 4) return INVALID_VALUE;
      memcpy(&desc->tb, buf, 4);
      return OK;
    case EPILOGUE:
      if (size != 4) return INVALID_VALUE;
      memcpy(&desc->epilogue, buf, 4);
      return OK;
    case BIAS_POINTER:
      if (size != sizeof(void*)) return INVALID_VALUE;
      memcpy(&desc->bias, buf, sizeof(void*));
      return OK;
    default:
      return INVALID_VALUE;
  }
}

int cublasLtMatrixLayoutCreate(void** l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if ((type != R_32F && type != R_16F && type != R_16BF) || ld < (int64_t)rows || ld < 1) {
    return INVALID_VALUE;
  }
  Layout* layout = (Layout*)calloc(1, sizeof(Layout));
  layout->rows = rows;
  layout->cols = cols;
  layout->ld = ld;
  layout->type = type;
  layout->batch = 1;
  *l = layout;
  return OK;
}
int cublasLtMatrixLayoutSetAttribute(void* l, int attr, const void* buf, size_t size) {
  Layout* layout = (Layout*)l;
  if (attr == BATCH_COUNT && size == 4) {
    memcpy(&layout->batch, buf, 4);
    return layout->batch >= 1 ? OK : INVALID_VALUE;
  }
  if (attr == BATCH_STRIDE && size == 8) {
    memcpy(&layout->batch_stride, buf, 8);
    return OK;
  }
  return INVALID_VALUE;
}
int cublasLtMatrixLayoutDestroy(void* l) {
  free(l);
  return OK;
}

int cublasLtMatmulPreferenceCreate(void** p) {
  *p = calloc(1, sizeof(Pref));
  return OK;
}
int cublasLtMatmulPreferenceDestroy(void* p) {
  free(p);
  return OK;
}
int cublasLtMatmulPreferenceSetAttribute(void* p, int attr, const void* buf, size_t size) {
  Pref* pref = (Pref*)p;
  if (attr == MAX_WORKSPACE && size == 8) {
    memcpy(&pref->max_workspace, buf, 8);
    return OK;
  }
  if (attr >= ALIGN_A && attr < ALIGN_A + 4 && size == 4) {
    memcpy(&pref->align[attr - ALIGN_A], buf, 4);
    return OK;
  }
  return INVALID_VALUE;
}

/* op(X) is rows x cols of the product; the stored layout is its transpose when trans. */
static int op_dims(const Layout* l, int trans, uint64_t* rows, uint64_t* cols) {
  *rows = trans ? l->cols : l->rows;
  *cols = trans ? l->rows : l->cols;
  return 1;
}

static int shapes_agree(const Desc* d, const Layout* a, const Layout* b, const Layout* c) {
  uint64_t ar, ac, br, bc;
  op_dims(a, d->ta, &ar, &ac);
  op_dims(b, d->tb, &br, &bc);
  return ac == br && ar == c->rows && bc == c->cols && a->type == c->type && b->type == c->type &&
         a->batch == c->batch && b->batch == c->batch;
}

int cublasLtMatmulAlgoGetHeuristic(void* h, void* desc, void* a, void* b, void* c, void* d,
                                   void* pref, int requested, Result* results, int* found) {
  (void)h;
  ++g_heuristics;
  *found = 0;
  if (env_on("FAKE_CUBLASLT_REFUSE")) return NOT_SUPPORTED;
  const Layout* lc = (const Layout*)c;
  const Layout* ld = (const Layout*)d;
  if (requested < 1 || lc->rows != ld->rows || lc->cols != ld->cols) return INVALID_VALUE;
  if (!shapes_agree((const Desc*)desc, (const Layout*)a, (const Layout*)b, lc)) {
    return INVALID_VALUE;
  }
  if (((const Pref*)pref)->max_workspace < WORKSPACE) return NOT_SUPPORTED;
  if (((const Desc*)desc)->compute == COMPUTE_32F_FAST_TF32 && lc->type != R_32F) {
    return NOT_SUPPORTED;
  }
  const int two = env_on("FAKE_CUBLASLT_TWO_ALGOS") && requested >= 2;
  memset(results, 0, (two ? 2 : 1) * sizeof(Result));
  results[0].algo.data[0] = two ? SLOW_TAG : ALGO_TAG;
  results[0].workspace_size = WORKSPACE;
  if (two) {
    results[1].algo.data[0] = ALGO_TAG;
    results[1].workspace_size = WORKSPACE;
  }
  *found = two ? 2 : 1;
  return OK;
}

static float at(const void* m, const Layout* l, int64_t batch, int trans, uint64_t i, uint64_t j,
                int tf32) {
  const int64_t base = batch * l->batch_stride;
  const float v = load(m, l->type, base + (int64_t)(trans ? i * l->ld + j : j * l->ld + i));
  return tf32 ? fake_tf32_round(v) : v;
}

/* One matmul's operands, copied at the call (fake_stream_work.h). */
typedef struct {
  Desc desc;
  Layout la, lb, lc;
  float alpha, beta;
  const void *A, *B, *C;
  void* D;
  void* workspace;
  int slow;
} Matmul;

static void run_matmul(void* work) {
  const Matmul* m = (const Matmul*)work;
  const Layout *la = &m->la, *lb = &m->lb, *lc = &m->lc;
  if (m->slow) {
    ++g_slow;
    usleep(2000);
  }
  memset(m->workspace, 0xab, WORKSPACE); /* it must really be that big */
  const int ignore_trans = env_on("FAKE_CUBLASLT_IGNORE_TRANS");
  const int ta = ignore_trans ? 0 : m->desc.ta, tb = ignore_trans ? 0 : m->desc.tb;
  const uint64_t k = ta ? la->rows : la->cols;
  const int with_bias = m->desc.epilogue == EPILOGUE_BIAS && !env_on("FAKE_CUBLASLT_IGNORE_BIAS");
  const int tf32 = m->desc.compute == COMPUTE_32F_FAST_TF32;
  for (int64_t batch = 0; batch < lc->batch; ++batch) {
    const int64_t base = batch * lc->batch_stride;
    for (uint64_t j = 0; j < lc->cols; ++j) {
      for (uint64_t i = 0; i < lc->rows; ++i) {
        float acc = 0;
        for (uint64_t p = 0; p < k; ++p) {
          acc += at(m->A, la, batch, ta, i, p, tf32) * at(m->B, lb, batch, tb, p, j, tf32);
        }
        const int64_t index = base + (int64_t)(j * lc->ld + i);
        float v = m->alpha * acc;
        if (m->beta != 0.0f) v += m->beta * load(m->C, lc->type, index);
        if (with_bias) v += load(m->desc.bias, lc->type, (int64_t)i); /* bias of D's type */
        store(m->D, lc->type, index, v);
      }
    }
  }
}

int cublasLtMatmul(void* h, void* desc, const void* alpha, const void* A, void* adesc,
                   const void* B, void* bdesc, const void* beta, const void* C, void* cdesc,
                   void* D, void* ddesc, const Algo* algo, void* workspace, size_t ws_size,
                   void* stream) {
  (void)h, (void)ddesc;
  const Desc* d = (const Desc*)desc;
  const Layout *la = (const Layout*)adesc, *lb = (const Layout*)bdesc, *lc = (const Layout*)cdesc;
  if (algo == NULL || (algo->data[0] != ALGO_TAG && algo->data[0] != SLOW_TAG)) {
    return INVALID_VALUE;
  }
  if (workspace == NULL || ws_size < WORKSPACE) return INVALID_VALUE;
  if (!shapes_agree(d, la, lb, lc)) return INVALID_VALUE;
  if (d->epilogue == EPILOGUE_BIAS && d->bias == NULL) return INVALID_VALUE;
  ++g_matmuls;
  Matmul* m = (Matmul*)malloc(sizeof(Matmul));
  *m = (Matmul){*d, *la, *lb, *lc,       *(const float*)alpha,     *(const float*)beta, A,
                B,  C,   D,   workspace, algo->data[0] == SLOW_TAG};
  fake_stream_work(stream, run_matmul, m);
  return OK;
}
