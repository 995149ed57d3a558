#include "shims/slim_tensor.h"

#include "shims/scalar_types.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>

namespace shimkit {

void throw_unsupported_dtype(int32_t dtype) {
  throw ShimError("unsupported dtype " + std::to_string(dtype));
}

bool is_known_dtype(int32_t dtype) {
  try {
    element_size(dtype);
    return true;
  } catch (const ShimError&) {
    return false;
  }
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case dtype::kUInt8:
      return "uint8";
    case dtype::kInt8:
      return "int8";
    case dtype::kInt16:
      return "int16";
    case dtype::kInt32:
      return "int32";
    case dtype::kInt64:
      return "int64";
    case dtype::kFloat16:
      return "float16";
    case dtype::kFloat32:
      return "float32";
    case dtype::kFloat64:
      return "float64";
    case dtype::kBool:
      return "bool";
    case dtype::kBFloat16:
      return "bfloat16";
    case dtype::kUInt16:
      return "uint16";
    case dtype::kUInt32:
      return "uint32";
    case dtype::kUInt64:
      return "uint64";
    default:
      return "unknown";
  }
}

void throw_bad_device(int32_t device_type, int32_t device_index) {
  if (device_type < device::kCPU || device_type > device::kPrivateUse1) {
    throw ShimError("unknown device type " + std::to_string(device_type));
  }
  if (device_type == device::kCPU) {
    throw ShimError("CPU device index must be -1 or 0, got " + std::to_string(device_index));
  }
  throw ShimError("negative index " + std::to_string(device_index) + " for device type " +
                  std::to_string(device_type));
}

void DimVector::assign_heap(const int64_t* values, size_t n) {
  heap_.reset(new int64_t[n]);
  size_ = n;
  std::memcpy(heap_.get(), values, n * sizeof(int64_t));
}

bool DimVector::operator==(const DimVector& other) const {
  return size_ == other.size_ &&
         (size_ == 0 || std::memcmp(data(), other.data(), size_ * sizeof(int64_t)) == 0);
}

namespace {

// Blobs allocate and free the same few small buffers on every run. A small
// per-thread cache of freed blocks (power-of-two sizes from 64 B to 64 KiB,
// at most kPerBucket each) keeps malloc off that path.
class BlockCache {
 public:
  static constexpr int kBuckets = 11;  // 64 << 0 ... 64 << 10
  static constexpr size_t kPerBucket = 8;

  ~BlockCache() {
    for (auto& bucket : free_) {
      for (void* p : bucket) std::free(p);
    }
  }

  // Bucket for `nbytes`, or -1 if too big to cache (or under ASan, which
  // must see every free to catch use-after-free).
  static int bucket_of(size_t nbytes) {
#if defined(__SANITIZE_ADDRESS__)
    if (nbytes > 0) return -1;
#endif
    size_t size = 64;
    for (int b = 0; b < kBuckets; ++b, size <<= 1) {
      if (nbytes <= size) return b;
    }
    return -1;
  }
  static size_t bucket_size(int bucket) { return size_t{64} << bucket; }

  void* take(int bucket) {
    auto& list = free_[bucket];
    if (list.empty()) return nullptr;
    void* p = list.back();
    list.pop_back();
    return p;
  }

  bool give(int bucket, void* p) {
    auto& list = free_[bucket];
    if (list.size() >= kPerBucket) return false;
    list.push_back(p);
    return true;
  }

 private:
  std::vector<void*> free_[kBuckets];
};

BlockCache& block_cache() {
  thread_local BlockCache cache;
  return cache;
}

// Frees a block that Storage::allocate aligned inside a malloc'd one (`raw`).
void free_inner_block(void* /*data*/, size_t /*nbytes*/, void* raw) { std::free(raw); }

void free_host_block(void* data, size_t nbytes, void* /*context*/) {
  const int bucket = BlockCache::bucket_of(nbytes);
  if (bucket < 0 || !block_cache().give(bucket, data)) std::free(data);
}

void check_cpu_index(int32_t /*device_index*/) {}  // validate_device() checked -1 or 0

std::shared_ptr<Storage> allocate_host(size_t nbytes, int32_t /*device_index*/) {
  return Storage::allocate(nbytes);
}

constexpr DeviceHooks kCpuHooks = {device::kCPU,  "CPU",         check_cpu_index,
                                   allocate_host, copy_elements, nullptr};

}  // namespace

const DeviceHooks& cpu_hooks() { return kCpuHooks; }

