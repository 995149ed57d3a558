/* A stand-in CUDA runtime for CI (no GPU): "device" memory is host memory, so
 * unified addressing holds trivially, copies are memcpy (recorded instead on
 * a stream under capture, with the other fakes' work: see the graphs below),
 * streams are opaque tokens. Loaded by the slim CUDA shims through SHIMKIT_CUDART. The device count
 * comes from FAKE_CUDA_DEVICES (default 1); counters let tests see how often memory was really
 * allocated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_device = 0;
static long g_mallocs = 0, g_frees = 0, g_host_allocs = 0, g_syncs = 0, g_copies = 0;
static long g_host_fns = 0, g_events = 0;

long fake_cuda_counter(const char* name) {
  if (strcmp(name, "malloc") == 0) return g_mallocs;
  if (strcmp(name, "free") == 0) return g_frees;
  if (strcmp(name, "host_alloc") == 0) return g_host_allocs;
  if (strcmp(name, "sync") == 0) return g_syncs;
  if (strcmp(name, "copy") == 0) return g_copies;
  if (strcmp(name, "host_fns") == 0) return g_host_fns;
  if (strcmp(name, "live_events") == 0) return g_events;
  return -1;
}

static int devices(void) {
  const char* v = getenv("FAKE_CUDA_DEVICES");
  return v ? atoi(v) : 1;
}

int cudaGetDeviceCount(int* count) {
  *count = devices();
  return *count > 0 ? 0 : 100; /* cudaErrorNoDevice */
}
int cudaGetDevice(int* d) {
  *d = g_device;
  return 0;
}
int cudaSetDevice(int d) {
  if (d < 0 || d >= devices()) return 101; /* cudaErrorInvalidDevice */
  g_device = d;
  return 0;
}
int cudaMalloc(void** p, size_t n) {
  *p = aligned_alloc(256, (n + 255) / 256 * 256);
  if (*p == NULL) return 2; /* cudaErrorMemoryAllocation */
  ++g_mallocs;
  return 0;
}
int cudaFree(void* p) {
  free(p);
  ++g_frees;
  return 0;
}
int cudaHostAlloc(void** p, size_t n, unsigned int flags) {
  (void)flags;
  *p = malloc(n);
  ++g_host_allocs;
  return *p ? 0 : 2;
}
int cudaFreeHost(void* p) {
  free(p);
  return 0;
}
/* Stream work issued to a stream under capture is recorded, not run
 * (the graph runs it again at each cudaGraphLaunch). */
enum { WORK_COPY, WORK_SET, WORK_HOST_FN, WORK_CALL };
typedef struct {
  int kind;
  void* dst;
  const void* src;
  size_t n;
  int value;
  void (*fn)(void*); /* a host function, or another fake's device work (dst is its argument) */
} Work;
static int record(void* stream, Work w);

int cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream) {
  (void)kind;
  if (record(stream, (Work){WORK_COPY, dst, src, n, 0, NULL})) return 0;
  memmove(dst, src, n);
  ++g_copies;
  return 0;
}
int cudaMemsetAsync(void* p, int v, size_t n, void* stream) {
  if (record(stream, (Work){WORK_SET, p, NULL, n, v, NULL})) return 0;
  memset(p, v, n);
  return 0;
}
/* Host functions (cudaLaunchHostFunc) wait for the next synchronisation: work
 * runs at the call here, and a real stream runs what follows a host function
 * only once it returns, so running it at once would let a function that waits
 * for the caller (autotune.h's gate) wait for itself. */
static void (*g_host_fn)(void*) = NULL;
static void* g_host_data = NULL;
static void run_host_fn(void) {
  if (g_host_fn != NULL) {
    void (*fn)(void*) = g_host_fn;
    g_host_fn = NULL;
    fn(g_host_data);
  }
}
int cudaLaunchHostFunc(void* stream, void (*fn)(void*), void* data) {
  if (record(stream, (Work){WORK_HOST_FN, data, NULL, 0, 0, fn})) return 0;
  run_host_fn(); /* one pending at a time is all the shims enqueue */
  g_host_fn = fn;
  g_host_data = data;
  ++g_host_fns;
  return 0;
}
/* FAKE_CUDA_SYNC_US and FAKE_CUDA_HOST_FN_US (microseconds): a synchronisation
 * that takes that long, and a host function a graph launch runs that starts
 * that late (a slow driver callback thread): what makes replay with host steps
 * faster or slower than eager runs, for the runner's choice between them. */
