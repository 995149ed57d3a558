// shimkit's slim tensor: sizes, strides, storage offset, dtype, device and a
// shared, refcounted storage that owns its memory or borrows it, on the CPU
// or on the device whose hooks it carries.
#ifndef SHIMKIT_SHIMS_SLIM_TENSOR_H_
#define SHIMKIT_SHIMS_SLIM_TENSOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shimkit {

// Numbering of c10::ScalarType, c10::DeviceType, c10::Layout and
// c10::MemoryFormat; blobs only ever see these through the shim getters.
namespace dtype {
constexpr int32_t kUInt8 = 0;
constexpr int32_t kInt8 = 1;
constexpr int32_t kInt16 = 2;
constexpr int32_t kInt32 = 3;
constexpr int32_t kInt64 = 4;
constexpr int32_t kFloat16 = 5;
constexpr int32_t kFloat32 = 6;
constexpr int32_t kFloat64 = 7;
constexpr int32_t kBool = 11;
constexpr int32_t kBFloat16 = 15;
constexpr int32_t kUInt16 = 27;
constexpr int32_t kUInt32 = 28;
constexpr int32_t kUInt64 = 29;
}  // namespace dtype

namespace device {
constexpr int32_t kCPU = 0;
constexpr int32_t kCUDA = 1;
constexpr int32_t kXPU = 12;
constexpr int32_t kMPS = 13;
constexpr int32_t kMeta = 14;
constexpr int32_t kPrivateUse1 = 20;
}  // namespace device

constexpr int32_t kLayoutStrided = 0;
constexpr int32_t kMemoryFormatContiguous = 0;
constexpr int32_t kMemoryFormatPreserve = 1;
constexpr int32_t kMemoryFormatChannelsLast = 2;
constexpr int32_t kMemoryFormatChannelsLast3d = 3;

// The error every shim catches and turns into AOTI_TORCH_FAILURE.
class ShimError : public std::runtime_error {
 public:
  explicit ShimError(const std::string& what) : std::runtime_error(what) {}
};

// Throws ShimError("unsupported dtype N"): element_size's cold path.
[[noreturn]] void throw_unsupported_dtype(int32_t dtype);

// Bytes per element of a supported dtype; throws ShimError otherwise. Inline:
// every data_ptr() and itemsize() asks, many times per blob run.
inline size_t element_size(int32_t dtype) {
  switch (dtype) {
    case dtype::kUInt8:
    case dtype::kInt8:
    case dtype::kBool:
      return 1;
    case dtype::kInt16:
    case dtype::kUInt16:
    case dtype::kFloat16:
    case dtype::kBFloat16:
      return 2;
    case dtype::kInt32:
    case dtype::kUInt32:
    case dtype::kFloat32:
      return 4;
    case dtype::kInt64:
    case dtype::kUInt64:
    case dtype::kFloat64:
      return 8;
    default:
      throw_unsupported_dtype(dtype);
  }
}
// True for dtypes the slim shims can store (element_size would not throw).
bool is_known_dtype(int32_t dtype);
const char* dtype_name(int32_t dtype);

// Throws ShimError naming what is wrong with a device: validate_device's cold path.
[[noreturn]] void throw_bad_device(int32_t device_type, int32_t device_index);

// Validates device type/index read from untrusted metadata: the type must be
// one c10 knows, an accelerator index must not be negative, and CPU stays
// unindexed (-1 or 0). Throws ShimError naming what is wrong.
inline void validate_device(int32_t device_type, int32_t device_index) {
  // c10::DeviceType runs from CPU (0) to PrivateUse1 (20).
  const bool known = device_type >= device::kCPU && device_type <= device::kPrivateUse1;
  const bool index_ok =
      device_type == device::kCPU ? (device_index == -1 || device_index == 0) : device_index >= 0;
  if (!known || !index_ok) throw_bad_device(device_type, device_index);
}

// Sizes or strides: up to kInline dimensions live inside the tensor object
// (no allocation on the hot path), more go to the heap.
class DimVector {
 public:
  static constexpr size_t kInline = 6;
  DimVector() = default;
  DimVector(const int64_t* values, size_t n) { assign(values, n); }
  DimVector(const DimVector& other) { assign(other.data(), other.size()); }
  DimVector(DimVector&& other) noexcept { take(&other); }
  DimVector& operator=(const DimVector& other) {
    if (this != &other) assign(other.data(), other.size());
    return *this;
  }
  DimVector& operator=(DimVector&& other) noexcept {
    if (this != &other) take(&other);
    return *this;
  }
  // Inline: tensors are created and copied several times per shim call.
  void assign(const int64_t* values, size_t n) {
    if (n > kInline) {
      assign_heap(values, n);
      return;
    }
    heap_.reset();
    size_ = n;
    for (size_t i = 0; i < n; ++i) inline_[i] = values[i];
  }
  size_t size() const { return size_; }
  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  bool operator==(const DimVector& other) const;
  bool operator!=(const DimVector& other) const { return !(*this == other); }