const DeviceHooks& hooks_for(int32_t device_type) {
  validate_device(device_type, device_type == device::kCPU ? -1 : 0);
  if (device_type == device::kCPU) return kCpuHooks;
  const DeviceHooks* accelerator = accelerator_hooks();
  if (accelerator != nullptr && accelerator->device_type == device_type) return *accelerator;
  throw ShimError(std::string("this slim shim library holds ") +
                  (accelerator != nullptr ? std::string("CPU and ") + accelerator->name : "CPU") +
                  " tensors only, got device type " + std::to_string(device_type));
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  const int bucket = BlockCache::bucket_of(nbytes);
  size_t rounded = ((nbytes == 0 ? 1 : nbytes) + 63) / 64 * 64;
  if (bucket < 0) {
    // Not aligned_alloc: glibc cuts an aligned block out of a larger free
    // chunk (size + alignment + slack), so a freed block never serves the next
    // aligned request of its own size, and the buffers a blob frees and asks
    // for again on every run keep landing in fresh heap (the transformer
    // block, ~0.8 MB of live buffers, held 1.3 MB more after 3 runs and 2.8 MB
    // more after 30). A malloc'd block aligned inside it serves the next
    // request of its size as it is.
    void* raw = std::malloc(rounded + 63);
    if (raw == nullptr) throw ShimError("out of memory allocating " + std::to_string(nbytes));
    void* data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(raw) + 63) & ~uintptr_t{63});
    return adopt(data, nbytes, kCpuHooks, free_inner_block, raw);
  }
  rounded = BlockCache::bucket_size(bucket);
  void* data = block_cache().take(bucket);
  if (data == nullptr) data = std::aligned_alloc(64, rounded);
  if (data == nullptr) throw ShimError("out of memory allocating " + std::to_string(nbytes));
  return adopt(data, nbytes, kCpuHooks, free_host_block, nullptr);
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes) {
  return borrow(data, nbytes, kCpuHooks);
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, const DeviceHooks& hooks) {
  return std::make_shared<Storage>(Key{}, data, nbytes, &hooks, nullptr, nullptr);
}

std::shared_ptr<Storage> Storage::adopt(void* data, size_t nbytes, const DeviceHooks& hooks,
                                        Deleter deleter, void* context) {
  try {
    return std::make_shared<Storage>(Key{}, data, nbytes, &hooks, deleter, context);
  } catch (...) {
    deleter(data, nbytes, context);
    throw;
  }
}

Storage::~Storage() {
  if (deleter_ != nullptr) deleter_(data_, nbytes_, context_);
}

namespace {

// Serialises giving back and rebuilding: both are rare (once per packed
// weight), and a rebuild must not overlap the give-back it undoes.
std::mutex& give_back_mutex() {
  static std::mutex mutex;
  return mutex;
}

// SHIMKIT_KEEP_PLAIN_WEIGHTS=1 keeps every constant's bytes resident next to
// its packed copy (the memory the stand-ins save, measured in their absence).
bool keep_plain_weights() {
  static const bool keep = [] {
    const char* value = std::getenv("SHIMKIT_KEEP_PLAIN_WEIGHTS");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return keep;
}

}  // namespace

bool Storage::allow_stand_in() {
  stand_in_allowed_ = constant_;
  return stand_in_allowed_;
}

void Storage::rebuild() const {
  std::lock_guard<std::mutex> lock(give_back_mutex());
  if (!given_back_.load(std::memory_order_relaxed)) return;  // rebuilt meanwhile
  stand_in_->write_plain(data_);
  stand_in_.reset();
  given_back_.store(false, std::memory_order_release);
}

namespace {

// Stands in for a constant whose stand-in failed halfway, after part of its
// pages had gone back: its bytes exist nowhere any more.
class LostBytes : public Storage::StandIn {
 public:
  explicit LostBytes(std::string why) : why_(std::move(why)) {}
  void write_plain(void*) const override {
    throw ShimError("a constant's bytes were lost while its packed copy was made: " + why_);
  }

