/* A stand-in cuDNN for CI (no GPU): the legacy forward and backward-data
 * convolution API and the backend ("graph") API's convolution (forward and
 * backward data: what a transposed convolution runs as) over host memory,
 * with plain loops.
 * It keeps cuDNN's contract strictly enough to catch a wrong call: the output
 * descriptor must have the shape the convolution gives, the workspace must be
 * the size it asked for, filters are read in the format (legacy) or with the
 * strides (graph) the descriptor names, and only the algorithm it ranked
 * first among the float32 ones runs.
 *
 * The graph API offers two engines, ranked: engine 0 uses "tensor cores"
 * (numerical note TENSOR_CORE; it rounds its inputs to TF32, as a GPU would)
 * and needs no workspace; engine 1 is true float32 with a 2048-byte
 * workspace. Both decline (at plan finalization) a filter whose layout is not
 * the input's (NCHW or NHWC, dense). FAKE_CUDNN_SLOW_FIRST=1 adds a third,
 * ranked last: true float32 like engine 1, which then sleeps 2 ms per run
 * (what the shims' timing of engines must see through).
 *
 * FAKE_CUDNN_IGNORE_FORMAT=1 reads every filter as dense NCHW (the negative
 * control for the shims' layout logic); FAKE_CUDNN_REFUSE=1 offers no algorithm and
 * no engine (the shims must fall back to the host); FAKE_CUDNN_GRAPH_REFUSE=1
 * offers no engine (the legacy API must take over). fake_cudnn_counter()
 * counts calls. Convolutions and tensor ops run on the handle's stream
 * (fake_stream_work.h): at the call, or at each replay of a captured graph. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_stream_work.h"
#include "fake_tf32.h"

enum { OK = 0, BAD_PARAM = 2000, NOT_SUPPORTED = 3000 };
enum { NCHW = 0, NHWC = 1 };
enum { FMA_ALGO = 1, TF32_ALGO = 6, WORKSPACE = 4096 };
/* cudnnConvolutionBwdDataAlgo_t: ALGO_1 and WINOGRAD_NONFUSED. */
enum { BWD_FMA_ALGO = 1, BWD_TF32_ALGO = 5 };

typedef struct {
  int algo, status;
  float time;
  size_t memory;
  int determinism, math_type, reserved[3];
} Perf;
typedef struct {
  int nb, dims[8], strides[8];
} Tensor;
typedef struct {
  int format, dims[4];
} Filter;
typedef struct {
  int pad[2], stride[2], dilation[2], mode, groups, math;
} Conv;

static long g_forward = 0, g_backward_data = 0, g_add = 0, g_plans = 0, g_set_stream = 0,
            g_transform = 0;
static long g_heuristics = 0, g_exec_plans = 0, g_packs = 0, g_executes = 0, g_tf32_runs = 0;
static long g_live = 0; /* backend descriptors not destroyed */
static long g_slow_runs = 0;

long fake_cudnn_counter(const char* name) {
  if (strcmp(name, "forward") == 0) return g_forward;
  if (strcmp(name, "backward_data") == 0) return g_backward_data;
  if (strcmp(name, "add") == 0) return g_add;
  if (strcmp(name, "plan") == 0) return g_plans;
  if (strcmp(name, "set_stream") == 0) return g_set_stream;
  if (strcmp(name, "transform") == 0) return g_transform;
  if (strcmp(name, "heuristics") == 0) return g_heuristics;
  if (strcmp(name, "exec_plans") == 0) return g_exec_plans;
  if (strcmp(name, "variant_packs") == 0) return g_packs;
  if (strcmp(name, "executes") == 0) return g_executes;
  if (strcmp(name, "tf32_runs") == 0) return g_tf32_runs;
  if (strcmp(name, "live_descriptors") == 0) return g_live;
  if (strcmp(name, "slow_runs") == 0) return g_slow_runs;
  return -1;
}

static int env_on(const char* name) {
  const char* v = getenv(name);
  return v != NULL && v[0] == '1';
}

size_t cudnnGetVersion(void) { return 90000; }
const char* cudnnGetErrorString(int status) {
  return status == OK ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_FAKE_ERROR";
}
typedef struct {
  void* stream;
} Handle;

int cudnnCreate(void** handle) {
  *handle = calloc(1, sizeof(Handle));
  return OK;
}
int cudnnSetStream(void* handle, void* stream) {
  ((Handle*)handle)->stream = stream;
  ++g_set_stream;
  return OK;
}

