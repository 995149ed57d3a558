#include "shims/cuda/cuda_context.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <unordered_map>

namespace shimkit {
namespace cuda {
namespace {

thread_local int32_t t_device = -1;  // -1: not read from the runtime yet
thread_local std::unordered_map<int32_t, Stream> t_streams;

constexpr size_t kRound = 512;

size_t round_up(size_t n) { return ((n == 0 ? 1 : n) + kRound - 1) / kRound * kRound; }

bool caching_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SHIMKIT_CUDA_CACHING");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Free device blocks keyed by (device, stream, rounded size, pool). Pool 0 is
// the common one; a CUDA graph capture allocates from a pool of its own, so
// the blocks its replays read and write are never handed to anyone else
// until the graph is freed (release_pool).
class BlockCache {
 public:
  void* take(int32_t device, Stream stream, size_t rounded, uint64_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(Key{device, stream, rounded, pool});
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    bytes_ -= rounded;
    return p;
  }
  // Parks `p`; false (not parked: the caller frees it) when it would join
  // pool 0 with caching off.
  bool give(int32_t device, Stream stream, size_t rounded, uint64_t pool, void* p, bool caching) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pool != 0 && live_pools_.count(pool) == 0) pool = 0;  // its graph is gone
    if (pool == 0 && !caching) return false;
    free_[Key{device, stream, rounded, pool}].push_back(p);
    bytes_ += rounded;
    return true;
  }
  size_t bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }
  uint64_t new_pool() {
    std::lock_guard<std::mutex> lock(mutex_);
    live_pools_.insert(++last_pool_);
    return last_pool_;
  }
  // Frees the pool's parked blocks; blocks still in use join pool 0 when freed.
  void release_pool(const Runtime& rt, uint64_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_pools_.erase(pool);
    for (auto it = free_.begin(); it != free_.end();) {
      if (std::get<3>(it->first) == pool) {
        for (void* p : it->second) rt.free(p);
        bytes_ -= std::get<2>(it->first) * it->second.size();
        it = free_.erase(it);
      } else {
        ++it;
      }
    }
  }
  void release_all(const Runtime& rt) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : free_) {
      for (void* p : entry.second) rt.free(p);
    }
    free_.clear();
    bytes_ = 0;
  }

 private:
  using Key = std::tuple<int32_t, Stream, size_t, uint64_t>;
  std::mutex mutex_;
  std::map<Key, std::vector<void*>> free_;
  std::set<uint64_t> live_pools_;
  uint64_t last_pool_ = 0;
  size_t bytes_ = 0;
};

thread_local uint64_t t_pool = 0;  // the pool this thread allocates from

// Never destroyed: the CUDA context may be gone by static destruction time.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

void* device_malloc(size_t rounded, int32_t device, Stream stream, uint64_t pool) {
  const Runtime& rt = require_runtime();
  if (caching_enabled()) {
    if (void* p = cache().take(device, stream, rounded, pool)) return p;
  }
  const int32_t previous = current_device();
  if (previous != device) set_current_device(device);
  void* p = nullptr;
  Error err = rt.malloc(&p, rounded);
  if (err != kSuccess && caching_enabled() && cache().bytes() > 0 && pool == 0) {
    // Out of memory with blocks parked in the cache: give them back, retry.
    cache().release_all(rt);
    err = rt.malloc(&p, rounded);
  }
  if (previous != device) set_current_device(previous);
  check(err, ("cudaMalloc of " + std::to_string(rounded) + " bytes").c_str());
  return p;
}

// What the caching allocator needs to park a freed block again.
struct DeviceBlock {
  size_t rounded = 0;
  int32_t device = 0;
  Stream stream = nullptr;
  uint64_t pool = 0;
};

void release_device_block(void* ptr, size_t /*nbytes*/, void* context) {
  std::unique_ptr<DeviceBlock> block(static_cast<DeviceBlock*>(context));
  if (!cache().give(block->device, block->stream, block->rounded, block->pool, ptr,
                    caching_enabled())) {
    runtime().free(ptr);
  }
}