 private:
  std::string why_;
};

}  // namespace

bool Storage::give_back(std::shared_ptr<const StandIn> stand_in,
                        const std::function<void(const DoneUpTo& done)>& make) {
  if (!stand_in_allowed_ || owns() || hooks_->device_type != device::kCPU || keep_plain_weights()) {
    return false;
  }
  // Only whole pages can go back; the partial ones at either end stay (they
  // may hold a neighbouring constant's bytes).
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t begin = (start + page - 1) / page * page;
  const uintptr_t end = (start + nbytes_) / page * page;
  if (end <= begin) return false;
  std::lock_guard<std::mutex> lock(give_back_mutex());
  if (given_back_.load(std::memory_order_relaxed)) return false;
  stand_in_ = std::move(stand_in);
  // From here data() waits on the mutex, then rebuilds.
  given_back_.store(true, std::memory_order_release);
  uintptr_t gone = begin;  // pages in [begin, gone) went back
  // A private anonymous page given back reads as zeros when touched again:
  // data() rebuilds the bytes before it hands out their address.
  auto give_back_below = [&](uintptr_t limit) {
    limit = std::min(limit / page * page, end);
    if (limit <= gone) return;
    madvise(reinterpret_cast<void*>(gone), limit - gone, MADV_DONTNEED);
    gone = limit;
  };
  try {
    make([&](size_t bytes) { give_back_below(start + std::min(bytes, nbytes_)); });
  } catch (const std::exception& e) {
    if (gone == begin) {  // nothing went back: the plain bytes still serve
      stand_in_.reset();
      given_back_.store(false, std::memory_order_release);
      throw;
    }
    stand_in_ = std::make_shared<LostBytes>(e.what());
    throw;
  }
  give_back_below(end);
  return true;
}

void Storage::keep_derived(std::shared_ptr<const void> derived) {
  static std::mutex mutex;  // rare: once per packed weight
  std::lock_guard<std::mutex> lock(mutex);
  derived_.push_back(std::move(derived));
}

int64_t checked_span_elements(const int64_t* sizes, const int64_t* strides, size_t ndim) {
  // Elements from offset 0 to one past the furthest reachable element.
  int64_t span = 1;
  for (size_t i = 0; i < ndim; ++i) {
    if (sizes[i] < 0) throw ShimError("negative size " + std::to_string(sizes[i]));
    if (sizes[i] == 0) return 0;
  }
  for (size_t i = 0; i < ndim; ++i) {
    if (strides[i] < 0) throw ShimError("negative stride " + std::to_string(strides[i]));
    int64_t term = 0;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &term) ||
        __builtin_add_overflow(span, term, &span)) {
      throw ShimError("tensor geometry overflows");
    }
  }
  return span;
}

SlimTensor::SlimTensor(std::shared_ptr<Storage> storage, const int64_t* sizes,
                       const int64_t* strides, int64_t ndim, int64_t storage_offset, int32_t dtype,
                       int32_t device_type, int32_t device_index)
    : storage_(std::move(storage)),
      storage_offset_(storage_offset),
      dtype_(dtype),
      device_type_(device_type),
      device_index_(device_index) {
  if (ndim < 0 || ndim > 64) throw ShimError("bad number of dimensions " + std::to_string(ndim));
  if (ndim > 0 && sizes == nullptr) throw ShimError("null sizes");
  element_size(dtype);  // validates
  validate_device(device_type, device_index);
  sizes_.assign(sizes, static_cast<size_t>(ndim));
  if (strides != nullptr) {
    strides_.assign(strides, static_cast<size_t>(ndim));
  } else {
    const std::vector<int64_t> contiguous = contiguous_strides(sizes_.vec());
    strides_.assign(contiguous.data(), contiguous.size());
  }
  if (storage_offset < 0) throw ShimError("negative storage offset");
  if (storage_ != nullptr && storage_->hooks().device_type != device_type) {
    throw ShimError(std::string("a tensor of device type ") + std::to_string(device_type) +
                    " cannot view " + storage_->hooks().name + " memory");
  }
  check_in_bounds();
}

void SlimTensor::check_in_bounds() const {
  const int64_t span = checked_span_elements(sizes_.data(), strides_.data(), sizes_.size());
  if (span == 0 || storage_ == nullptr) return;
  const int64_t bytes_needed = (storage_offset_ + span) * static_cast<int64_t>(itemsize());
  if (bytes_needed > static_cast<int64_t>(storage_->nbytes())) {
    throw ShimError("view needs " + std::to_string(bytes_needed) + " bytes but storage has " +
                    std::to_string(storage_->nbytes()));
  }
}