int cudnnCreateTensorDescriptor(void** d) {
  *d = calloc(1, sizeof(Tensor));
  return OK;
}
int cudnnDestroyTensorDescriptor(void* d) {
  free(d);
  return OK;
}
int cudnnSetTensorNdDescriptor(void* d, int dtype, int nb, const int dims[], const int strides[]) {
  Tensor* t = (Tensor*)d;
  if (dtype != 0 || nb < 3 || nb > 8) return BAD_PARAM;
  t->nb = nb;
  for (int i = 0; i < nb; ++i) {
    if (dims[i] <= 0 || strides[i] <= 0) return BAD_PARAM;
    t->dims[i] = dims[i];
    t->strides[i] = strides[i];
  }
  return OK;
}

int cudnnCreateFilterDescriptor(void** d) {
  *d = calloc(1, sizeof(Filter));
  return OK;
}
int cudnnDestroyFilterDescriptor(void* d) {
  free(d);
  return OK;
}
int cudnnSetFilterNdDescriptor(void* d, int dtype, int format, int nb, const int dims[]) {
  Filter* f = (Filter*)d;
  if (dtype != 0 || nb != 4 || (format != NCHW && format != NHWC)) return BAD_PARAM;
  f->format = format;
  memcpy(f->dims, dims, sizeof(f->dims));
  return OK;
}

int cudnnCreateConvolutionDescriptor(void** d) {
  Conv* c = (Conv*)calloc(1, sizeof(Conv));
  c->groups = 1;
  *d = c;
  return OK;
}
int cudnnDestroyConvolutionDescriptor(void* d) {
  free(d);
  return OK;
}
int cudnnSetConvolutionNdDescriptor(void* d, int n, const int pad[], const int stride[],
                                    const int dilation[], int mode, int dtype) {
  Conv* c = (Conv*)d;
  if (n != 2 || dtype != 0) return BAD_PARAM;
  for (int i = 0; i < 2; ++i) {
    if (pad[i] < 0 || stride[i] <= 0 || dilation[i] <= 0) return BAD_PARAM;
    c->pad[i] = pad[i];
    c->stride[i] = stride[i];
    c->dilation[i] = dilation[i];
  }
  c->mode = mode;
  return OK;
}
int cudnnSetConvolutionGroupCount(void* d, int groups) {
  if (groups <= 0) return BAD_PARAM;
  ((Conv*)d)->groups = groups;
  return OK;
}
int cudnnSetConvolutionMathType(void* d, int math) {
  ((Conv*)d)->math = math;
  return OK;
}

/* The output shape the convolution gives must be what `y` describes. */
static int shapes_agree(const Tensor* x, const Filter* w, const Conv* c, const Tensor* y) {
  if (x->nb != 4 || y->nb != 4) return 0;
  if (x->dims[1] != w->dims[1] * c->groups || w->dims[0] % c->groups != 0) return 0;
  if (y->dims[0] != x->dims[0] || y->dims[1] != w->dims[0]) return 0;
  for (int i = 0; i < 2; ++i) {
    const int in = x->dims[2 + i], k = w->dims[2 + i];
    const int out = (in + 2 * c->pad[i] - c->dilation[i] * (k - 1) - 1) / c->stride[i] + 1;
    if (y->dims[2 + i] != out) return 0;
  }
  return 1;
}

int cudnnGetConvolutionForwardAlgorithm_v7(void* h, const void* x, const void* w, const void* c,
                                           const void* y, const int requested, int* returned,
                                           Perf* perf) {
  (void)h;
  ++g_plans;
  if (env_on("FAKE_CUDNN_REFUSE")) return NOT_SUPPORTED;
  if (!shapes_agree((const Tensor*)x, (const Filter*)w, (const Conv*)c, (const Tensor*)y)) {
    return BAD_PARAM;
  }
  if (requested < 2) return BAD_PARAM;
  /* A TF32 algorithm ranked first, as real cuDNN may: the shims must skip it
   * (and may take it only with CUDNN_TENSOR_OP_MATH). */
  memset(perf, 0, 2 * sizeof(Perf));
  perf[0].algo = TF32_ALGO;
  perf[0].math_type = 1; /* CUDNN_TENSOR_OP_MATH */
  perf[1].algo = FMA_ALGO;
  perf[1].memory = WORKSPACE;
  perf[1].math_type = 3; /* CUDNN_FMA_MATH */
  *returned = 2;
  return OK;
}

int cudnnGetConvolutionForwardWorkspaceSize(void* h, const void* x, const void* w, const void* c,
                                            const void* y, int algo, size_t* size) {
  (void)h, (void)x, (void)w, (void)c, (void)y;
  *size = algo == FMA_ALGO ? WORKSPACE : 0;
  return OK;
}

/* The geometry of one direct convolution: 4-D sizes and element strides of
 * x, w (OIHW indexing) and y, and the convolution's parameters. */