 private:
  void assign_heap(const int64_t* values, size_t n);
  // Moves `other`'s dims here (its heap block, or a copy of the inline ones).
  void take(DimVector* other) noexcept {
    size_ = other->size_;
    heap_ = std::move(other->heap_);
    if (!heap_) {
      for (size_t i = 0; i < size_; ++i) inline_[i] = other->inline_[i];
    }
    other->size_ = 0;
  }
  size_t size_ = 0;
  int64_t inline_[kInline] = {};
  std::unique_ptr<int64_t[]> heap_;
};

class Storage;
class SlimTensor;

// What the one shim core needs from a device: allocate on it and copy to and
// from it. Every Storage carries the hooks of the device its memory lives on,
// so the core (shim_core.cpp, slim_tensor.cpp) creates, clones and copies
// tensors without naming a device. The CPU hooks are built in; a library
// links exactly one definition of accelerator_hooks() (shims/cpu for the CPU
// library, shims/cuda for the CUDA one).
struct DeviceHooks {
  int32_t device_type;
  const char* name;  // for messages: "CPU", "CUDA"
  // Throws ShimError unless `device_index` names a device of this type that
  // exists (the type and sign were validated by validate_device()).
  void (*check_index)(int32_t device_index);
  // `nbytes` of uninitialised memory on device `device_index`, owned by the
  // storage it returns.
  std::shared_ptr<Storage> (*allocate)(size_t nbytes, int32_t device_index);
  // dst = src elementwise (equal sizes, any strides and dtypes), where one of
  // them lives on this device and the other on it or on the CPU.
  void (*copy)(const SlimTensor& dst, const SlimTensor& src);
  // Page-locked host memory for aoti_torch_empty_strided_pinned; null when
  // the device has none (ordinary host memory is used then).
  std::shared_ptr<Storage> (*allocate_pinned)(size_t nbytes);
};

// The host's hooks: 64-byte aligned memory, element-wise copies.
const DeviceHooks& cpu_hooks();
// The library's accelerator, or null for a CPU-only library. Defined once per
// library, by the device files linked into it.
const DeviceHooks* accelerator_hooks();
// The hooks of `device_type` (validated first); throws ShimError naming the
// devices this library holds when it holds no tensors of that type.
const DeviceHooks& hooks_for(int32_t device_type);

// A block of memory shared by every tensor that views it, with the hooks of
// the device it lives on.
class Storage {
  struct Key {};

 public:
  // Gives `data` back when the last view is gone; `context` is the
  // allocator's own record of the block.
  using Deleter = void (*)(void* data, size_t nbytes, void* context);

  Storage(Key, void* data, size_t nbytes, const DeviceHooks* hooks, Deleter deleter, void* context)
      : data_(data), nbytes_(nbytes), hooks_(hooks), deleter_(deleter), context_(context) {}
  // Allocates `nbytes` of host memory (64-byte aligned, uninitialised); owns them.
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  // Borrows host memory `data`; the caller keeps it alive longer than every view.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes);
  // Borrows memory of the device `hooks` describe.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, const DeviceHooks& hooks);
  // Takes over memory of the device `hooks` describe; `deleter` frees it.
  static std::shared_ptr<Storage> adopt(void* data, size_t nbytes, const DeviceHooks& hooks,
                                        Deleter deleter, void* context);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  // A copy of a constant's bytes in another layout (a convolution's weights
  // in oneDNN's blocked layout) that can stand in for them: once it does, the
  // constant's pages go back to the system (give_back), and data() rebuilds
  // them if anything asks for the bytes again.
  class StandIn {
   public:
    virtual ~StandIn() = default;
    // Writes the constant's original bytes to `data` (its storage base).
    virtual void write_plain(void* data) const = 0;
  };

  // Address of the block; a given-back constant is rebuilt first.
  void* data() const {
    if (given_back_.load(std::memory_order_acquire)) rebuild();
    return data_;
  }
  size_t nbytes() const { return nbytes_; }
  bool owns() const { return deleter_ != nullptr; }
  const DeviceHooks& hooks() const { return *hooks_; }

  // Marks a borrowed host block as a copied-out constant of the blob: memory
  // the model owns and nothing else writes (the loader proves it while the
  // container is created).
  void mark_constant() { constant_ = true; }
  // Lets a stand-in replace this constant's bytes: the blob's own code reads
  // them only through shim calls, which go through data() (the runtime knows
  // it from the blob's wrapper source). True if the block is a constant.
  bool allow_stand_in();
  // Told by a stand-in's maker that it will not read the constant's first
  // `bytes` again.
  using DoneUpTo = std::function<void(size_t bytes)>;
  // Lets `stand_in` stand in for this constant's bytes, which `make` writes
  // from them, and gives the pages wholly inside the block back to the system
  // as it goes: make(done) reads the bytes front to back and calls done(n)
  // once it no longer needs the first n; the whole pages below n go back then,
  // the rest when make returns. So each byte is held once, plain or packed,
  // not both at the same time. A reader of data() meanwhile waits, then gets
  // the bytes rebuilt. If make throws after pages went back, the bytes are
  // lost: data() throws ShimError from then on.
  // Returns false without calling `make` unless stand-ins are allowed
  // (allow_stand_in); also with SHIMKIT_KEEP_PLAIN_WEIGHTS=1.
  bool give_back(std::shared_ptr<const StandIn> stand_in,
                 const std::function<void(const DoneUpTo& done)>& make);
  // Keeps `derived`, something made from these bytes (a convolution's
  // packed weight), exactly as long as this block: a closed model's packed
  // weights go with its constants.
  void keep_derived(std::shared_ptr<const void> derived);