namespace {

// Sizes, strides (contiguous when null) and bytes of a new tensor.
struct NewGeometry {
  DimVector sizes;
  DimVector strides;
  size_t nbytes = 0;
};

NewGeometry new_geometry(const int64_t* sizes, const int64_t* strides, int64_t ndim,
                         int32_t dtype) {
  if (ndim < 0 || ndim > 64) throw ShimError("bad number of dimensions " + std::to_string(ndim));
  if (ndim > 0 && sizes == nullptr) throw ShimError("null sizes");
  NewGeometry g;
  g.sizes.assign(sizes, static_cast<size_t>(ndim));
  if (strides != nullptr) {
    g.strides.assign(strides, static_cast<size_t>(ndim));
  } else {
    const std::vector<int64_t> contiguous = contiguous_strides(g.sizes.vec());
    g.strides.assign(contiguous.data(), contiguous.size());
  }
  const int64_t span = checked_span_elements(g.sizes.data(), g.strides.data(), g.sizes.size());
  g.nbytes = static_cast<size_t>(span) * element_size(dtype);
  return g;
}

}  // namespace

SlimTensor SlimTensor::empty(const int64_t* sizes, const int64_t* strides, int64_t ndim,
                             int32_t dtype, int32_t device_type, int32_t device_index) {
  validate_device(device_type, device_index);
  const DeviceHooks& hooks = hooks_for(device_type);
  hooks.check_index(device_index);
  NewGeometry g = new_geometry(sizes, strides, ndim, dtype);
  std::shared_ptr<Storage> storage = hooks.allocate(g.nbytes, device_index);
  return SlimTensor(Checked{}, std::move(storage), std::move(g.sizes), std::move(g.strides), dtype,
                    device_type, device_index);
}

SlimTensor SlimTensor::empty_pinned(const int64_t* sizes, const int64_t* strides, int64_t ndim,
                                    int32_t dtype) {
  NewGeometry g = new_geometry(sizes, strides, ndim, dtype);
  const DeviceHooks* accelerator = accelerator_hooks();
  std::shared_ptr<Storage> storage = accelerator != nullptr && accelerator->allocate_pinned
                                         ? accelerator->allocate_pinned(g.nbytes)
                                         : Storage::allocate(g.nbytes);
  return SlimTensor(Checked{}, std::move(storage), std::move(g.sizes), std::move(g.strides), dtype,
                    device::kCPU, -1);
}

int64_t SlimTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes_) n *= s;
  return n;
}

void* SlimTensor::data_ptr() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + storage_offset_ * static_cast<int64_t>(itemsize());
}