typedef struct {
  long xd[4], xs[4], wd[4], ws[4], yd[4], ys[4];
  long pad[2], stride[2], dilation[2];
} Direct;

/* y = alpha * conv(x, w) + beta * y, rounding the inputs to TF32 when asked
 * (what a tensor core computes). Groups are the input channels over the
 * filter's; FAKE_CUDNN_IGNORE_FORMAT=1 reads every filter as dense OIHW. */
static void direct_conv(const Direct* d, const float* x, const float* w, float* y, float alpha,
                        float beta, int as_tf32) {
  long ws[4] = {d->ws[0], d->ws[1], d->ws[2], d->ws[3]};
  if (env_on("FAKE_CUDNN_IGNORE_FORMAT")) {
    ws[3] = 1, ws[2] = d->wd[3], ws[1] = ws[2] * d->wd[2], ws[0] = ws[1] * d->wd[1];
  }
  const long cg = d->wd[1], groups = d->xd[1] / cg, kg = d->wd[0] / groups;
  for (long n = 0; n < d->yd[0]; ++n)
    for (long k = 0; k < d->yd[1]; ++k)
      for (long oy = 0; oy < d->yd[2]; ++oy)
        for (long ox = 0; ox < d->yd[3]; ++ox) {
          const long g = k / kg;
          float acc = 0;
          for (long ch = 0; ch < cg; ++ch)
            for (long r = 0; r < d->wd[2]; ++r)
              for (long s = 0; s < d->wd[3]; ++s) {
                const long iy = oy * d->stride[0] - d->pad[0] + r * d->dilation[0];
                const long ix = ox * d->stride[1] - d->pad[1] + s * d->dilation[1];
                if (iy < 0 || iy >= d->xd[2] || ix < 0 || ix >= d->xd[3]) continue;
                const float xv =
                    x[n * d->xs[0] + (g * cg + ch) * d->xs[1] + iy * d->xs[2] + ix * d->xs[3]];
                const float wv = w[k * ws[0] + ch * ws[1] + r * ws[2] + s * ws[3]];
                acc += as_tf32 ? fake_tf32_round(xv) * fake_tf32_round(wv) : xv * wv;
              }
          float* out = &y[n * d->ys[0] + k * d->ys[1] + oy * d->ys[2] + ox * d->ys[3]];
          *out = alpha * acc + (beta == 0.0f ? 0.0f : beta * *out);
        }
}

/* The weight's element strides in the filter's format (filters have a format,
 * not strides: NCHW reads OIHW, NHWC reads OHWI), and the geometry of the
 * forward convolution x -> y. */
static Direct legacy_direct(const Tensor* x, const Filter* f, const Conv* c, const Tensor* y) {
  const long C = f->dims[1], R = f->dims[2], S = f->dims[3];
  Direct d = {.ws = {C * R * S, R * S, S, 1}};
  if (f->format == NHWC) d.ws[0] = R * S * C, d.ws[1] = 1, d.ws[2] = S * C, d.ws[3] = C;
  for (int i = 0; i < 4; ++i) {
    d.xd[i] = x->dims[i], d.xs[i] = x->strides[i], d.wd[i] = f->dims[i];
    d.yd[i] = y->dims[i], d.ys[i] = y->strides[i];
  }
  for (int i = 0; i < 2; ++i)
    d.pad[i] = c->pad[i], d.stride[i] = c->stride[i], d.dilation[i] = c->dilation[i];
  return d;
}

/* dx = alpha * conv_backward_data(dy, w) + beta * dx: the gradient of the
 * forward convolution dx -> dy with respect to its input, gathered per dx
 * element (a transposed convolution of dy). */
static void direct_conv_backward_data(const Direct* d, const float* dy, const float* w, float* dx,
                                      float alpha, float beta, int as_tf32) {
  long ws[4] = {d->ws[0], d->ws[1], d->ws[2], d->ws[3]};
  if (env_on("FAKE_CUDNN_IGNORE_FORMAT")) {
    ws[3] = 1, ws[2] = d->wd[3], ws[1] = ws[2] * d->wd[2], ws[0] = ws[1] * d->wd[1];
  }
  const long cg = d->wd[1], groups = d->xd[1] / cg, kg = d->wd[0] / groups;
  for (long n = 0; n < d->xd[0]; ++n)
    for (long c = 0; c < d->xd[1]; ++c)
      for (long iy = 0; iy < d->xd[2]; ++iy)
        for (long ix = 0; ix < d->xd[3]; ++ix) {
          const long g = c / cg, ch = c % cg;
          float acc = 0;
          for (long k = g * kg; k < (g + 1) * kg; ++k)
            for (long r = 0; r < d->wd[2]; ++r)
              for (long s = 0; s < d->wd[3]; ++s) {
                const long ty = iy + d->pad[0] - r * d->dilation[0];
                const long tx = ix + d->pad[1] - s * d->dilation[1];
                if (ty < 0 || tx < 0 || ty % d->stride[0] != 0 || tx % d->stride[1] != 0) continue;
                const long oy = ty / d->stride[0], ox = tx / d->stride[1];
                if (oy >= d->yd[2] || ox >= d->yd[3]) continue;
                const float yv = dy[n * d->ys[0] + k * d->ys[1] + oy * d->ys[2] + ox * d->ys[3]];
                const float wv = w[k * ws[0] + ch * ws[1] + r * ws[2] + s * ws[3]];
                acc += as_tf32 ? fake_tf32_round(yv) * fake_tf32_round(wv) : yv * wv;
              }
          float* out = &dx[n * d->xs[0] + c * d->xs[1] + iy * d->xs[2] + ix * d->xs[3]];
          *out = alpha * acc + (beta == 0.0f ? 0.0f : beta * *out);
        }
}