static void delay_from(const char* variable) {
  const char* v = getenv(variable);
  if (v != NULL && atoi(v) > 0) usleep((useconds_t)atoi(v));
}

static int refuse_under_capture(void* stream);
int cudaStreamSynchronize(void* stream) {
  if (refuse_under_capture(stream)) return 900; /* cudaErrorStreamCaptureUnsupported */
  delay_from("FAKE_CUDA_SYNC_US");
  run_host_fn();
  ++g_syncs;
  return 0;
}
int cudaDeviceSynchronize(void) {
  run_host_fn();
  ++g_syncs;
  return 0;
}

/* Events record the host clock: work runs at the call, so the time between two
 * records is the time of what ran between them (a slow fake engine's sleep). */
typedef struct {
  double ms;
  int recorded;
  int captured; /* last recorded on a stream under capture */
} FakeEvent;
static int is_captured(void* stream);
int cudaEventCreate(void** event) {
  const char* off = getenv("FAKE_CUDA_NO_EVENTS"); /* a runtime that cannot time */
  if (off != NULL && off[0] == '1') return 1;
  *event = calloc(1, sizeof(FakeEvent));
  if (*event == NULL) return 2;
  ++g_events;
  return 0;
}
int cudaEventDestroy(void* event) {
  free(event);
  --g_events;
  return 0;
}
int cudaEventRecord(void* event, void* stream) {
  ((FakeEvent*)event)->captured = is_captured(stream);
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  ((FakeEvent*)event)->ms = (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
  ((FakeEvent*)event)->recorded = 1;
  return 0;
}
/* An event recorded under capture belongs to the capture: querying it later
 * fails, as on a GPU ("invalid argument"). */
int cudaEventQuery(void* event) {
  const FakeEvent* e = (const FakeEvent*)event;
  if (e->captured) return 1; /* cudaErrorInvalidValue */
  return e->recorded ? 0 : 600;
}
int cudaEventElapsedTime(float* ms, void* start, void* stop) {
  const FakeEvent *a = (const FakeEvent*)start, *b = (const FakeEvent*)stop;
  if (!a->recorded || !b->recorded) return 600; /* cudaErrorNotReady */
  *ms = (float)(b->ms - a->ms);
  return 0;
}

const char* cudaGetErrorString(int err) {
  switch (err) {
    case 0:
      return "no error";
    case 1:
      return "invalid argument";
    case 2:
      return "out of memory";
    case 100:
      return "no CUDA-capable device is detected";
    case 101:
      return "invalid device ordinal";
    case 900:
      return "operation not permitted when stream is capturing";
    case 901:
      return "operation failed due to a previous error during capture";
    default:
      return "unknown error";
  }
}
int cudaDriverGetVersion(int* v) {
  *v = 13000;
  return 0;
}

/* Streams and graphs. Copies, memsets, host functions and the other fakes'
 * device work (cuBLAS, cuBLASLt, cuDNN: fake_stream_work.h) issued to the
 * stream under capture are recorded into the graph, and each cudaGraphLaunch
 * runs them again in order (device memory is host memory, so a replay reads
 * the inputs as they are at launch). Synchronising the stream under capture fails and
 * invalidates the capture. FAKE_CUDA_NO_CAPTURE=1 refuses capture
 * (cudaErrorStreamCaptureUnsupported). */
static long g_streams = 0, g_captures = 0, g_launches = 0, g_execs = 0, g_replayed = 0;
static void* g_capture_stream = NULL;

typedef struct {
  Work* work;
  size_t count, capacity;
} Graph;
static Graph* g_capture = NULL;
static int g_capture_invalidated = 0;

/* Synchronising the stream under capture is an error that also invalidates
 * the capture (as on a GPU: its end then fails). */
static int refuse_under_capture(void* stream) {
  if (g_capture == NULL || stream == NULL || stream != g_capture_stream) return 0;
  g_capture_invalidated = 1;
  return 1;
}

long fake_cuda_graph_counter(const char* name) {
  if (strcmp(name, "streams") == 0) return g_streams;
  if (strcmp(name, "captures") == 0) return g_captures;
  if (strcmp(name, "launches") == 0) return g_launches;
  if (strcmp(name, "execs") == 0) return g_execs;       /* live executable graphs */
  if (strcmp(name, "replayed") == 0) return g_replayed; /* work items run by launches */
  return -1;
}

static int is_captured(void* stream) {
  return g_capture != NULL && stream != NULL && stream == g_capture_stream;
}

/* True (and `w` kept) when `stream` is being captured. */
static int record(void* stream, Work w) {
  if (!is_captured(stream)) return 0;
  if (g_capture->count == g_capture->capacity) {
    g_capture->capacity = g_capture->capacity ? 2 * g_capture->capacity : 8;
    g_capture->work = realloc(g_capture->work, g_capture->capacity * sizeof(Work));
  }
  g_capture->work[g_capture->count++] = w;
  return 1;
}

/* The other fakes' recorded work items, kept (and reachable) for the process:
 * graphs and their executable copies share them. */
static void** g_kept_work = NULL;
static size_t g_kept_count = 0, g_kept_capacity = 0;

/* Called by the other fakes (fake_stream_work.h): records fn(work) when
 * `stream` is being captured (true), else leaves it to the caller (false). */
int fake_cuda_record_work(void* stream, void (*fn)(void*), void* work) {
  if (!record(stream, (Work){WORK_CALL, work, NULL, 0, 0, fn})) return 0;
  if (g_kept_count == g_kept_capacity) {
    g_kept_capacity = g_kept_capacity ? 2 * g_kept_capacity : 16;
    g_kept_work = realloc(g_kept_work, g_kept_capacity * sizeof(void*));
  }
  g_kept_work[g_kept_count++] = work;
  return 1;
}

static Graph* copy_graph(const Graph* g) {
  Graph* c = calloc(1, sizeof(Graph));
  c->count = c->capacity = g->count;
  c->work = malloc((g->count ? g->count : 1) * sizeof(Work));
  memcpy(c->work, g->work, g->count * sizeof(Work));
  return c;
}
static void free_graph(Graph* g) {
  if (g == NULL) return;
  free(g->work);
  free(g);
}

int cudaStreamCreateWithFlags(void** stream, unsigned int flags) {
  if (flags != 1) return 1; /* only non-blocking streams are expected */
  *stream = malloc(1);
  ++g_streams;
  return 0;
}
int cudaStreamDestroy(void* stream) {
  free(stream);
  --g_streams;
  return 0;
}
int cudaStreamBeginCapture(void* stream, int mode) {
  const char* refuse = getenv("FAKE_CUDA_NO_CAPTURE");
  if (stream == NULL || mode != 2 || g_capture != NULL) return 1;
  if (refuse != NULL && refuse[0] == '1') return 900; /* cudaErrorStreamCaptureUnsupported */
  g_capture = calloc(1, sizeof(Graph));
  g_capture_stream = stream;
  return 0;
}
int cudaStreamEndCapture(void* stream, void** graph) {
  if (g_capture == NULL || stream != g_capture_stream) return 1;
  Graph* captured = g_capture;
  const int invalidated = g_capture_invalidated;
  g_capture = NULL;
  g_capture_stream = NULL;
  g_capture_invalidated = 0;
  if (invalidated) {
    free_graph(captured);
    *graph = NULL;
    return 901; /* cudaErrorStreamCaptureInvalidated */
  }
  *graph = captured;
  ++g_captures;
  return 0;
}
int cudaGraphInstantiate(void** exec, void* graph, unsigned long long flags) {
  if (graph == NULL || flags != 0) return 1;
  *exec = copy_graph((const Graph*)graph);
  ++g_execs;
  return 0;
}
int cudaGraphLaunch(void* exec, void* stream) {
  if (exec == NULL || stream == NULL || g_capture != NULL) return 1;
  run_host_fn(); /* what the stream ran before */
  const Graph* g = (const Graph*)exec;
  for (size_t i = 0; i < g->count; ++i) {
    const Work* w = &g->work[i];
    if (w->kind == WORK_COPY) memmove(w->dst, w->src, w->n);
    if (w->kind == WORK_SET) memset(w->dst, w->value, w->n);
    if (w->kind == WORK_HOST_FN) {
      delay_from("FAKE_CUDA_HOST_FN_US");
      w->fn(w->dst);
    }
    if (w->kind == WORK_CALL) w->fn(w->dst);
    ++g_replayed;
  }
  ++g_launches;
  return 0;
}
int cudaGraphExecDestroy(void* exec) {
  free_graph((Graph*)exec);
  --g_execs;
  return 0;
}
int cudaGraphDestroy(void* graph) {
  free_graph((Graph*)graph);
  return 0;
}
