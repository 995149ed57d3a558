/* A stand-in CUDA runtime for CI (no GPU): "device" memory is host memory, so
 * unified addressing holds trivially, copies are memcpy, streams are opaque
 * tokens. Loaded by the slim CUDA shims through SHIMKIT_CUDART. The device
 * count comes from FAKE_CUDA_DEVICES (default 1); counters let tests see how
 * often memory was really allocated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
int cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream) {
  (void)kind;
  (void)stream;
  memmove(dst, src, n);
  ++g_copies;
  return 0;
}
int cudaMemsetAsync(void* p, int v, size_t n, void* stream) {
  (void)stream;
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
  (void)stream;
  run_host_fn(); /* one pending at a time is all the shims enqueue */
  g_host_fn = fn;
  g_host_data = data;
  ++g_host_fns;
  return 0;
}
int cudaStreamSynchronize(void* stream) {
  (void)stream;
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
} FakeEvent;
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
  (void)stream;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  ((FakeEvent*)event)->ms = (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
  ((FakeEvent*)event)->recorded = 1;
  return 0;
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
    case 2:
      return "out of memory";
    case 100:
      return "no CUDA-capable device is detected";
    case 101:
      return "invalid device ordinal";
    default:
      return "unknown error";
  }
}
int cudaDriverGetVersion(int* v) {
  *v = 13000;
  return 0;
}

/* Streams and graphs: tokens and counters only. Work still runs at the call
 * (device memory is host memory), so a "replay" does nothing; what CI checks
 * is the call sequence and the allocator's pools. FAKE_CUDA_NO_CAPTURE=1
 * refuses capture (cudaErrorStreamCaptureUnsupported). */
static long g_streams = 0, g_captures = 0, g_launches = 0, g_execs = 0;
static int g_capturing = 0;

long fake_cuda_graph_counter(const char* name) {
  if (strcmp(name, "streams") == 0) return g_streams;
  if (strcmp(name, "captures") == 0) return g_captures;
  if (strcmp(name, "launches") == 0) return g_launches;
  if (strcmp(name, "execs") == 0) return g_execs; /* live executable graphs */
  return -1;
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
  if (stream == NULL || mode != 2 || g_capturing) return 1;
  if (refuse != NULL && refuse[0] == '1') return 900; /* cudaErrorStreamCaptureUnsupported */
  g_capturing = 1;
  return 0;
}
int cudaStreamEndCapture(void* stream, void** graph) {
  (void)stream;
  if (!g_capturing) return 1;
  g_capturing = 0;
  *graph = malloc(1);
  ++g_captures;
  return 0;
}
int cudaGraphInstantiate(void** exec, void* graph, unsigned long long flags) {
  if (graph == NULL || flags != 0) return 1;
  *exec = malloc(1);
  ++g_execs;
  return 0;
}
int cudaGraphLaunch(void* exec, void* stream) {
  if (exec == NULL || stream == NULL || g_capturing) return 1;
  ++g_launches;
  return 0;
}
int cudaGraphExecDestroy(void* exec) {
  free(exec);
  --g_execs;
  return 0;
}
int cudaGraphDestroy(void* graph) {
  free(graph);
  return 0;
}