/* One convolution's operands, copied at the call: forward (x -> y) or
 * backward data (dy -> dx, in `in` -> `out`). */
typedef struct {
  Direct d;
  const float *in, *w;
  float* out;
  float alpha, beta;
  int as_tf32, backward_data, slow;
  void* workspace; /* filled at each run (it must really be that big) */
  size_t workspace_fill;
  int fill;
} ConvWork;

static void run_conv(void* work) {
  const ConvWork* c = (const ConvWork*)work;
  if (c->workspace != NULL) memset(c->workspace, c->fill, c->workspace_fill);
  if (c->slow) {
    ++g_slow_runs;
    usleep(2000);
  }
  if (c->backward_data) {
    direct_conv_backward_data(&c->d, c->in, c->w, c->out, c->alpha, c->beta, c->as_tf32);
  } else {
    direct_conv(&c->d, c->in, c->w, c->out, c->alpha, c->beta, c->as_tf32);
  }
}

static void enqueue_conv(void* handle, ConvWork conv) {
  ConvWork* work = (ConvWork*)malloc(sizeof(ConvWork));
  *work = conv;
  fake_stream_work(((Handle*)handle)->stream, run_conv, work);
}

int cudnnConvolutionForward(void* h, const void* alpha, const void* xd, const void* x,
                            const void* wd, const void* w, const void* cd, int algo,
                            void* workspace, size_t workspace_size, const void* beta,
                            const void* yd, void* y) {
  const Tensor* xt = (const Tensor*)xd;
  const Tensor* yt = (const Tensor*)yd;
  const Filter* f = (const Filter*)wd;
  const Conv* c = (const Conv*)cd;
  if (!((algo == FMA_ALGO && c->math == 3) || (algo == TF32_ALGO && c->math == 1))) {
    return NOT_SUPPORTED;
  }
  if (algo == FMA_ALGO && (workspace == NULL || workspace_size < WORKSPACE)) return BAD_PARAM;
  if (c->mode != 1 || !shapes_agree(xt, f, c, yt)) return BAD_PARAM;
  ++g_forward;
  if (algo == TF32_ALGO) ++g_tf32_runs;
  enqueue_conv(h,
               (ConvWork){legacy_direct(xt, f, c, yt), (const float*)x, (const float*)w, (float*)y,
                          *(const float*)alpha, *(const float*)beta, algo == TF32_ALGO, 0, 0,
                          algo == FMA_ALGO ? workspace : NULL, WORKSPACE, 0xab});
  return OK;
}

int cudnnGetConvolutionBackwardDataAlgorithm_v7(void* h, const void* w, const void* dy,
                                                const void* c, const void* dx, const int requested,
                                                int* returned, Perf* perf) {
  (void)h;
  ++g_plans;
  if (env_on("FAKE_CUDNN_REFUSE")) return NOT_SUPPORTED;
  /* dy must be what the forward convolution of dx gives. */
  if (!shapes_agree((const Tensor*)dx, (const Filter*)w, (const Conv*)c, (const Tensor*)dy)) {
    return BAD_PARAM;
  }
  if (requested < 2) return BAD_PARAM;
  memset(perf, 0, 2 * sizeof(Perf));
  perf[0].algo = BWD_TF32_ALGO;
  perf[0].math_type = 1; /* CUDNN_TENSOR_OP_MATH */
  perf[1].algo = BWD_FMA_ALGO;
  perf[1].memory = WORKSPACE;
  perf[1].math_type = 3; /* CUDNN_FMA_MATH */
  *returned = 2;
  return OK;
}