void free_pinned(void* ptr, size_t /*nbytes*/, void* /*context*/) { runtime().free_host(ptr); }

}  // namespace

int32_t current_device() {
  if (t_device < 0) {
    const Runtime& rt = require_runtime();
    int d = 0;
    check(rt.get_device(&d), "cudaGetDevice");
    t_device = d;
  }
  return t_device;
}

void set_current_device(int32_t device_index) {
  check_device_index(device_index);
  if (t_device == device_index) return;
  check(runtime().set_device(device_index), "cudaSetDevice");
  t_device = device_index;
}

Stream current_stream(int32_t device_index) {
  auto it = t_streams.find(device_index);
  return it == t_streams.end() ? nullptr : it->second;
}

void set_current_stream(int32_t device_index, Stream stream) {
  if (stream == nullptr) {
    t_streams.erase(device_index);
  } else {
    t_streams[device_index] = stream;
  }
}

std::shared_ptr<Storage> device_storage(size_t nbytes, int32_t device_index) {
  check_device_index(device_index);
  auto block = std::make_unique<DeviceBlock>();
  block->rounded = round_up(nbytes);
  block->device = device_index;
  block->stream = current_stream(device_index);
  block->pool = t_pool;
  void* ptr = device_malloc(block->rounded, device_index, block->stream, block->pool);
  return Storage::adopt(ptr, nbytes, cuda_hooks(), release_device_block, block.release());
}

std::shared_ptr<Storage> pinned_storage(size_t nbytes) {
  const Runtime& rt = require_runtime();
  void* p = nullptr;
  check(rt.host_alloc(&p, nbytes == 0 ? 1 : nbytes, kHostAllocDefault),
        ("cudaHostAlloc of " + std::to_string(nbytes) + " bytes").c_str());
  // Page-locked, but host memory: a CPU tensor's storage.
  return Storage::adopt(p, nbytes, cpu_hooks(), free_pinned, nullptr);
}

void* raw_alloc(size_t nbytes) {
  // Raw blocks are not cached: their size is not known at delete time.
  const Runtime& rt = require_runtime();
  current_device();  // makes sure the thread's device is initialised
  void* p = nullptr;
  check(rt.malloc(&p, round_up(nbytes)), "cudaMalloc");
  return p;
}

void raw_delete(void* ptr) {
  if (ptr == nullptr) return;
  check(require_runtime().free(ptr), "cudaFree");
}

size_t cached_bytes() { return cache().bytes(); }

uint64_t begin_private_pool() {
  t_pool = cache().new_pool();
  return t_pool;
}

void end_private_pool() { t_pool = 0; }

bool capturing() { return t_pool != 0; }

uint64_t current_pool() { return t_pool; }

void release_private_pool(uint64_t pool) {
  if (pool == 0) return;
  const Runtime& rt = runtime();
  if (rt.ok) cache().release_pool(rt, pool);
}

void empty_cache() {
  const Runtime& rt = runtime();
  if (rt.ok) cache().release_all(rt);
}

bool is_cuda(const SlimTensor& t) { return t.device_type() == device::kCUDA; }

int64_t span_elements(const SlimTensor& t) {
  int64_t span = 1;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.sizes()[i] == 0) return 0;
    span += (t.sizes()[i] - 1) * t.strides()[i];
  }
  return span;
}

bool is_dense(const SlimTensor& t) {
  if (span_elements(t) != t.numel()) return false;
  // Same span as numel and no zero stride on a non-trivial dim: no overlap.
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.sizes()[i] > 1 && t.strides()[i] == 0) return false;
  }
  return true;
}

void synchronize(int32_t device_index) {
  check(require_runtime().stream_synchronize(current_stream(device_index)),
        "cudaStreamSynchronize");
}

