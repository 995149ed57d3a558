// The shim core: constants, grad mode, lifecycle, attributes, creation,
// views and copies, for tensors of every device the library holds. Memory is
// allocated and copied through the device hooks each storage carries
// (slim_tensor.h), so the CPU and CUDA libraries compile this file as it is.
// Names are renamed to the private ABI by the header.
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace {
thread_local std::string g_last_error;
thread_local bool g_grad_enabled = false;
}  // namespace

void set_last_error(std::string message) { g_last_error = std::move(message); }
}  // namespace shimkit

using shimkit::as_tensor;
using shimkit::check_out;
using shimkit::ShimError;
using shimkit::SlimTensor;
using shimkit::to_handle;
namespace dt = shimkit::dtype;
namespace dev = shimkit::device;

namespace {

// Guarded as `function`: *ret = read(tensor) (null handle or output: failure).
template <typename T, typename Read>
AOTITorchError read_attribute(const char* function, AtenTensorHandle tensor, T* ret, Read read) {
  return shimkit::guard(function, [&]() {
    check_out(ret);
    *ret = read(as_tensor(tensor));
  });
}

// The value of one-element `t` as a C++ value of its own type's compute type
// (float for float16/bfloat16), read on the host, handed to `use`.
template <typename Use>
void with_item(const SlimTensor& t, Use&& use) {
  if (t.numel() != 1) {
    throw ShimError("item of a tensor of " + std::to_string(t.numel()) +
                    " elements (only one-element tensors have an item)");
  }
  const std::vector<int64_t> ones(static_cast<size_t>(t.dim()), 1);  // t's shape
  SlimTensor host = SlimTensor::empty(ones.data(), ones.data(), t.dim(), t.dtype(), dev::kCPU, 0);
  shimkit::copy_tensor(host, t);  // the device's value, on the host
  if (t.dtype() == dt::kBool) {
    use(*static_cast<const uint8_t*>(host.data_ptr()) != 0);
    return;
  }
  shimkit::dispatch_numeric(t.dtype(), "item", [&](auto tag) {
    using T = decltype(tag);
    use(shimkit::Scalar<T>::load(static_cast<const T*>(host.data_ptr())));
  });
}

// Guarded as `function`: *ret = t.item() converted to R (store: how R is
// written, for float16/bfloat16 bits).
template <typename R, typename Store>
AOTITorchError read_item(const char* function, AtenTensorHandle tensor, R* ret, Store store) {
  return shimkit::guard(function, [&]() {
    check_out(ret);
    with_item(as_tensor(tensor), [&](auto value) { *ret = store(value); });
  });
}

// `value` as R; as torch's checked conversion, an integer R must hold it.
template <typename R, typename V>
R item_as(V value) {
  if constexpr (std::is_integral_v<R> && !std::is_same_v<R, bool>) {
    // long double holds every value of the 64-bit integers exactly.
    const auto v = static_cast<long double>(value);
    if (!(v >= static_cast<long double>(std::numeric_limits<R>::min()) &&
          v <= static_cast<long double>(std::numeric_limits<R>::max()))) {
      throw ShimError("item: the value " + std::to_string(static_cast<double>(value)) +
                      " does not fit the integer type asked for");
    }
  }
  return static_cast<R>(value);
}

template <typename R>
AOTITorchError read_item(const char* function, AtenTensorHandle tensor, R* ret) {
  return read_item(function, tensor, ret, [](auto value) { return item_as<R>(value); });
}

// Dimension `d` of `t`, negative counting from the end; throws when out of range.
int64_t checked_dim(const SlimTensor& t, int64_t d) {
  const int64_t nd = t.dim();
  const int64_t w = d < 0 ? d + nd : d;
  if (w < 0 || w >= nd) throw ShimError("dimension " + std::to_string(d) + " out of range");
  return w;
}

}  // namespace

namespace shimkit {
namespace {

// The loader's watch over a container's creation (shimkit_shim_watch_constants).
struct ConstantsWatch {
  bool on = false;
  const unsigned char* source = nullptr;  // null once the copy could not be followed
  size_t size = 0, copied = 0;
  void (*consumed)(void*, size_t) = nullptr;
  void* context = nullptr;
};
thread_local ConstantsWatch t_watch;

// A constant just made over `data` (`nbytes` from its base): follow
// AOTInductor's in-order copy of the embedded section. True when its bytes
// are proven a copy of the section's, made into memory the model owns.
bool note_constant(const void* data, size_t nbytes) {
  ConstantsWatch& w = t_watch;
  if (w.source == nullptr || nbytes == 0) return false;
  // Only bytes proven copied count: the next `nbytes` of the section must
  // equal the constant's (its stored size may be larger than what a view
  // reaches; then the next one no longer matches and the following stops).
  // The first constant follows a small header (AOTInductor's: 16 bytes), the
  // others the padding that aligns each to 64 bytes, so a constant's start is
  // looked for a little past the end of the one before.
  const size_t window = w.copied == 0 ? 4096 : 64;
  size_t at = w.copied;
  auto matches = [&](size_t offset) {
    return offset <= w.size && nbytes <= w.size - offset &&
           std::memcmp(w.source + offset, data, nbytes) == 0;
  };
  while (!matches(at) && at < w.copied + window && at < w.size) ++at;
  if (!matches(at)) {
    w.source = nullptr;
    return false;
  }
  w.copied = at + nbytes;
  w.consumed(w.context, w.copied);
  return true;
}

}  // namespace
}  // namespace shimkit