int cudnnGetConvolutionBackwardDataWorkspaceSize(void* h, const void* w, const void* dy,
                                                 const void* c, const void* dx, int algo,
                                                 size_t* size) {
  (void)h, (void)w, (void)dy, (void)c, (void)dx;
  *size = algo == BWD_FMA_ALGO ? WORKSPACE : 0;
  return OK;
}

int cudnnConvolutionBackwardData(void* h, const void* alpha, const void* wd, const void* w,
                                 const void* dyd, const void* dy, const void* cd, int algo,
                                 void* workspace, size_t workspace_size, const void* beta,
                                 const void* dxd, void* dx) {
  const Tensor* dyt = (const Tensor*)dyd;
  const Tensor* dxt = (const Tensor*)dxd;
  const Filter* f = (const Filter*)wd;
  const Conv* c = (const Conv*)cd;
  if (!((algo == BWD_FMA_ALGO && c->math == 3) || (algo == BWD_TF32_ALGO && c->math == 1))) {
    return NOT_SUPPORTED;
  }
  if (algo == BWD_FMA_ALGO && (workspace == NULL || workspace_size < WORKSPACE)) return BAD_PARAM;
  if (c->mode != 1 || !shapes_agree(dxt, f, c, dyt)) return BAD_PARAM;
  ++g_backward_data;
  if (algo == BWD_TF32_ALGO) ++g_tf32_runs;
  enqueue_conv(
      h, (ConvWork){legacy_direct(dxt, f, c, dyt), (const float*)dy, (const float*)w, (float*)dx,
                    *(const float*)alpha, *(const float*)beta, algo == BWD_TF32_ALGO, 1, 0,
                    algo == BWD_FMA_ALGO ? workspace : NULL, WORKSPACE, 0xab});
  return OK;
}

/* One tensor op's operands, copied at the call: y = alpha * x + beta * y,
 * x broadcast along its dims of size one (add) or of y's shape (transform). */
typedef struct {
  Tensor xt, yt;
  const float* x;
  float* y;
  float alpha, beta;
} TensorWork;

static void run_tensor_op(void* work) {
  const TensorWork* t = (const TensorWork*)work;
  long total = 1;
  for (int d = 0; d < t->yt.nb; ++d) total *= t->yt.dims[d];
  for (long i = 0; i < total; ++i) {
    long rest = i, xi = 0, yi = 0;
    for (int d = t->yt.nb - 1; d >= 0; --d) {
      const long idx = rest % t->yt.dims[d];
      rest /= t->yt.dims[d];
      xi += (t->xt.dims[d] == 1 ? 0 : idx) * t->xt.strides[d];
      yi += idx * t->yt.strides[d];
    }
    float* out = &t->y[yi];
    *out = t->alpha * t->x[xi] + (t->beta == 0.0f ? 0.0f : t->beta * *out);
  }
}

static void enqueue_tensor_op(void* handle, const void* alpha, const Tensor* xt, const void* x,
                              const void* beta, const Tensor* yt, void* y) {
  TensorWork* work = (TensorWork*)malloc(sizeof(TensorWork));
  *work =
      (TensorWork){*xt, *yt, (const float*)x, (float*)y, *(const float*)alpha, *(const float*)beta};
  fake_stream_work(((Handle*)handle)->stream, run_tensor_op, work);
}

/* C = alpha * A + beta * C, A broadcast along its dims of size one. */
int cudnnAddTensor(void* h, const void* alpha, const void* ad, const void* A, const void* beta,
                   const void* cd, void* C) {
  const Tensor* at = (const Tensor*)ad;
  const Tensor* ct = (const Tensor*)cd;
  if (at->nb != 4 || ct->nb != 4) return BAD_PARAM;
  for (int i = 0; i < 4; ++i) {
    if (at->dims[i] != 1 && at->dims[i] != ct->dims[i]) return BAD_PARAM;
  }
  ++g_add;
  enqueue_tensor_op(h, alpha, at, A, beta, ct, C);
  return OK;
}

/* y = alpha * x + beta * y between any two layouts of one shape (what the
 * shims use to bring a filter into the output's format on the device). */
int cudnnTransformTensor(void* h, const void* alpha, const void* xd, const void* x,
                         const void* beta, const void* yd, void* y) {
  const Tensor* xt = (const Tensor*)xd;
  const Tensor* yt = (const Tensor*)yd;
  if (xt->nb != yt->nb) return BAD_PARAM;
  for (int d = 0; d < xt->nb; ++d) {
    if (xt->dims[d] != yt->dims[d]) return BAD_PARAM;
  }
  ++g_transform;
  enqueue_tensor_op(h, alpha, xt, x, beta, yt, y);
  return OK;
}

/* ---- the backend ("graph") API: one convolution (forward or backward data) per graph ---- */

