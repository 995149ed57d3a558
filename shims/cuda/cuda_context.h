// Per-thread CUDA state (current device, current stream per device), the
// caching device allocator, pinned host storage, and copies between host and
// device tensors of any geometry: what the CUDA device hooks
// (shims/cuda/cuda_hooks.cpp) hand to the shim core.
#ifndef SHIMKIT_SHIMS_CUDA_CUDA_CONTEXT_H_
#define SHIMKIT_SHIMS_CUDA_CUDA_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shims/cuda/cuda_api.h"
#include "shims/slim_tensor.h"

namespace shimkit {
namespace cuda {

// The calling thread's current device (cudaGetDevice) and making one current.
int32_t current_device();
void set_current_device(int32_t device_index);

// The calling thread's current stream on `device_index` (nullptr: the legacy
// default stream, what torch's runner uses when given no stream).
Stream current_stream(int32_t device_index);
void set_current_stream(int32_t device_index, Stream stream);

// The CUDA device hooks (cuda_hooks.cpp).
const DeviceHooks& cuda_hooks();

// Device memory for tensors. Freed blocks are cached per (device, stream,
// rounded size) and reused in stream order on the same stream (cudaFree
// synchronises the whole device; blobs allocate and free buffers on every
// run). SHIMKIT_CUDA_CACHING=0 turns the cache off.
std::shared_ptr<Storage> device_storage(size_t nbytes, int32_t device_index);
// Page-locked host memory (cudaHostAlloc), freed with cudaFreeHost.
std::shared_ptr<Storage> pinned_storage(size_t nbytes);
// Raw device allocations (aoti_torch_cuda_caching_allocator_raw_alloc).
void* raw_alloc(size_t nbytes);
void raw_delete(void* ptr);
// A private pool for a CUDA graph capture: until end_private_pool(), the
// calling thread's device allocations come from, and return to, a pool no
// other allocation draws on; release_private_pool() frees its parked blocks
// once the graph is gone (blocks still held rejoin the common pool when
// freed). Even with SHIMKIT_CUDA_CACHING=0 pool blocks are parked, not freed:
// a replay still uses them.
uint64_t begin_private_pool();
void end_private_pool();
void release_private_pool(uint64_t pool);
// True between begin_private_pool() and end_private_pool() on this thread:
// a CUDA graph capture is under way (nothing may synchronise its stream).
bool capturing();
// The pool this thread allocates from (0 when not capturing).
uint64_t current_pool();
// Bytes held in the allocator's free lists, and releasing them.
size_t cached_bytes();
void empty_cache();

bool is_cuda(const SlimTensor& t);
// Elements from data_ptr() to one past the furthest element (0 if empty).
int64_t span_elements(const SlimTensor& t);
// True when the elements exactly fill their span (no gaps, no overlap).
bool is_dense(const SlimTensor& t);

// The CUDA hooks' copy (reach it through shimkit::copy_tensor): dst = src
// for equal sizes, any devices, strides and dtypes. Same-dtype dense tensors
// with equal strides copy with one cudaMemcpyAsync on the current stream;
// anything else goes through host staging. Copies that touch host memory are
// synchronous; device-to-device copies are stream ordered.
void copy_device(const SlimTensor& dst, const SlimTensor& src);

// Copies `bytes` between any two addresses (unified addressing) on the
// current stream of `device_index`, synchronously when `sync` (an error under
// a graph capture, which cannot wait).
void memcpy_any(void* dst, const void* src, size_t bytes, int32_t device_index, bool sync);
// A host tensor with t's sizes, strides and dtype over `storage` (at least
// span_elements(t) elements).
SlimTensor host_view_of(const SlimTensor& t, std::shared_ptr<Storage> storage);
// A host tensor with t's sizes and strides holding t's values (t itself when
// t is on the CPU): what host fallbacks of device ops read.
SlimTensor host_mirror(const SlimTensor& t);
// A device tensor on `device_index` with host tensor h's sizes, strides and
// values.
SlimTensor upload(const SlimTensor& h, int32_t device_index);

// Sets every element of t to zero (memset on the current stream for dense
// CUDA tensors, element by element otherwise).
void zero(const SlimTensor& t);

// Stream-synchronises the current stream of `device_index`.
void synchronize(int32_t device_index);

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_CUDA_CONTEXT_H_