extern "C" {

void shimkit_shim_watch_constants(const void* source, size_t size,
                                  void (*consumed)(void* context, size_t bytes), void* context) {
  shimkit::t_watch = {
      true,     consumed != nullptr ? static_cast<const unsigned char*>(source) : nullptr,
      size,     0,
      consumed, context};
}

void shimkit_shim_unwatch_constants(void) { shimkit::t_watch = {}; }

int shimkit_shim_allow_stand_in(AtenTensorHandle constant) {
  if (constant == nullptr) return 0;
  const std::shared_ptr<shimkit::Storage>& storage = as_tensor(constant).storage();
  return storage != nullptr && storage->allow_stand_in() ? 1 : 0;
}

const char* shimkit_shim_last_error(void) { return shimkit::g_last_error.c_str(); }
void shimkit_shim_clear_error(void) { shimkit::g_last_error.clear(); }

int32_t aoti_torch_device_type_cpu(void) { return dev::kCPU; }
int32_t aoti_torch_device_type_cuda(void) { return dev::kCUDA; }
int32_t aoti_torch_device_type_meta(void) { return dev::kMeta; }
int32_t aoti_torch_device_type_xpu(void) { return dev::kXPU; }
int32_t aoti_torch_device_type_mps(void) { return dev::kMPS; }
int32_t aoti_torch_device_type_privateuse1(void) { return dev::kPrivateUse1; }
int32_t aoti_torch_dtype_bfloat16(void) { return dt::kBFloat16; }
int32_t aoti_torch_dtype_float16(void) { return dt::kFloat16; }
int32_t aoti_torch_dtype_float32(void) { return dt::kFloat32; }
int32_t aoti_torch_dtype_float64(void) { return dt::kFloat64; }
int32_t aoti_torch_dtype_uint8(void) { return dt::kUInt8; }
int32_t aoti_torch_dtype_uint16(void) { return dt::kUInt16; }
int32_t aoti_torch_dtype_uint32(void) { return dt::kUInt32; }
int32_t aoti_torch_dtype_uint64(void) { return dt::kUInt64; }
int32_t aoti_torch_dtype_int8(void) { return dt::kInt8; }
int32_t aoti_torch_dtype_int16(void) { return dt::kInt16; }
int32_t aoti_torch_dtype_int32(void) { return dt::kInt32; }
int32_t aoti_torch_dtype_int64(void) { return dt::kInt64; }
int32_t aoti_torch_dtype_bool(void) { return dt::kBool; }
size_t aoti_torch_dtype_element_size(int32_t dtype) {
  return shimkit::is_known_dtype(dtype) ? shimkit::element_size(dtype) : 0;
}
int32_t aoti_torch_layout_strided(void) { return shimkit::kLayoutStrided; }
int32_t aoti_torch_memory_format_contiguous_format(void) {
  return shimkit::kMemoryFormatContiguous;
}
int32_t aoti_torch_memory_format_channels_last(void) { return shimkit::kMemoryFormatChannelsLast; }
int32_t aoti_torch_memory_format_channels_last_3d(void) {
  return shimkit::kMemoryFormatChannelsLast3d;
}
int32_t aoti_torch_memory_format_preserve_format(void) { return shimkit::kMemoryFormatPreserve; }

bool aoti_torch_grad_mode_is_enabled(void) { return shimkit::g_grad_enabled; }
void aoti_torch_grad_mode_set_enabled(bool enabled) { shimkit::g_grad_enabled = enabled; }

AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor) {
  return SHIMKIT_GUARD({ delete &as_tensor(tensor); });
}

AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.data_ptr(); });
}

AOTITorchError aoti_torch_get_storage_size(AtenTensorHandle tensor, int64_t* ret) {
  return read_attribute(__func__, tensor, ret, [](const SlimTensor& t) {
    return t.defined() ? static_cast<int64_t>(t.storage()->nbytes()) : 0;
  });
}

