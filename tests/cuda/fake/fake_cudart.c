/* A stand-in CUDA runtime for CI (no GPU): "device" memory is host memory, so
 * unified addressing holds trivially, copies are memcpy, streams are opaque
 * tokens. Loaded by the slim CUDA shims through SHIMKIT_CUDART. The device
 * count comes from FAKE_CUDA_DEVICES (default 1); counters let tests see how
 * often memory was really allocated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int g_device = 0;
static long g_mallocs = 0, g_frees = 0, g_host_allocs = 0, g_syncs = 0, g_copies = 0;

long fake_cuda_counter(const char* name) {
  if (strcmp(name, "malloc") == 0) return g_mallocs;
  if (strcmp(name, "free") == 0) return g_frees;
  if (strcmp(name, "host_alloc") == 0) return g_host_allocs;
  if (strcmp(name, "sync") == 0) return g_syncs;
  if (strcmp(name, "copy") == 0) return g_copies;
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
int cudaStreamSynchronize(void* stream) {
  (void)stream;
  ++g_syncs;
  return 0;
}
int cudaDeviceSynchronize(void) {
  ++g_syncs;
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