void memcpy_any(void* dst, const void* src, size_t bytes, int32_t device_index, bool sync) {
  if (bytes == 0) return;
  if (sync && capturing()) {
    // Waiting for a capturing stream is an error in CUDA; say what asked for it.
    throw ShimError(
        "the run reads a device value on the host (a size from the data, an .item()): it waits "
        "for the stream, which a CUDA graph cannot capture");
  }
  const Runtime& rt = require_runtime();
  Stream s = current_stream(device_index);
  check(rt.memcpy_async(dst, src, bytes, kMemcpyDefault, s), "cudaMemcpyAsync");
  if (sync) check(rt.stream_synchronize(s), "cudaStreamSynchronize");
}

SlimTensor host_view_of(const SlimTensor& t, std::shared_ptr<Storage> storage) {
  return SlimTensor(std::move(storage), t.sizes().data(), t.strides().data(), t.dim(), 0, t.dtype(),
                    device::kCPU, -1);
}

SlimTensor host_mirror(const SlimTensor& t) {
  if (!t.defined()) throw ShimError("host copy of an undefined tensor");
  if (!is_cuda(t)) return t;
  const size_t bytes = static_cast<size_t>(span_elements(t)) * t.itemsize();
  auto storage = Storage::allocate(bytes);
  memcpy_any(storage->data(), t.data_ptr(), bytes, t.device_index(), true);
  return host_view_of(t, std::move(storage));
}

SlimTensor upload(const SlimTensor& h, int32_t device_index) {
  SlimTensor d = SlimTensor::empty(h.sizes().data(), h.strides().data(), h.dim(), h.dtype(),
                                   device::kCUDA, device_index);
  const size_t bytes = static_cast<size_t>(span_elements(h)) * h.itemsize();
  memcpy_any(d.data_ptr(), h.data_ptr(), bytes, device_index, true);
  return d;
}

void zero(const SlimTensor& t) {
  if (!t.defined() || t.numel() == 0) return;
  if (is_dense(t)) {
    const size_t bytes = static_cast<size_t>(t.numel()) * t.itemsize();
    if (is_cuda(t)) {
      check(
          require_runtime().memset_async(t.data_ptr(), 0, bytes, current_stream(t.device_index())),
          "cudaMemsetAsync");
    } else {
      std::memset(t.data_ptr(), 0, bytes);
    }
    return;
  }
  // Gaps between elements stay untouched: zero a dense copy, then scatter it.
  SlimTensor zeros =
      SlimTensor::empty(t.sizes().data(), nullptr, t.dim(), t.dtype(), device::kCPU, -1);
  std::memset(zeros.data_ptr(), 0, static_cast<size_t>(t.numel()) * t.itemsize());
  copy_device(t, zeros);
}

void copy_device(const SlimTensor& dst, const SlimTensor& src) {
  if (dst.sizes() != src.sizes()) throw ShimError("copy between tensors of different sizes");
  if (!is_cuda(dst) && !is_cuda(src)) {
    copy_elements(dst, src);
    return;
  }
  if (dst.numel() == 0) return;
  const int32_t device = is_cuda(dst) ? dst.device_index() : src.device_index();
  const bool touches_host = !is_cuda(dst) || !is_cuda(src);
  if (dst.dtype() == src.dtype() && dst.strides() == src.strides() && is_dense(dst)) {
    memcpy_any(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(dst.numel()) * dst.itemsize(),
               device, touches_host);
    return;
  }
  // General case: through the host, keeping whatever lies between dst's
  // elements untouched.
  SlimTensor hs = host_mirror(src);
  SlimTensor hd = host_mirror(dst);
  copy_elements(hd, hs);
  if (is_cuda(dst)) {
    const size_t bytes = static_cast<size_t>(span_elements(dst)) * dst.itemsize();
    memcpy_any(dst.data_ptr(), hd.data_ptr(), bytes, dst.device_index(), true);
  }
}

}  // namespace cuda
}  // namespace shimkit