AOTITorchError aoti_torch_get_storage_numel(AtenTensorHandle tensor, int64_t* ret) {
  return read_attribute(__func__, tensor, ret, [](const SlimTensor& t) {
    return t.defined() ? static_cast<int64_t>(t.storage()->nbytes() / t.itemsize()) : 0;
  });
}

AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.dim(); });
}

AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.numel(); });
}

AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.sizes_data(); });
}

AOTITorchError aoti_torch_get_size(AtenTensorHandle tensor, int64_t d, int64_t* ret) {
  return read_attribute(__func__, tensor, ret,
                        [d](const SlimTensor& t) { return t.sizes()[checked_dim(t, d)]; });
}

AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.strides_data(); });
}

AOTITorchError aoti_torch_get_stride(AtenTensorHandle tensor, int64_t d, int64_t* ret) {
  return read_attribute(__func__, tensor, ret,
                        [d](const SlimTensor& t) { return t.strides()[checked_dim(t, d)]; });
}

AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.dtype(); });
}

AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.device_type(); });
}

AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.device_index(); });
}

AOTITorchError aoti_torch_get_layout(AtenTensorHandle tensor, int32_t* ret) {
  return read_attribute(__func__, tensor, ret,
                        [](const SlimTensor&) { return shimkit::kLayoutStrided; });
}

AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.storage_offset(); });
}

AOTITorchError aoti_torch_is_contiguous(AtenTensorHandle tensor, bool* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.is_contiguous(); });
}

AOTITorchError aoti_torch_is_defined(AtenTensorHandle tensor, bool* ret) {
  return read_attribute(__func__, tensor, ret, [](SlimTensor& t) { return t.defined(); });
}

AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig, AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    *ret = to_handle(SlimTensor(as_tensor(orig)));
  });
}

AOTITorchError aoti_torch_new_uninitialized_tensor(AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    *ret = to_handle(SlimTensor());
  });
}

AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim,
                                              const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                              int64_t storage_offset, AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    const SlimTensor& t = as_tensor(self);
    if (strides_ptr == nullptr && ndim > 0) throw ShimError("null strides");
    // The offset is an increment on self's offset (torch::inductor::_reinterpret_tensor).
    *ret = to_handle(t.view(sizes_ptr, strides_ptr, ndim, t.storage_offset() + storage_offset));
  });
}

AOTITorchError aoti_torch_as_strided(AtenTensorHandle self, const int64_t* sizes_ptr,
                                     const int64_t* strides_ptr, AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    const SlimTensor& t = as_tensor(self);
    *ret = to_handle(t.view(sizes_ptr, strides_ptr, t.dim(), t.storage_offset()));
  });
}

AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes_ptr,
                                        const int64_t* strides_ptr, int32_t dtype,
                                        int32_t device_type, int32_t device_index,
                                        AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    if (ndim > 0 && sizes_ptr == nullptr) throw ShimError("null sizes");
    *ret = to_handle(
        SlimTensor::empty(sizes_ptr, strides_ptr, ndim, dtype, device_type, device_index));
  });
}

AOTITorchError aoti_torch_empty_strided_pinned(int64_t ndim, const int64_t* sizes_ptr,
                                               const int64_t* strides_ptr, int32_t dtype,
                                               int32_t device_type, int32_t device_index,
                                               AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    shimkit::validate_device(device_type, device_index);
    if (device_type != dev::kCPU) {
      throw ShimError("pinned memory is host memory: device type must be CPU, got " +
                      std::to_string(device_type));
    }
    *ret = to_handle(SlimTensor::empty_pinned(sizes_ptr, strides_ptr, ndim, dtype));
  });
}

AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim,
                                                  const int64_t* sizes_ptr,
                                                  const int64_t* strides_ptr,
                                                  int64_t storage_offset, int32_t dtype,
                                                  int32_t device_type, int32_t device_index,
                                                  AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    shimkit::validate_device(device_type, device_index);
    const shimkit::DeviceHooks& hooks = shimkit::hooks_for(device_type);
    hooks.check_index(device_index);
    shimkit::check_blob_shape(ndim, sizes_ptr, strides_ptr);
    if (storage_offset < 0) throw ShimError("negative storage offset");
    // `data` is the storage base (on the device: the blob's constants, kept
    // alive by the caller); the view starts `storage_offset` elements in.
    const size_t nbytes =
        shimkit::blob_nbytes(data, ndim, sizes_ptr, strides_ptr, storage_offset, dtype);
    std::shared_ptr<shimkit::Storage> storage = shimkit::Storage::borrow(data, nbytes, hooks);
    if (shimkit::t_watch.on && device_type == dev::kCPU && shimkit::note_constant(data, nbytes)) {
      storage->mark_constant();
    }
    *ret = to_handle(SlimTensor(std::move(storage), sizes_ptr, strides_ptr, ndim, storage_offset,
                                dtype, device_type, device_index));
  });
}