enum {
  B_CONVOLUTION = 1,
  B_ENGINE = 2,
  B_ENGINECFG = 3,
  B_ENGINEHEUR = 4,
  B_PLAN = 5,
  B_CONV_FWD = 10,
  B_CONV_BWD_DATA = 12,
  B_OPGRAPH = 15,
  B_VARIANT_PACK = 16,
  B_TENSOR = 17
};
enum {
  T_HANDLE = 0,
  T_DATA_TYPE = 1,
  T_INT64 = 3,
  T_FLOAT = 4,
  T_VOID_PTR = 6,
  T_CONV_MODE = 7,
  T_HEUR_MODE = 8,
  T_NOTE = 11,
  T_DESC = 15
};
enum { GRAPH_WORKSPACE = 2048, NOT_INITIALIZED = 1001, EXECUTION_FAILED = 5000 };

typedef struct Backend {
  int type, finalized;
  /* tensor */
  long dims[4], strides[4], uid, align;
  int dtype, nb;
  /* convolution */
  long pad[2], post_pad[2], stride[2], dilation[2], spatial;
  int comp, mode;
  /* convolution op: x -> y forward; for backward data x is dx and y is dy */
  struct Backend *x, *w, *y, *conv;
  float alpha, beta;
  /* operation graph / heuristics / config / plan */
  struct Backend* op;
  struct Backend* graph;
  void* handle;
  int heur_mode, engine;
  struct Backend* cfg;
  /* variant pack */
  long uids[4];
  void* ptrs[4];
  int npack;
  void* workspace;
  int has_workspace;
} Backend;

int cudnnBackendCreateDescriptor(int type, void** desc) {
  Backend* b = (Backend*)calloc(1, sizeof(Backend));
  b->type = type;
  b->engine = -1;
  *desc = b;
  ++g_live;
  if (type == B_VARIANT_PACK) ++g_packs;
  return OK;
}

int cudnnBackendDestroyDescriptor(void* desc) {
  free(desc);
  --g_live;
  return OK;
}

static int copy_longs(long* out, int max, long n, const void* values) {
  if (n < 1 || n > max) return BAD_PARAM;
  for (long i = 0; i < n; ++i) out[i] = ((const int64_t*)values)[i];
  return OK;
}

/* The operation type an operation attribute belongs to. */
static int op_of(int name) { return name < 706 ? B_CONV_FWD : B_CONV_BWD_DATA; }

int cudnnBackendSetAttribute(void* desc, int name, int type, int64_t n, const void* v) {
  Backend* b = (Backend*)desc;
  if (b->finalized) return BAD_PARAM; /* read-only once finalized */
  switch (name) {
    case 900:
      b->align = *(const int64_t*)v;
      return type == T_INT64 ? OK : BAD_PARAM;
    case 901:
      b->dtype = *(const int*)v;
      return type == T_DATA_TYPE ? OK : BAD_PARAM;
    case 902:
      b->nb = (int)n;
      return type == T_INT64 ? copy_longs(b->dims, 4, n, v) : BAD_PARAM;
    case 903:
      return type == T_INT64 ? copy_longs(b->strides, 4, n, v) : BAD_PARAM;
    case 906:
      b->uid = *(const int64_t*)v;
      return type == T_INT64 ? OK : BAD_PARAM;
    case 100:
      b->comp = *(const int*)v;
      return type == T_DATA_TYPE ? OK : BAD_PARAM;
    case 101:
      b->mode = *(const int*)v;
      return type == T_CONV_MODE ? OK : BAD_PARAM;
    case 102:
      return type == T_INT64 ? copy_longs(b->dilation, 2, n, v) : BAD_PARAM;
    case 103:
      return type == T_INT64 ? copy_longs(b->stride, 2, n, v) : BAD_PARAM;
    case 104:
      return type == T_INT64 ? copy_longs(b->post_pad, 2, n, v) : BAD_PARAM;
    case 105:
      return type == T_INT64 ? copy_longs(b->pad, 2, n, v) : BAD_PARAM;
    case 106:
      b->spatial = *(const int64_t*)v;
      return type == T_INT64 ? OK : BAD_PARAM;
    /* forward (700-705) and backward-data (706-711) attributes, each on its own op */
    case 700:
    case 706:
      b->alpha = *(const float*)v;
      return type == T_FLOAT && b->type == op_of(name) ? OK : BAD_PARAM;
    case 701:
    case 707:
      b->beta = *(const float*)v;
      return type == T_FLOAT && b->type == op_of(name) ? OK : BAD_PARAM;
    case 702:
    case 708:
      b->conv = *(Backend* const*)v;
      return type == T_DESC && b->type == op_of(name) ? OK : BAD_PARAM;
    case 703:
    case 709:
      b->w = *(Backend* const*)v;
      return type == T_DESC && b->type == op_of(name) ? OK : BAD_PARAM;
    case 704: /* X */
    case 710: /* DX */
      b->x = *(Backend* const*)v;
      return type == T_DESC && b->type == op_of(name) ? OK : BAD_PARAM;
    case 705: /* Y */
    case 711: /* DY */
      b->y = *(Backend* const*)v;
      return type == T_DESC && b->type == op_of(name) ? OK : BAD_PARAM;
    case 800:
    case 400:
      b->handle = *(void* const*)v;
      return type == T_HANDLE ? OK : BAD_PARAM;
    case 801:
      b->op = *(Backend* const*)v;
      return type == T_DESC && n == 1 ? OK : BAD_PARAM;
    case 200:
      b->heur_mode = *(const int*)v;
      return type == T_HEUR_MODE ? OK : BAD_PARAM;
    case 201:
      b->graph = *(Backend* const*)v;
      return type == T_DESC ? OK : BAD_PARAM;
    case 401:
      b->cfg = *(Backend* const*)v;
      return type == T_DESC ? OK : BAD_PARAM;
    case 1000:
      b->npack = (int)n;
      return type == T_INT64 ? copy_longs(b->uids, 4, n, v) : BAD_PARAM;
    case 1001:
      if (type != T_VOID_PTR || n < 1 || n > 4) return BAD_PARAM;
      memcpy(b->ptrs, v, (size_t)n * sizeof(void*));
      return OK;
    case 1003:
      b->workspace = *(void* const*)v;
      b->has_workspace = 1;
      return type == T_VOID_PTR ? OK : BAD_PARAM;
    default:
      return NOT_SUPPORTED;
  }
}