bool SlimTensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (sizes_[i] == 1) continue;
    if (sizes_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

bool SlimTensor::is_channels_last() const {
  if (dim() != 4 && dim() != 5) return false;
  // c10's order: channels innermost, then the spatial dims from the last.
  const std::vector<int> order =
      dim() == 4 ? std::vector<int>{1, 3, 2, 0} : std::vector<int>{1, 4, 3, 2, 0};
  int64_t min = 0;
  if (strides_[1] == 0) return false;
  for (int d : order) {
    if (sizes_[d] == 0) return false;
    if (strides_[d] < min) return false;
    if (d == 0 && min == strides_[1]) return false;
    min = strides_[d];
    if (sizes_[d] > 1) min *= sizes_[d];
  }
  return true;
}

SlimTensor SlimTensor::view(const int64_t* sizes, const int64_t* strides, int64_t ndim,
                            int64_t storage_offset) const {
  if (!defined()) throw ShimError("view of an undefined tensor");
  return SlimTensor(storage_, sizes, strides, ndim, storage_offset, dtype_, device_type_,
                    device_index_);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

std::vector<int64_t> dense_strides_like(const std::vector<int64_t>& sizes,
                                        const std::vector<int64_t>& strides) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  // Innermost (smallest stride) first; ties keep the later dim inner.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (strides[a] != strides[b]) return strides[a] < strides[b];
    return a > b;
  });
  std::vector<int64_t> out(sizes.size());
  int64_t acc = 1;
  for (size_t d : order) {
    out[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return out;
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes) {
  if (sizes.size() != 4 && sizes.size() != 5) {
    throw ShimError("channels_last needs 4 or 5 dimensions");
  }
  // Channels innermost, then the spatial dims in order, the batch outermost.
  std::vector<int64_t> strides(sizes.size());
  int64_t acc = std::max<int64_t>(sizes[1], 1);
  strides[1] = 1;
  for (size_t d = sizes.size(); d-- > 2;) {
    strides[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  strides[0] = acc;
  return strides;
}

namespace {

bool is_floating(int32_t dtype) {
  return dtype == dtype::kFloat32 || dtype == dtype::kFloat64 || dtype == dtype::kFloat16 ||
         dtype == dtype::kBFloat16;
}

double load_double(const char* p, int32_t dtype) {
  switch (dtype) {
    case dtype::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case dtype::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case dtype::kFloat16:
    case dtype::kBFloat16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return dtype == dtype::kFloat16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
    }
    default:
      break;
  }
  throw ShimError(std::string("cannot convert from ") + dtype_name(dtype));
}

int64_t load_int(const char* p, int32_t dtype) {
  switch (dtype) {
    case dtype::kBool:
      return *reinterpret_cast<const uint8_t*>(p) != 0;
    case dtype::kUInt8:
      return *reinterpret_cast<const uint8_t*>(p);
    case dtype::kInt8:
      return *reinterpret_cast<const int8_t*>(p);
    case dtype::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case dtype::kUInt16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case dtype::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case dtype::kUInt32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case dtype::kInt64:
    case dtype::kUInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      break;
  }
  return static_cast<int64_t>(load_double(p, dtype));
}

template <typename T>
void store_as(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

void store(char* p, int32_t dtype, double dv, int64_t iv, bool from_float) {
  switch (dtype) {
    case dtype::kFloat32:
      store_as<float>(p, from_float ? static_cast<float>(dv) : static_cast<float>(iv));
      return;
    case dtype::kFloat64:
      store_as<double>(p, from_float ? dv : static_cast<double>(iv));
      return;
    case dtype::kFloat16:
    case dtype::kBFloat16: {
      const float f = from_float ? static_cast<float>(dv) : static_cast<float>(iv);
      store_as<uint16_t>(p,
                         dtype == dtype::kFloat16 ? float_to_half_bits(f) : float_to_bf16_bits(f));
      return;
    }
    default:
      break;
  }
  const int64_t v = from_float ? static_cast<int64_t>(dv) : iv;
  switch (dtype) {
    case dtype::kBool:
      store_as<uint8_t>(p, from_float ? dv != 0.0 : iv != 0);
      return;
    case dtype::kUInt8:
      store_as<uint8_t>(p, static_cast<uint8_t>(v));
      return;
    case dtype::kInt8:
      store_as<int8_t>(p, static_cast<int8_t>(v));
      return;
    case dtype::kInt16:
      store_as<int16_t>(p, static_cast<int16_t>(v));
      return;
    case dtype::kUInt16:
      store_as<uint16_t>(p, static_cast<uint16_t>(v));
      return;
    case dtype::kInt32:
      store_as<int32_t>(p, static_cast<int32_t>(v));
      return;
    case dtype::kUInt32:
      store_as<uint32_t>(p, static_cast<uint32_t>(v));
      return;
    case dtype::kInt64:
    case dtype::kUInt64:
      store_as<int64_t>(p, v);
      return;
    default:
      break;
  }
  throw ShimError(std::string("cannot convert to ") + dtype_name(dtype));
}

}  // namespace

void copy_elements(const SlimTensor& dst, const SlimTensor& src) {
  if (dst.sizes() != src.sizes()) throw ShimError("copy between tensors of different sizes");
  const int64_t n = dst.numel();
  if (n == 0) return;
  const size_t dsz = dst.itemsize();
  const size_t ssz = src.itemsize();
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  const bool same = dst.dtype() == src.dtype();
  if (same && dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(d, s, static_cast<size_t>(n) * dsz);
    return;
  }
  const int64_t nd = dst.dim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  const bool src_float = is_floating(src.dtype());
  for (int64_t i = 0; i < n; ++i) {
    int64_t doff = 0, soff = 0;
    for (int64_t k = 0; k < nd; ++k) {
      doff += idx[k] * dst.strides()[k];
      soff += idx[k] * src.strides()[k];
    }
    char* dp = d + doff * static_cast<int64_t>(dsz);
    const char* sp = s + soff * static_cast<int64_t>(ssz);
    if (same) {
      std::memcpy(dp, sp, dsz);
    } else if (src_float) {
      store(dp, dst.dtype(), load_double(sp, src.dtype()), 0, true);
    } else {
      store(dp, dst.dtype(), 0.0, load_int(sp, src.dtype()), false);
    }
    for (int64_t k = nd - 1; k >= 0; --k) {
      if (++idx[k] < dst.sizes()[k]) break;
      idx[k] = 0;
    }
  }
}

void copy_tensor(const SlimTensor& dst, const SlimTensor& src) {
  if (!dst.defined() || !src.defined()) throw ShimError("copy from or to an undefined tensor");
  const SlimTensor& on_device = dst.device_type() != device::kCPU ? dst : src;
  on_device.storage()->hooks().copy(dst, src);
}

}  // namespace shimkit