 private:
  void rebuild() const;

  void* data_;
  size_t nbytes_;
  const DeviceHooks* hooks_;
  Deleter deleter_;
  void* context_;
  bool constant_ = false;
  bool stand_in_allowed_ = false;  // set before the model's first run
  mutable std::atomic<bool> given_back_{false};
  mutable std::shared_ptr<const StandIn> stand_in_;   // guarded by a mutex in slim_tensor.cpp
  std::vector<std::shared_ptr<const void>> derived_;  // guarded by a mutex in slim_tensor.cpp
};

class SlimTensor {
 public:
  // An undefined tensor (aoti_torch_new_uninitialized_tensor).
  SlimTensor() = default;
  SlimTensor(std::shared_ptr<Storage> storage, const int64_t* sizes, const int64_t* strides,
             int64_t ndim, int64_t storage_offset, int32_t dtype, int32_t device_type,
             int32_t device_index);

  // A new owning tensor of the given geometry on the device's memory (its
  // hooks' allocator); strides==nullptr: contiguous.
  static SlimTensor empty(const int64_t* sizes, const int64_t* strides, int64_t ndim, int32_t dtype,
                          int32_t device_type, int32_t device_index);
  // A new CPU tensor in page-locked memory when the library's accelerator
  // has some (DeviceHooks::allocate_pinned), else in ordinary host memory.
  static SlimTensor empty_pinned(const int64_t* sizes, const int64_t* strides, int64_t ndim,
                                 int32_t dtype);

  bool defined() const { return storage_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const;
  const DimVector& sizes() const { return sizes_; }
  const DimVector& strides() const { return strides_; }
  int64_t* sizes_data() { return sizes_.data(); }
  int64_t* strides_data() { return strides_.data(); }
  int64_t storage_offset() const { return storage_offset_; }
  int32_t dtype() const { return dtype_; }
  int32_t device_type() const { return device_type_; }
  int32_t device_index() const { return device_index_; }
  size_t itemsize() const { return element_size(dtype_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Address of element 0 (storage base + offset).
  void* data_ptr() const;
  bool is_contiguous() const;
  // c10's is_channels_last_strides_2d (4-D) and _3d (5-D); false for other ranks.
  bool is_channels_last() const;
  // A view of the same storage with new geometry; `storage_offset` absolute.
  SlimTensor view(const int64_t* sizes, const int64_t* strides, int64_t ndim,
                  int64_t storage_offset) const;

 private:
  // A tensor over new storage sized for geometry empty() already checked
  // (new_geometry): nothing is validated twice on the allocation hot path.
  struct Checked {};
  SlimTensor(Checked, std::shared_ptr<Storage> storage, DimVector sizes, DimVector strides,
             int32_t dtype, int32_t device_type, int32_t device_index)
      : storage_(std::move(storage)),
        sizes_(std::move(sizes)),
        strides_(std::move(strides)),
        dtype_(dtype),
        device_type_(device_type),
        device_index_(device_index) {}
  void check_in_bounds() const;
  std::shared_ptr<Storage> storage_;
  DimVector sizes_;
  DimVector strides_;
  int64_t storage_offset_ = 0;
  int32_t dtype_ = dtype::kFloat32;
  int32_t device_type_ = device::kCPU;
  int32_t device_index_ = -1;
};

// Elements from offset 0 to one past the furthest one a view of `ndim`
// (sizes, strides) reaches: 0 when a size is 0. Throws ShimError on a negative
// size or stride, or when the span overflows.
int64_t checked_span_elements(const int64_t* sizes, const int64_t* strides, size_t ndim);
// Contiguous (row-major) strides for `sizes`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);
// Dense strides that keep the order of `strides` (ATen's infer_dense_strides).
std::vector<int64_t> dense_strides_like(const std::vector<int64_t>& sizes,
                                        const std::vector<int64_t>& strides);
// Channels-last strides for NCHW `sizes` (4-D), or channels_last_3d ones for
// NCDHW `sizes` (5-D).
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes);

// dst[i] = src[i] elementwise over equal sizes, any strides, converting dtype.
// Host memory only (the CPU hooks' copy).
void copy_elements(const SlimTensor& dst, const SlimTensor& src);
// dst = src for tensors on any devices this library holds: the hooks of the
// one that is not on the CPU copy (copy_elements when both are).
void copy_tensor(const SlimTensor& dst, const SlimTensor& src);

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_SLIM_TENSOR_H_