/* 1 when the dense filter `w` has the layout (NCHW or NHWC) of the dense input `x`. */
static int same_layout(const Backend* x, const Backend* w) {
  const int x_nhwc = x->strides[1] == 1 && x->dims[1] > 1;
  const long c = w->dims[1], r = w->dims[2], s = w->dims[3];
  const long nchw[4] = {c * r * s, r * s, s, 1}, nhwc[4] = {r * s * c, 1, s * c, c};
  const long* want = x_nhwc ? nhwc : nchw;
  for (int d = 0; d < 4; ++d) {
    if (w->dims[d] != 1 && w->strides[d] != want[d]) return 0;
  }
  return 1;
}

int cudnnBackendFinalize(void* desc) {
  Backend* b = (Backend*)desc;
  switch (b->type) {
    case B_TENSOR:
      if (b->nb != 4 || b->dtype != 0 || b->align < 1) return BAD_PARAM;
      break;
    case B_CONVOLUTION:
      if (b->spatial != 2 || b->mode != 1 || b->comp != 0) return BAD_PARAM;
      for (int i = 0; i < 2; ++i) {
        if (b->pad[i] != b->post_pad[i] || b->stride[i] <= 0 || b->dilation[i] <= 0) {
          return BAD_PARAM;
        }
      }
      break;
    case B_CONV_FWD:
    case B_CONV_BWD_DATA: {
      if (!b->x || !b->w || !b->y || !b->conv || !b->conv->finalized) return BAD_PARAM;
      if (b->alpha != 1.0f || b->beta != 0.0f) return BAD_PARAM;
      /* y (dy for backward data) must have the shape the forward convolution of x
       * (dx) gives. */
      const Backend *x = b->x, *w = b->w, *y = b->y, *c = b->conv;
      if (x->dims[1] % w->dims[1] != 0 || y->dims[0] != x->dims[0] || y->dims[1] != w->dims[0]) {
        return BAD_PARAM;
      }
      for (int i = 0; i < 2; ++i) {
        const long out =
            (x->dims[2 + i] + 2 * c->pad[i] - c->dilation[i] * (w->dims[2 + i] - 1) - 1) /
                c->stride[i] +
            1;
        if (y->dims[2 + i] != out) return BAD_PARAM;
      }
      break;
    }
    case B_OPGRAPH:
      if (!b->op || !b->op->finalized || !b->handle) return BAD_PARAM;
      break;
    case B_ENGINEHEUR:
      if (!b->graph || !b->graph->finalized || b->heur_mode != 3) return BAD_PARAM;
      ++g_heuristics;
      break;
    case B_PLAN: {
      if (!b->cfg || b->cfg->engine < 0 || !b->handle) return BAD_PARAM;
      const Backend* op = b->cfg->graph->op;
      ++g_exec_plans;
      if (!same_layout(op->x, op->w)) return NOT_SUPPORTED;
      break;
    }
    case B_VARIANT_PACK:
      if (b->npack != 3 || !b->has_workspace) return BAD_PARAM;
      break;
    default:
      break;
  }
  b->finalized = 1;
  return OK;
}