AOTITorchError aoti_torch_create_tensor_from_blob_v2(
    void* data, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
    int64_t storage_offset, int32_t dtype, int32_t device_type, int32_t device_index,
    AtenTensorHandle* ret, int32_t layout, const uint8_t* opaque_metadata,
    int64_t opaque_metadata_size) {
  (void)opaque_metadata;
  if (!shimkit::plain_strided_blob(__func__, layout, opaque_metadata_size)) {
    return AOTI_TORCH_FAILURE;
  }
  return aoti_torch_create_tensor_from_blob(data, ndim, sizes_ptr, strides_ptr, storage_offset,
                                            dtype, device_type, device_index, ret);
}

// A new tensor on t's device with t's values and `strides`.
static SlimTensor clone_with_strides(const SlimTensor& t, const std::vector<int64_t>& strides) {
  if (!t.defined()) throw ShimError("clone of an undefined tensor");
  SlimTensor out = SlimTensor::empty(t.sizes().data(), strides.data(), t.dim(), t.dtype(),
                                     t.device_type(), t.device_index());
  shimkit::copy_tensor(out, t);
  return out;
}

AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    const SlimTensor& t = as_tensor(self);
    // preserve_format: dense tensors keep their stride order, others go contiguous.
    *ret = to_handle(
        clone_with_strides(t, shimkit::dense_strides_like(t.sizes().vec(), t.strides().vec())));
  });
}

AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle* ret) {
  return SHIMKIT_GUARD({
    check_out(ret);
    const SlimTensor& t = as_tensor(self);
    *ret = to_handle(clone_with_strides(t, t.strides().vec()));
  });
}

AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking) {
  (void)non_blocking;
  return SHIMKIT_GUARD({ shimkit::copy_tensor(as_tensor(self), as_tensor(src)); });
}

AOTITorchError aoti_torch_tensor_copy_(AtenTensorHandle src, AtenTensorHandle dst) {
  return aoti_torch_copy_(dst, src, 0);
}

#define SHIMKIT_ITEM(name, type)                                                    \
  AOTITorchError aoti_torch_item_##name(AtenTensorHandle tensor, type* ret_value) { \
    return read_item("aoti_torch_item_" #name, tensor, ret_value);                  \
  }
SHIMKIT_ITEM(float32, float)
SHIMKIT_ITEM(float64, double)
SHIMKIT_ITEM(uint8, uint8_t)
SHIMKIT_ITEM(uint16, uint16_t)
SHIMKIT_ITEM(uint32, uint32_t)
SHIMKIT_ITEM(uint64, uint64_t)
SHIMKIT_ITEM(int8, int8_t)
SHIMKIT_ITEM(int16, int16_t)
SHIMKIT_ITEM(int32, int32_t)
SHIMKIT_ITEM(int64, int64_t)
SHIMKIT_ITEM(bool, bool)
#undef SHIMKIT_ITEM

AOTITorchError aoti_torch_item_float16(AtenTensorHandle tensor, uint16_t* ret_value) {
  return read_item("aoti_torch_item_float16", tensor, ret_value, [](auto value) {
    return shimkit::float_to_half_bits(static_cast<float>(value));
  });
}

AOTITorchError aoti_torch_item_bfloat16(AtenTensorHandle tensor, uint16_t* ret_value) {
  return read_item("aoti_torch_item_bfloat16", tensor, ret_value, [](auto value) {
    return shimkit::float_to_bf16_bits(static_cast<float>(value));
  });
}

AOTITorchError aoti_torch_assign_tensors(AtenTensorHandle src, AtenTensorHandle dst) {
  return SHIMKIT_GUARD({ as_tensor(dst) = as_tensor(src); });
}

AOTITorchError aoti_torch_assign_tensors_out(AtenTensorHandle src, AtenTensorHandle* ret_dst) {
  return SHIMKIT_GUARD({
    check_out(ret_dst);
    *ret_dst = to_handle(SlimTensor(as_tensor(src)));
  });
}

AOTITorchError aoti_torch_proxy_executor_call_function(AOTIProxyExecutorHandle proxy_executor,
                                                       int extern_node_index, int num_ints,
                                                       int64_t* flatten_int_args, int num_tensors,
                                                       AtenTensorHandle* flatten_tensor_args) {
  (void)proxy_executor;
  (void)num_ints;
  (void)flatten_int_args;
  (void)num_tensors;
  (void)flatten_tensor_args;
  shimkit::set_last_error(std::string(__func__) + ": extern node " +
                          std::to_string(extern_node_index) +
                          " needs libtorch's proxy executor; the slim runtime has none");
  return AOTI_TORCH_FAILURE;
}

}  // extern "C"
