/* A stand-in cuDNN for CI (no GPU): the legacy forward-convolution API over
 * host memory, with plain loops. It keeps cuDNN's contract strictly enough to
 * catch a wrong call: the output descriptor must have the shape the
 * convolution gives, the workspace must be the size it asked for, filters are
 * read in the format the descriptor names, and only the algorithm it ranked
 * first among the float32 ones runs.
 *
 * FAKE_CUDNN_IGNORE_FORMAT=1 reads NHWC filters as NCHW (the negative control
 * for the shims' layout logic); FAKE_CUDNN_REFUSE=1 offers no algorithm (the
 * shims must fall back to the host). fake_cudnn_counter() counts calls. */
#include <stdlib.h>
#include <string.h>

enum { OK = 0, BAD_PARAM = 2000, NOT_SUPPORTED = 3000 };
enum { NCHW = 0, NHWC = 1 };
enum { FMA_ALGO = 1, TF32_ALGO = 6, WORKSPACE = 4096 };

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

static long g_forward = 0, g_add = 0, g_plans = 0;

long fake_cudnn_counter(const char* name) {
  if (strcmp(name, "forward") == 0) return g_forward;
  if (strcmp(name, "add") == 0) return g_add;
  if (strcmp(name, "plan") == 0) return g_plans;
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
int cudnnCreate(void** handle) {
  *handle = malloc(1);
  return OK;
}
int cudnnSetStream(void* handle, void* stream) {
  (void)handle;
  (void)stream;
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
  /* A TF32 algorithm ranked first, as real cuDNN may: the shims must skip it. */
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

static float filter_at(const Filter* f, const float* w, int k, int ch, int r, int s) {
  const int C = f->dims[1], R = f->dims[2], S = f->dims[3];
  if (f->format == NHWC && !env_on("FAKE_CUDNN_IGNORE_FORMAT")) {
    return w[((k * R + r) * S + s) * C + ch];
  }
  return w[((k * C + ch) * R + r) * S + s];
}

int cudnnConvolutionForward(void* h, const void* alpha, const void* xd, const void* x,
                            const void* wd, const void* w, const void* cd, int algo,
                            void* workspace, size_t workspace_size, const void* beta,
                            const void* yd, void* y) {
  const Tensor* xt = (const Tensor*)xd;
  const Tensor* yt = (const Tensor*)yd;
  const Filter* f = (const Filter*)wd;
  const Conv* c = (const Conv*)cd;
  (void)h;
  if (algo != FMA_ALGO || c->math != 3) return NOT_SUPPORTED;
  if (workspace == NULL || workspace_size < WORKSPACE) return BAD_PARAM;
  if (c->mode != 1 || !shapes_agree(xt, f, c, yt)) return BAD_PARAM;
  memset(workspace, 0xab, WORKSPACE); /* it must really be that big */
  ++g_forward;
  const float a = *(const float*)alpha, b = *(const float*)beta;
  const float* xs = (const float*)x;
  float* ys = (float*)y;
  const int kg = f->dims[0] / c->groups, cg = f->dims[1];
  for (int n = 0; n < yt->dims[0]; ++n)
    for (int k = 0; k < yt->dims[1]; ++k)
      for (int oy = 0; oy < yt->dims[2]; ++oy)
        for (int ox = 0; ox < yt->dims[3]; ++ox) {
          const int g = k / kg;
          float acc = 0;
          for (int ch = 0; ch < cg; ++ch)
            for (int r = 0; r < f->dims[2]; ++r)
              for (int s = 0; s < f->dims[3]; ++s) {
                const int iy = oy * c->stride[0] - c->pad[0] + r * c->dilation[0];
                const int ix = ox * c->stride[1] - c->pad[1] + s * c->dilation[1];
                if (iy < 0 || iy >= xt->dims[2] || ix < 0 || ix >= xt->dims[3]) continue;
                const long xi = (long)n * xt->strides[0] + (long)(g * cg + ch) * xt->strides[1] +
                                (long)iy * xt->strides[2] + (long)ix * xt->strides[3];
                acc += xs[xi] * filter_at(f, (const float*)w, k, ch, r, s);
              }
          float* out = &ys[(long)n * yt->strides[0] + (long)k * yt->strides[1] +
                           (long)oy * yt->strides[2] + (long)ox * yt->strides[3]];
          *out = a * acc + (b == 0.0f ? 0.0f : b * *out);
        }
  return OK;
}

/* C = alpha * A + beta * C, A broadcast along its dims of size one. */
int cudnnAddTensor(void* h, const void* alpha, const void* ad, const void* A, const void* beta,
                   const void* cd, void* C) {
  const Tensor* at = (const Tensor*)ad;
  const Tensor* ct = (const Tensor*)cd;
  (void)h;
  if (at->nb != 4 || ct->nb != 4) return BAD_PARAM;
  for (int i = 0; i < 4; ++i) {
    if (at->dims[i] != 1 && at->dims[i] != ct->dims[i]) return BAD_PARAM;
  }
  ++g_add;
  const float a = *(const float*)alpha, b = *(const float*)beta;
  int i[4];
  for (i[0] = 0; i[0] < ct->dims[0]; ++i[0])
    for (i[1] = 0; i[1] < ct->dims[1]; ++i[1])
      for (i[2] = 0; i[2] < ct->dims[2]; ++i[2])
        for (i[3] = 0; i[3] < ct->dims[3]; ++i[3]) {
          long ai = 0, ci = 0;
          for (int d = 0; d < 4; ++d) {
            ai += (long)(at->dims[d] == 1 ? 0 : i[d]) * at->strides[d];
            ci += (long)i[d] * ct->strides[d];
          }
          float* out = &((float*)C)[ci];
          *out = a * ((const float*)A)[ai] + b * *out;
        }
  return OK;
}