int cudnnBackendGetAttribute(void* const desc, int name, int type, int64_t requested,
                             int64_t* count, void* out) {
  Backend* b = (Backend*)desc;
  if (!b->finalized && b->type != B_ENGINE && b->type != B_ENGINECFG) return NOT_INITIALIZED;
  if (name == 202 && b->type == B_ENGINEHEUR && type == T_DESC) { /* heuristic results */
    const int refuse = env_on("FAKE_CUDNN_REFUSE") || env_on("FAKE_CUDNN_GRAPH_REFUSE");
    const int offered = refuse ? 0 : env_on("FAKE_CUDNN_SLOW_FIRST") ? 3 : 2;
    *count = requested == 0 ? offered : (requested < offered ? requested : offered);
    for (int64_t i = 0; requested > 0 && i < *count; ++i) {
      Backend* cfg = ((Backend**)out)[i];
      if (cfg == NULL || cfg->type != B_ENGINECFG) return BAD_PARAM;
      cfg->engine = (int)i;
      cfg->graph = b->graph;
      cfg->finalized = 1;
    }
    return OK;
  }
  if (name == 300 && b->type == B_ENGINECFG && type == T_DESC && requested == 1) {
    Backend* engine = *(Backend**)out;
    if (engine == NULL || engine->type != B_ENGINE) return BAD_PARAM;
    engine->engine = b->engine;
    engine->finalized = 1;
    *count = 1;
    return OK;
  }
  if (name == 1303 && b->type == B_ENGINE && type == T_NOTE) { /* numerical notes */
    *count = b->engine == 0 ? 1 : 0;
    if (b->engine == 0 && requested >= 1) ((int*)out)[0] = 0; /* TENSOR_CORE */
    return OK;
  }
  if (name == 402 && b->type == B_PLAN && type == T_INT64 && requested == 1) {
    *(int64_t*)out = b->cfg->engine >= 1 ? GRAPH_WORKSPACE : 0;
    *count = 1;
    return OK;
  }
  return NOT_SUPPORTED;
}

static void* pointer_of(const Backend* pack, long uid) {
  for (int i = 0; i < pack->npack; ++i) {
    if (pack->uids[i] == uid) return pack->ptrs[i];
  }
  return NULL;
}

int cudnnBackendExecute(void* handle, void* plan_desc, void* pack_desc) {
  const Backend* plan = (const Backend*)plan_desc;
  const Backend* pack = (const Backend*)pack_desc;
  if (!plan->finalized || plan->type != B_PLAN || !pack->finalized) return BAD_PARAM;
  const Backend* op = plan->cfg->graph->op;
  const Backend *xt = op->x, *wt = op->w, *yt = op->y, *c = op->conv;
  float* x = (float*)pointer_of(pack, xt->uid);
  const float* w = (const float*)pointer_of(pack, wt->uid);
  float* y = (float*)pointer_of(pack, yt->uid);
  if (!x || !w || !y) return BAD_PARAM;
  if ((uintptr_t)x % (uintptr_t)xt->align || (uintptr_t)w % (uintptr_t)wt->align ||
      (uintptr_t)y % (uintptr_t)yt->align) {
    return BAD_PARAM; /* a pointer less aligned than its descriptor promised */
  }
  const int tensor_cores = plan->cfg->engine == 0;
  if (!tensor_cores && pack->workspace == NULL) return BAD_PARAM;
  ++g_executes;
  if (tensor_cores) ++g_tf32_runs;
  Direct d;
  for (int i = 0; i < 4; ++i) {
    d.xd[i] = xt->dims[i], d.xs[i] = xt->strides[i], d.wd[i] = wt->dims[i];
    d.ws[i] = wt->strides[i], d.yd[i] = yt->dims[i], d.ys[i] = yt->strides[i];
  }
  for (int i = 0; i < 2; ++i)
    d.pad[i] = c->pad[i], d.stride[i] = c->stride[i], d.dilation[i] = c->dilation[i];
  const int backward_data = op->type == B_CONV_BWD_DATA;
  const int slow = plan->cfg->engine == 1 && env_on("FAKE_CUDNN_SLOW_FIRST");
  /* Backward data reads y (dy) and writes x (dx). */
  enqueue_conv(handle, (ConvWork){d, backward_data ? y : x, w, backward_data ? x : y, 1.0f, 0.0f,
                                  tensor_cores, backward_data, slow,
                                  tensor_cores ? NULL : pack->workspace, GRAPH_WORKSPACE, 0xcd});
  return OK;
}
